"""The video frame of a multi-agent episode: the shared game frame on the left and one panel column per agent.

Each agent's column shows, from the top: its name and state (``acting``, ``waiting`` for its turn, ``done``, or
``gone`` greyed out from the frame it left the game), the reward it received with the frame and its return so
far, the action it took and its value; its own observation as a thumbnail when that is an image (tinted by its
saliency map when the recorder computes saliency; a vector observation's saliency, MPE's, as one bar per feature
(:class:`~rlviz.draw.panels_features.FeaturePanel`) in the same place); its action bars
(:class:`~rlviz.draw.panels_discrete.BarsPanel`, masked actions included; Box actions:
:class:`~rlviz.draw.panels_continuous.GaussianPanel`); its value against its return-to-go
(:class:`~rlviz.draw.plot.TimePlot`) over its own decisions; with a recurrent state the loop annotated
(``annotate(state=...)``), its memory under it (``|h|``, ``|h - h_prev|``: :mod:`rlviz.draw.panels_memory`'s series).

Many agents: up to ``AgentsLayout.max_columns`` (8) columns side by side; more agents wrap into further rows of
columns under the first ("grouped": pistonball's 20 pistons are three rows of up to 8), each cell without the
thumbnail and with a shorter plot so that the frame stays within a few rows of text per agent.

Time: frame t of the video is env step t (frame 0 the reset's). An agent's numbers are indexed by its decisions
(k = 0..K, row K its last observation): :class:`AgentTimeline` maps each frame to the decision it shows
(a parallel env's agents decide at every frame; an AEC env's in turn, holding their last numbers meanwhile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from ..episode.trace import EpisodeInternals
from ..errors import UsageError
from .layout import PanelLayout
from .overlay import ACTOR_COLOR, blend, saliency_to_frame
from .panels_continuous import GaussianPanel
from .panels_discrete import BarsPanel
from .panels_features import FeaturePanel, feature_names, feature_rows
from .panels_memory import memory_plot_series, memory_series
from .plot import TimePlot, value_plot_series
from .style import COLORS, FONT, ceil16, put_text, short, text_width

__all__ = ["AgentsLayout", "AgentTimeline", "AgentsCompositor", "fit_thumbnail", "is_image_observation"]


@dataclass(frozen=True)
class AgentsLayout:
    """How a multi-agent frame looks.

    display_height: the shared game frame is upscaled by an integer factor towards this height (never shrunk).
    column_width: pixels of one agent's column.  max_columns: columns per row; more agents wrap into more rows.
    thumbnail_height: the box an image observation is shrunk (or enlarged, integer nearest) into, when the agents
        fit one row (0: no thumbnails).  plot_height: the value plot's height (half of it beyond one row).
    font_scale: OpenCV Hershey font scale of the columns' text.
    """

    display_height: int = 480
    column_width: int = 220
    max_columns: int = 8
    thumbnail_height: int = 96
    plot_height: int = 80
    font_scale: float = 0.4

    def __post_init__(self) -> None:
        if int(self.column_width) < 160:
            raise UsageError(f"AgentsLayout(column_width={self.column_width}); a column needs at least 160 pixels.")
        if int(self.max_columns) < 1:
            raise UsageError(f"AgentsLayout(max_columns={self.max_columns}); expected 1 or more.")

    def thumbnail_box(self, num_agents: int) -> tuple[int, int] | None:
        """(width, height) a thumbnail fits in, or None when the cells have none (many agents, or switched off)."""
        if num_agents > self.max_columns or self.thumbnail_height <= 0:
            return None
        return int(self.column_width) - 16, int(self.thumbnail_height)


def is_image_observation(obs: Any) -> bool:
    """An observation drawn as a picture: a numeric [H, W] or [H, W, C] (C <= 16) array with both sides >= 8."""
    a = obs if isinstance(obs, np.ndarray) else None
    if a is None or a.dtype.kind not in "uif" or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] > 16):
        return False
    return a.shape[0] >= 8 and a.shape[1] >= 8


def fit_thumbnail(obs: np.ndarray, box: tuple[int, int]) -> np.ndarray:
    """An image observation as uint8 RGB [h, w, 3] fitting ``box`` (width, height), its aspect kept: shrunk
    (nearest neighbour) or enlarged by an integer nearest-neighbour factor. Floats in [0, 1] are scaled to 255;
    stacked frames (3k channels) show the last three, other channel counts the last one in grey."""
    a = np.asarray(obs)
    if a.ndim == 2:
        a = a[:, :, None]
    c = a.shape[2]
    a = a[:, :, -3:] if c >= 3 and c % 3 == 0 else a[:, :, -1:]
    if a.dtype != np.uint8:
        f = a.astype(np.float32)
        top = float(np.nanmax(f)) if f.size else 1.0
        a = np.clip(np.nan_to_num(f * (255.0 if top <= 1.0 else 1.0)), 0, 255).astype(np.uint8)
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    h, w = a.shape[:2]
    bw, bh = box
    s = min(bw / w, bh / h)
    if s >= 1.0:
        k = max(1, int(s))
        return np.ascontiguousarray(np.repeat(np.repeat(a, k, axis=0), k, axis=1))
    size = (max(1, int(w * s)), max(1, int(h * s)))
    # nearest neighbour: one thumbnail per agent and step must cost next to nothing (area averaging: ~100x more)
    return np.ascontiguousarray(cv2.resize(np.ascontiguousarray(a), size, interpolation=cv2.INTER_NEAREST))


@dataclass
class AgentTimeline:
    """One agent over the N+1 frames of an episode.

    name: the agent's id.  internals: its numbers over its K decisions and last observation ([K+1] rows), or None
    (neither a policy nor annotations: the column shows rewards only).  actions: [K, *action_shape].
    action_names: one per bar.  index: int [N+1], the decision frame t shows (-1: none yet).  acting: bool [N+1],
    the agent decides at frame t.  rewards: float [N+1], what it received with frame t (frame 0: 0).
    gone_at: the frame it left the game while others played on (-1: it stayed to the end).
    thumbnails: [K+1, h, w, 3] uint8 (its observation at each decision, :func:`fit_thumbnail`) or None.
    saliency: float [K+1, h', w'] in [0, 1] (its saliency map at each decision, in observation space, normalised over
    its episode) or None: drawn over its thumbnails (:func:`~rlviz.draw.overlay.blend`, the policy's amber); or float
    [K+1, D] for a vector observation: one bar per feature (:class:`~rlviz.draw.panels_features.FeaturePanel`) where
    the thumbnail would be, when the agents fit one row.
    """

    name: str
    internals: EpisodeInternals | None
    actions: np.ndarray
    action_names: tuple[str, ...]
    index: np.ndarray
    acting: np.ndarray
    rewards: np.ndarray
    gone_at: int = -1
    thumbnails: Any = None
    saliency: Any = None


class _Cell:
    """One agent's column: its geometry, its static background and what moves."""

    def __init__(self, tl: AgentTimeline, box: tuple[int, int, int, int], thumb_h: int, plot_h: int, fs: float,
                 lh: int, label: str = "") -> None:
        self.tl, self.box, self.fs, self.lh = tl, box, fs, lh
        x, y, w, _ = box
        m = 8
        self.x, self.m = x + m, m
        self.thumb_y = y + m + 4 * lh
        y_bars = self.thumb_y + (thumb_h + 6 if thumb_h else 0) + lh
        it = tl.internals
        names = [short(n, 8) for n in tl.action_names]
        label_w = max(text_width(n, fs) for n in names) + 6
        num_w = text_width("-0.00", fs) + 4
        rows = len(names)
        row_h = max(lh, 14) if rows <= 9 else max(10, lh - 3)
        bar_rows = tuple(y_bars + i * row_h for i in range(rows))
        y_plot = y_bars + rows * row_h + (lh if it is not None and it.mean is not None else 0) + lh + 4
        plot = (x + m, y_plot, w - 2 * m, plot_h)
        self.layout = PanelLayout(width=0, height=0, scale=1, game=(0, 0, 0, 0), panel_x=x, bar_x0=x + m + label_w,
                                  bar_len=w - 2 * m - label_w - num_w, bar_rows=bar_rows, bar_h=row_h - 3, plot=plot,
                                  entropy_bar=(0, 0, 0, 0))
        self.names = names
        self.bars: BarsPanel | GaussianPanel | None = None
        self.plot: TimePlot | None = None
        self.memory: TimePlot | None = None
        if it is not None:
            k = int(it.logits.shape[0]) - 1
            if it.mean is not None:
                self.bars = GaussianPanel(it, tl.actions, self.layout, fs)
            else:
                self.bars = BarsPanel(it, self.layout, fs)
            self.plot = TimePlot(plot, k, value_plot_series(it), fs)
            if it.memory is not None:  # annotate(state=...): the loop's recurrent state, |h| and |h - h_prev|
                mem = (x + m, y_plot + plot_h + lh + 6, w - 2 * m, _memory_height(plot_h))
                self.memory = TimePlot(mem, k, memory_plot_series(memory_series(it)), fs)
        self.returns = np.cumsum(np.asarray(tl.rewards, np.float64))
        self._name_w = text_width(tl.name, fs * 1.1)
        self._widths: dict[str, int] = {}
        self._labels: dict[tuple[Any, ...], tuple[int, int, int, int, np.ndarray]] = {}
        self.features: FeaturePanel | None = None  # a vector observation's saliency: a bar per feature
        if thumb_h and tl.thumbnails is None and tl.saliency is not None and np.ndim(tl.saliency) == 2:
            d = int(np.shape(tl.saliency)[1])
            self.features = FeaturePanel(tl.saliency, feature_names(label, d), (x + m, self.thumb_y + lh, w - 2 * m),
                                         feature_rows(d, lh), fs)

    @staticmethod
    def height(num_actions: int, thumb_h: int, plot_h: int, lh: int, box_actions: bool, memory: bool = False) -> int:
        row_h = max(lh, 14) if num_actions <= 9 else max(10, lh - 3)
        return 8 + 4 * lh + (thumb_h + 6 if thumb_h else 0) + lh + num_actions * row_h + lh * box_actions + \
            lh + 4 + plot_h + 8 + ((lh + 6 + _memory_height(plot_h)) if memory else 0)

    def draw_static(self, img: np.ndarray) -> None:
        x, y, w, h = self.box
        cv2.rectangle(img, (x + 2, y + 2), (x + w - 3, y + h - 3), COLORS["track"], 1)
        if self.features is not None:
            put_text(img, "saliency per feature", self.x, self.thumb_y + self.lh - 5, "dim", self.fs * 0.9)
            self.features.draw_static(img)
        if self.bars is None:
            put_text(img, "no internals (policy or annotate)", self.x, self.layout.bar_rows[0], "dim", self.fs)
            return
        put_text(img, self.bars.title, self.x, self.layout.bar_rows[0] - 4, "dim", self.fs * 0.9)
        self.bars.draw_static(img, self.names, self.x)
        assert self.plot is not None
        self.plot.draw_static(img, [(label.split(" (")[0], color) for label, _, color in self.plot.series])
        if self.memory is not None:
            self.memory.draw_static(img, [(_MEMORY_LEGEND.get(label, label), color) for label, _, color in
                                          self.memory.series])

    def draw_traces(self, img: np.ndarray) -> None:
        if self.plot is not None:
            self.plot.draw_traces(img)
        if self.memory is not None:
            self.memory.draw_traces(img)


    def _width(self, s: str) -> int:
        """The width of a state text (a handful per agent), measured once."""
        w = self._widths.get(s)
        if w is None:
            w = self._widths[s] = text_width(s, self.fs)
        return w

    def _label(self, img: np.ndarray, s: str, x: int, y: int, color: str, scale: float) -> None:
        """``put_text`` of a line that repeats from frame to frame (the name, the state), drawn once over the
        cell's static background and then copied: the same pixels, without drawing the text again. Needs the
        line's box to hold the background only when it is drawn (the cell's first texts, inside the cell)."""
        key = (s, x, y, color, scale)
        hit = self._labels.get(key)
        if hit is None:
            (w, h), base = cv2.getTextSize(s, FONT, scale, 1)
            y0, y1 = max(0, y - h - 3), min(img.shape[0], y + base + 3)
            x0, x1 = max(0, x - 3), min(img.shape[1], x + w + 3)
            put_text(img, s, x, y, color, scale)
            self._labels[key] = (y0, y1, x0, x1, img[y0:y1, x0:x1].copy())
            return
        y0, y1, x0, x1, patch = hit
        img[y0:y1, x0:x1] = patch
    def draw(self, img: np.ndarray, t: int) -> None:
        tl, lh, fs = self.tl, self.lh, self.fs
        x, y = self.x, self.box[1] + self.m + lh - 4
        k = int(tl.index[t])
        gone = 0 <= tl.gone_at <= t
        acting = bool(tl.acting[t]) and not gone
        self._label(img, short(tl.name, 22), x, y, "chosen" if acting else "text", fs * 1.1)
        state = f"gone at step {tl.gone_at}" if gone else "acting" if acting else "waiting" if k >= 0 else "not yet"
        if not gone and tl.internals is not None and k == tl.internals.logits.shape[0] - 1 and not acting:
            state = "done"
        # right of the name, inside the cell (right-aligned when it would run past it); under a long name
        sx = min(x + 150, self.box[0] + self.box[2] - self.m - self._width(state))
        if sx >= x + self._name_w + 8:
            self._label(img, state, sx, y, "dim", fs)
        else:
            put_text(img, state, x, y + lh, "dim", fs)
        put_text(img, f"reward {float(tl.rewards[t]):+.3g}  return {float(self.returns[t]):.4g}", x, y + lh, "reward", fs)
        it = tl.internals
        action = tl.actions[k] if 0 <= k < len(tl.actions) else None
        if action is not None:
            put_text(img, "action " + _action_text(action, tl.action_names, it), x, y + 2 * lh,
                     "chosen" if acting else "dim", fs)
        if it is not None and it.value is not None and k >= 0:
            v = float(it.value[k])
            put_text(img, "value " + (f"{v:.3f}" if math.isfinite(v) else "NaN"), x, y + 3 * lh, "value", fs)
        if tl.thumbnails is not None and k >= 0:
            th = np.asarray(tl.thumbnails[k])
            if tl.saliency is not None and k < len(tl.saliency):
                th = blend(th, saliency_to_frame(np.asarray(tl.saliency[k], np.float32), th.shape[:2]), ACTOR_COLOR)
            img[self.thumb_y: self.thumb_y + th.shape[0], x: x + th.shape[1]] = th
        if self.features is not None and k >= 0:
            self.features.draw(img, k)
        if self.bars is not None and k >= 0:
            self.bars.draw(img, k, action)
            self.plot.draw(img, k)  # type: ignore[union-attr]
            if self.memory is not None:
                self.memory.draw(img, k)
        if gone:
            bx, by, bw, bh = self.box
            cell = img[by + lh + 4: by + bh, bx: bx + bw]
            cell[:] = (cell.astype(np.uint16) // 3).astype(np.uint8)


#: The memory plot's legend in a column's width.
_MEMORY_LEGEND = {"|h| / max": "|h|", "|h - h_prev| / max": "|h - h_prev|", "saturated share": "saturated"}


def _memory_height(plot_h: int) -> int:
    """Pixels of a cell's memory plot (annotate(state=...)): half the value plot's, at least 30."""
    return max(30, int(plot_h) // 2)



def _features_height(tl: AgentTimeline, lh: int) -> int:
    """Pixels of a vector observation's saliency bars in a cell (a title line, a row per feature); 0 without."""
    if tl.thumbnails is not None or tl.saliency is None or np.ndim(tl.saliency) != 2:
        return 0
    d = int(np.shape(tl.saliency)[1])
    return lh + d * feature_rows(d, lh)


def _action_text(action: Any, names: tuple[str, ...], it: EpisodeInternals | None) -> str:
    a = np.asarray(action)
    if a.ndim == 0 and a.dtype.kind in "iu" and 0 <= int(a) < len(names) and (it is None or it.mean is None):
        return short(str(names[int(a)]), 16)
    return "[" + ", ".join(f"{float(v):+.2f}" if a.dtype.kind == "f" else str(int(v)) for v in a.reshape(-1)[:4]) + \
        (", ...]" if a.size > 4 else "]")


class AgentsCompositor:
    """Draws frame t of a multi-agent video: ``frame_hw`` (H, W) of the shared frames, one :class:`AgentTimeline`
    per agent (in column order), the :class:`AgentsLayout`, and a label (the env id) for the bottom line."""

    def __init__(self, frame_hw: tuple[int, int], timelines: list[AgentTimeline], layout: AgentsLayout | None = None,
                 label: str = "") -> None:
        if not timelines:
            raise UsageError("AgentsCompositor received no agents; expected one AgentTimeline per agent.")
        self.options = opt = layout or AgentsLayout()
        self.timelines = timelines
        self.frame_hw = fh, fw = int(frame_hw[0]), int(frame_hw[1])
        fs = float(opt.font_scale)
        (_, th), base = cv2.getTextSize("Ag", FONT, fs, 1)
        lh = th + base + 5
        n = len(timelines)
        ncols = min(n, int(opt.max_columns))
        nrows = -(-n // ncols)
        box = opt.thumbnail_box(n)
        thumb_h = 0 if box is None or all(t.thumbnails is None for t in timelines) else box[1]
        if box is not None:  # vector saliency (MPE): a bar per feature in the thumbnail's place
            thumb_h = max([thumb_h] + [_features_height(t, lh) for t in timelines])
        plot_h = int(opt.plot_height) if nrows == 1 else max(30, int(opt.plot_height) // 2)
        cell_h = max(_Cell.height(len(t.action_names), thumb_h, plot_h, lh,
                                  t.internals is not None and t.internals.mean is not None,
                                  t.internals is not None and t.internals.memory is not None) for t in timelines)
        self.scale = k = max(1, int(opt.display_height) // fh)
        gw, gh = fw * k, fh * k
        cw = int(opt.column_width)
        self.size = ceil16(gw + ncols * cw), ceil16(max(gh, nrows * cell_h + lh + 8))
        width, height = self.size
        self.game = (0, (height - gh) // 2, gw, gh)
        self.cells = [_Cell(tl, (gw + (i % ncols) * cw, (i // ncols) * cell_h, cw, cell_h), thumb_h, plot_h, fs, lh,
                            label) for i, tl in enumerate(timelines)]
        bg = np.empty((height, width, 3), np.uint8)
        bg[:] = COLORS["background"]
        for cell in self.cells:
            cell.draw_static(bg)
        grouped = f"   |   {n} agents in rows of {ncols}" if nrows > 1 else ""
        put_text(bg, f"{label}{grouped}", gw + 8, height - 8, "dim", fs)
        for cell in self.cells:
            cell.draw_traces(bg)
        self._background = bg
        self.num_frames = int(len(timelines[0].index))
        self._last: np.ndarray | None = None  # the array drawn last: only the cells need redrawing in it
        # the cells' rows, to the frame's right edge (a long state text may run past its cell: restored too)
        self._cells_box = (min(c.box[1] for c in self.cells), max(c.box[1] + c.box[3] for c in self.cells),
                           min(c.box[0] for c in self.cells), width)

    def render(self, t: int, frame: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Frame t (0..N) with the shared game ``frame`` (uint8 [H, W, 3]) as uint8 [height, width, 3] RGB, drawn into
        ``out`` when given (same shape). When ``out`` is the array this compositor drew the last frame into (left
        unchanged since), only what moves is redrawn: the game and the cells (the rest is the same background)."""
        if not 0 <= int(t) < self.num_frames:
            raise UsageError(f"Frame index t={t} is outside the episode; expected 0..{self.num_frames - 1}.")
        bg = self._background
        if out is None:
            out = bg.copy()
        elif out is not self._last:
            np.copyto(out, bg)
        else:
            y0, y1, x0, x1 = self._cells_box
            out[y0: y1, x0: x1] = bg[y0: y1, x0: x1]
        self._last = out
        gx, gy, gw, gh = self.game
        fh, fw = self.frame_hw
        frame = np.asarray(frame)
        if frame.shape[:2] != (fh, fw):  # a frame of another size: fitted top-left, as the frames-only recorders do
            fit = np.zeros((fh, fw, 3), np.uint8)
            h, w = min(fh, frame.shape[0]), min(fw, frame.shape[1])
            fit[:h, :w] = frame[:h, :w]
            frame = fit
        if self.scale == 1:
            out[gy: gy + gh, gx: gx + gw] = frame
        else:
            wide = cv2.resize(frame, (gw, fh), interpolation=cv2.INTER_NEAREST)
            out[gy: gy + gh, gx: gx + gw].reshape(fh, self.scale, gw, 3)[...] = wide[:, None]
        for cell in self.cells:
            cell.draw(out, int(t))
        return out
