"""The episode video frame: the game (with a saliency overlay) beside a panel of the agent's internals.

numpy in, numpy out, drawn with OpenCV. Everything that does not change within an episode (labels,
axes, bar tracks, the full value/return-to-go traces) is drawn once when the :class:`Compositor` is
built; :meth:`Compositor.render` copies that background, pastes the upscaled game frame, reveals the
pre-drawn traces up to ``t`` and draws the few things that move (bars, cursor, numbers).
"""

from __future__ import annotations

import math
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..episode.trace import EpisodeInternals, EpisodeTrace
from ..errors import UsageError
from ..media.video import VideoWriter
from ..progress import bar
from .overlay import ACTOR_COLOR, saliency_to_frame

__all__ = ["ComposeOptions", "PanelData", "PanelLayout", "Compositor", "write_episode_video", "COLORS"]

#: Panel colours (RGB).
COLORS = {
    "background": (22, 24, 30),
    "plot": (34, 37, 46),
    "grid": (70, 74, 86),
    "text": (225, 228, 235),
    "dim": (140, 146, 160),
    "bar": (92, 132, 200),
    "chosen": (255, 176, 40),
    "track": (48, 52, 64),
    "value": (90, 200, 255),
    "return": (255, 120, 200),
    "reward": (120, 230, 120),
    "cursor": (200, 200, 200),
    "entropy": (180, 140, 255),
}
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_ASCII = str.maketrans({"\u00b7": "-", "\u2022": "-", "\u03b3": "gamma", "\u2013": "-", "\u2014": "-"})


def _finite(v) -> float | None:
    """``float(v)``, or None for NaN/inf: the panels draw a gap and a "NaN" marker there, never crash."""
    v = float(v)
    return v if math.isfinite(v) else None


def _finite_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of True in a bool [T] array."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _ceil16(n: int) -> int:
    return -(-int(n) // 16) * 16


@dataclass(frozen=True)
class ComposeOptions:
    """How the video frame looks.

    display_height: target height in pixels of the game frame, reached by an integer nearest-neighbour
        upscale (10x10 MinAtar -> x48 = 480; 210x160 Atari -> x2 = 420; frames taller than it stay x1).
    panel_width: width of the side panel in pixels.
    min_height: the canvas is at least this tall (the panel needs room); it grows for many actions.
    saliency_color, saliency_alpha: overlay tint (RGB) and its strength where the map is 1.
    saliency_mode: "linear" (obs is a resized image of the frame, Atari), "nearest" (grid world,
        MinAtar) or "auto" ("nearest" when the frame size is a multiple of the map size, else "linear").
    font_scale: OpenCV Hershey font scale of the panel text.
    plot_height: height of the value / return-to-go plot in pixels.
    """

    display_height: int = 480
    panel_width: int = 400
    min_height: int = 480
    saliency_color: tuple = ACTOR_COLOR
    saliency_alpha: float = 0.65
    saliency_mode: str = "auto"
    font_scale: float = 0.45
    plot_height: int = 150


@dataclass(frozen=True)
class PanelData:
    """What the panel shows at frame t (of T steps; frame T has no action).

    probs, logits: float32 [A] (logits are Q-values when kind == "q");  value: V(s) / max Q or None;
    return_to_go: discounted return from t;  return_so_far: sum of rewards[:t];
    entropy: H / ln|A| in [0, 1];  lives: ALE lives or None.
    """

    t: int
    num_steps: int
    action: int | None
    action_name: str | None
    probs: np.ndarray
    logits: np.ndarray
    kind: str
    value: float | None
    return_to_go: float
    return_so_far: float
    entropy: float
    lives: int | None


@dataclass(frozen=True)
class PanelLayout:
    """Pixel geometry of the canvas (x, y of top-left corners; all ints).

    game: (x, y, w, h) of the upscaled frame, ``scale`` its integer factor.
    bar_x0, bar_len: where the action bars start and their full length; bar_rows: y of each bar's top,
    bar_h its height; plot: (x, y, w, h) of the value plot; entropy_bar: (x, y, len, h).
    """

    width: int
    height: int
    scale: int
    game: tuple
    panel_x: int
    bar_x0: int
    bar_len: int
    bar_rows: tuple
    bar_h: int
    plot: tuple
    entropy_bar: tuple


def fast_blend(frame: np.ndarray, heat: np.ndarray, color_img: np.ndarray, alpha: float) -> np.ndarray:
    """Same result as :func:`rlviz.overlay.blend` (within 1 grey level), about 5x faster (cv2.blendLinear).

    frame uint8 [H, W, 3]; heat float32 [H, W] in [0, 1]; color_img uint8 [H, W, 3] filled with the tint.
    """
    a = np.clip(heat, 0.0, 1.0, dtype=np.float32) * np.float32(alpha)
    return cv2.blendLinear(frame, color_img, np.float32(1.0) - a, a)


def _check_inputs(trace: EpisodeTrace, internals: EpisodeInternals) -> None:
    frames = trace.frames
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise UsageError(f"trace.frames must be uint8 [T+1, H, W, 3] RGB; received {frames.dtype} {list(frames.shape)}.")
    n = trace.num_steps + 1
    checks = {"trace.frames": frames.shape[0], "internals.probs": internals.probs.shape[0],
              "internals.logits": internals.logits.shape[0], "internals.entropy": internals.entropy.shape[0],
              "internals.returns_to_go": internals.returns_to_go.shape[0]}
    if internals.value is not None:
        checks["internals.value"] = internals.value.shape[0]
    if internals.saliency is not None:
        checks["internals.saliency"] = internals.saliency.shape[0]
    bad = {k: v for k, v in checks.items() if v != n}
    if bad:
        raise UsageError(f"The trace has {trace.num_steps} steps, so every per-frame array needs {n} entries; "
                         f"received {bad}. Build internals from the same trace.")
    if internals.probs.ndim != 2 or internals.probs.shape[1] != len(trace.action_names):
        raise UsageError(f"internals.probs must be [T+1, A] with A = {len(trace.action_names)} action names; "
                         f"received {list(internals.probs.shape)}.")


class Compositor:
    """Draws frame t of an episode video. ``size`` is (width, height), both multiples of 16."""

    def __init__(self, trace: EpisodeTrace, internals: EpisodeInternals, options: ComposeOptions | None = None):
        _check_inputs(trace, internals)
        self.trace, self.internals = trace, internals
        self.options = opt = options or ComposeOptions()
        if opt.saliency_mode not in ("auto", "linear", "nearest"):
            raise UsageError(f"saliency_mode={opt.saliency_mode!r}; use 'auto', 'linear' or 'nearest'.")
        self.T = trace.num_steps
        self.A = len(trace.action_names)
        _, fh, fw, _ = trace.frames.shape
        self.frame_hw = (fh, fw)
        fs = float(opt.font_scale)
        (_, th), base = cv2.getTextSize("Ag", _FONT, fs, 1)
        self._lh = th + base + 6
        self._fs = fs
        self._cum = np.concatenate([[0.0], np.cumsum(np.asarray(trace.rewards, dtype=np.float64))])
        self._layout()
        self._background = self._draw_background()
        self._trace_img = self._draw_traces()
        self._sal_mode = opt.saliency_mode
        self._color_img = np.empty((fh, fw, 3), np.uint8)
        self._color_img[:] = opt.saliency_color
        if internals.saliency is not None and self._sal_mode == "auto":
            h, w = internals.saliency.shape[1:]
            self._sal_mode = "nearest" if fh % h == 0 and fw % w == 0 else "linear"

    # -- geometry -------------------------------------------------------------------------------
    def _layout(self) -> None:
        opt, lh = self.options, self._lh
        fh, fw = self.frame_hw
        k = max(1, int(opt.display_height) // fh)
        gw, gh = fw * k, fh * k
        px, pw, m = gw, int(opt.panel_width), 12
        if pw < 200:
            raise UsageError(f"panel_width={pw}; the panel needs at least 200 pixels.")
        names = [self._short(n) for n in self.trace.action_names]
        label_w = max(cv2.getTextSize(n, _FONT, self._fs, 1)[0][0] for n in names + ["entropy"]) + 8
        num_w = cv2.getTextSize("-00.00", _FONT, self._fs, 1)[0][0] + 6
        bar_x0 = px + m + label_w
        bar_len = pw - 2 * m - label_w - num_w
        y = m + 3 * lh + 6 + lh  # header (3 lines), gap, bars title
        row_h = max(lh, 18) if self.A <= 9 else max(12, lh - 2)
        rows = tuple(y + i * row_h for i in range(self.A))
        y += self.A * row_h + 8 + lh  # gap, plot title / legend
        plot = (px + m, y, pw - 2 * m, int(opt.plot_height))
        y += plot[3] + 8 + lh + 6  # tick band + axis labels
        ebar = (bar_x0, y, bar_len, row_h - 4)
        y += row_h + 4 + lh + m  # entropy row, saliency line
        height = _ceil16(max(gh, int(opt.min_height), y))
        width = _ceil16(gw + pw)
        self._names = names
        self.layout = PanelLayout(width, height, k, (0, (height - gh) // 2, gw, gh), px, bar_x0, bar_len, rows,
                                  row_h - 4, plot, ebar)
        self._rtg = np.asarray(self.internals.returns_to_go, dtype=np.float64)
        value = self.internals.value
        series = [self._rtg] + ([np.asarray(value, dtype=np.float64)] if value is not None else [])
        allv = np.concatenate(series)
        allv = allv[np.isfinite(allv)]
        lo, hi = (float(allv.min()), float(allv.max())) if allv.size else (0.0, 1.0)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        self._ylo, self._yhi = lo - pad, hi + pad
        if self.internals.kind == "q":
            q = np.asarray(self.internals.logits, dtype=np.float64)
            q = q[np.isfinite(q)]
            self._qlo = min(0.0, float(q.min())) if q.size else 0.0
            self._qhi = max(0.0, float(q.max())) if q.size else 1.0
            if self._qhi <= self._qlo:
                self._qhi = self._qlo + 1.0

    @staticmethod
    def _short(name: str, n: int = 12) -> str:
        return str(name) if len(str(name)) <= n else str(name)[: n - 1] + "."

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the rendered frames, both multiples of 16."""
        return self.layout.width, self.layout.height

    def x_of(self, t: int) -> int:
        """Pixel column of time step t in the value plot."""
        x, _, w, _ = self.layout.plot
        return x + int(round(t * (w - 1) / max(self.T, 1)))

    def y_of(self, v: np.ndarray | float) -> np.ndarray:
        """Pixel row of value v in the value plot (fixed scale for the whole episode)."""
        _, y, _, h = self.layout.plot
        frac = (np.nan_to_num(np.asarray(v, dtype=np.float64), nan=self._ylo) - self._ylo) / (self._yhi - self._ylo)
        return np.round(y + (h - 1) * (1.0 - np.clip(frac, 0.0, 1.0))).astype(np.int32)

    def _text(self, img, s, x, y, color="text", scale=None) -> None:
        if not s.isascii():  # Hershey fonts draw ASCII only
            s = unicodedata.normalize("NFKD", s.translate(_ASCII)).encode("ascii", "ignore").decode()
        cv2.putText(img, s, (int(x), int(y)), _FONT, scale or self._fs, COLORS[color], 1, cv2.LINE_AA)

    # -- static parts -----------------------------------------------------------------------------
    def _draw_background(self) -> np.ndarray:
        L, lh, it = self.layout, self._lh, self.internals
        img = np.empty((L.height, L.width, 3), np.uint8)
        img[:] = COLORS["background"]
        x0 = L.panel_x + 12
        title = {"q": "Q-values", "logits": "action probabilities"}.get(it.kind, "action probabilities")
        self._text(img, title, x0, L.bar_rows[0] - 6, "dim")
        for name, y in zip(self._names, L.bar_rows):
            self._text(img, name, x0, y + L.bar_h - 2)
            cv2.rectangle(img, (L.bar_x0, y), (L.bar_x0 + L.bar_len - 1, y + L.bar_h - 1), COLORS["track"], -1)
        px, py, pw, ph = L.plot
        cv2.rectangle(img, (px, py), (px + pw - 1, py + ph - 1), COLORS["plot"], -1)
        # legend above the plot
        ly = py - 6
        if it.value is not None:
            vname = "max Q" if it.kind == "q" else "value"
            cv2.line(img, (x0, ly - 4), (x0 + 14, ly - 4), COLORS["value"], 2)
            self._text(img, vname, x0 + 18, ly, "dim")
            x1 = x0 + 26 + cv2.getTextSize(vname, _FONT, self._fs, 1)[0][0]
        else:
            x1 = x0
        cv2.line(img, (x1, ly - 4), (x1 + 14, ly - 4), COLORS["return"], 2)
        self._text(img, f"return-to-go (gamma={it.gamma:g})", x1 + 18, ly, "dim")
        if it.value is None:  # static note where the value number would be
            self._text(img, "no value head", L.panel_x + 12, 12 + 3 * lh - 6, "dim")
        if self._ylo < 0 < self._yhi:
            yz = int(self.y_of(0.0))
            cv2.line(img, (px, yz), (px + pw - 1, yz), COLORS["grid"], 1)
        small = self._fs * 0.85
        self._text(img, f"{self._yhi:.3g}", px + 3, py + 12, "dim", small)
        self._text(img, f"{self._ylo:.3g}", px + 3, py + ph - 4, "dim", small)
        ay = py + ph + 8 + lh - 2
        self._text(img, "0", px, ay, "dim", small)
        s = f"T={self.T}"
        self._text(img, s, px + pw - cv2.getTextSize(s, _FONT, small, 1)[0][0], ay, "dim", small)
        rx = px + pw // 2 - 30
        cv2.line(img, (rx, ay - 9), (rx, ay - 1), COLORS["reward"], 1)
        self._text(img, "reward", rx + 5, ay, "dim", small)
        ex, ey, elen, eh = L.entropy_bar
        self._text(img, "entropy", x0, ey + eh - 2)
        cv2.rectangle(img, (ex, ey), (ex + elen - 1, ey + eh - 1), COLORS["track"], -1)
        sal = f"saliency: {it.saliency_label or 'on'}" if it.saliency is not None else "saliency: off"
        self._text(img, sal + f"   |   {self.trace.env_id}", x0, ey + eh + lh + 4, "dim")
        return img

    def _draw_traces(self) -> np.ndarray:
        """The plot region (plus its reward tick band) with both full traces, revealed column by column."""
        L = self.layout
        px, py, pw, ph = L.plot
        img = self._background[py : py + ph + 8, px : px + pw].copy()
        t = np.arange(self.T + 1)
        xs = np.array([self.x_of(i) - px for i in t], dtype=np.int32)
        if self.internals.value is not None:
            self._polyline(img, xs, np.asarray(self.internals.value, dtype=np.float64), py, COLORS["value"])
        self._polyline(img, xs, self._rtg, py, COLORS["return"])
        for i in np.flatnonzero(np.asarray(self.trace.rewards) != 0):
            x = self.x_of(int(i) + 1) - px  # the reward arrives with frame i + 1
            cv2.line(img, (x, ph + 1), (x, ph + 7), COLORS["reward"], 1)
        return img

    def _polyline(self, img, xs: np.ndarray, ys: np.ndarray, py: int, color) -> None:
        """A trace with gaps where it is not finite, each gap marked by a short tick at the plot's top."""
        ok = np.isfinite(ys)
        pts = np.stack([xs, self.y_of(ys) - py], axis=1)
        for a, b in _finite_runs(ok):
            cv2.polylines(img, [pts[a:b].reshape(-1, 1, 2)], False, color, 1, cv2.LINE_AA)
        for i in np.flatnonzero(~ok):
            cv2.line(img, (int(xs[i]), 0), (int(xs[i]), 6), COLORS["chosen"], 1)

    # -- per frame ----------------------------------------------------------------------------------
    def panel_data(self, t: int) -> PanelData:
        """The numbers the panel shows at frame t (0..T)."""
        t = self._check_t(t)
        tr, it = self.trace, self.internals
        action = int(tr.actions[t]) if t < self.T else None
        return PanelData(
            t=t, num_steps=self.T, action=action,
            action_name=str(tr.action_names[action]) if action is not None else None,
            probs=np.asarray(it.probs[t], dtype=np.float32), logits=np.asarray(it.logits[t], dtype=np.float32),
            kind=it.kind, value=float(it.value[t]) if it.value is not None else None,
            return_to_go=float(it.returns_to_go[t]), return_so_far=float(self._cum[t]),
            entropy=float(it.entropy[t]), lives=int(tr.lives[t]) if tr.lives is not None else None,
        )

    def _check_t(self, t) -> int:
        t = int(t)
        if not 0 <= t <= self.T:
            raise UsageError(f"Frame index t={t} is outside the episode; expected 0..{self.T}.")
        return t

    def game_frame(self, t: int) -> np.ndarray:
        """uint8 [H, W, 3]: frame t at its own size, with the saliency overlay when there is one."""
        frame = np.asarray(self.trace.frames[t])
        sal = self.internals.saliency
        if sal is not None:
            heat = saliency_to_frame(np.asarray(sal[t], dtype=np.float32), self.frame_hw, self._sal_mode)
            frame = fast_blend(frame, heat, self._color_img, self.options.saliency_alpha)
        return frame

    def render(self, t: int, out: np.ndarray | None = None) -> np.ndarray:
        """Frame t as uint8 [height, width, 3] RGB. Pass ``out`` (same shape) to draw into it without allocating."""
        t = self._check_t(t)
        L = self.layout
        if out is None:
            out = self._background.copy()
        else:
            if out.shape != self._background.shape or out.dtype != np.uint8:
                raise UsageError(f"render(out=...) needs uint8 {list(self._background.shape)}; "
                                 f"received {out.dtype} {list(out.shape)}.")
            np.copyto(out, self._background)
        gx, gy, gw, gh = L.game
        fh, fw = self.frame_hw
        # nearest-neighbour integer upscale: widen each row once, then broadcast it over k rows in place
        wide = cv2.resize(self.game_frame(t), (gw, fh), interpolation=cv2.INTER_NEAREST)
        out[gy : gy + gh, gx : gx + gw].reshape(fh, L.scale, gw, 3)[...] = wide[:, None]
        d = self.panel_data(t)
        self._draw_header(out, d)
        self._draw_bars(out, d)
        self._draw_plot(out, d)
        ex, ey, elen, eh = L.entropy_bar
        e = _finite(d.entropy)
        n = 0 if e is None else int(round(min(max(e, 0.0), 1.0) * elen))
        if n > 0:
            cv2.rectangle(out, (ex, ey), (ex + n - 1, ey + eh - 1), COLORS["entropy"], -1)
        self._text(out, "NaN" if e is None else f"{e:.2f}", ex + elen + 6, ey + eh - 2)
        return out

    def _draw_header(self, img, d: PanelData) -> None:
        x, y, lh = self.layout.panel_x + 12, 12 + self._lh - 6, self._lh
        self._text(img, f"step {d.t}/{d.num_steps}", x, y)
        self._text(img, f"return {d.return_so_far:.6g}", x + 170, y)
        if d.action is not None:
            act = f"action {d.action_name}"
        else:
            act = "end: " + ("terminated" if self.trace.terminated else "truncated" if self.trace.truncated
                             else "stopped")
        self._text(img, act, x, y + lh, "chosen")
        if d.lives is not None:
            self._text(img, f"lives {d.lives}", x + 170, y + lh)
        if d.value is not None:
            v = _finite(d.value)
            self._text(img, ("max Q " if d.kind == "q" else "value ") + ("NaN" if v is None else f"{v:.3f}"), x,
                       y + 2 * lh, "value")
        self._text(img, f"to go {d.return_to_go:.3f}", x + 170, y + 2 * lh, "return")

    def _draw_bars(self, img, d: PanelData) -> None:
        L = self.layout
        x0, n, h = L.bar_x0, L.bar_len, L.bar_h
        q = d.kind == "q"
        vals = d.logits if q else d.probs
        if q:
            span = self._qhi - self._qlo
            xz = x0 + int(round((0.0 - self._qlo) / span * n))
        for a, (v, y) in enumerate(zip(vals, L.bar_rows)):
            color = COLORS["chosen"] if a == d.action else COLORS["bar"]
            v = _finite(v)
            if v is None:  # no bar, a "NaN" label
                self._text(img, "NaN", x0 + n + 4, y + h - 2, "chosen")
                continue
            if q:
                xv = x0 + int(round((min(max(v, self._qlo), self._qhi) - self._qlo) / span * n))
                xa, xb = min(xz, xv), max(xz, xv)
            else:
                xa, xb = x0, x0 + int(round(min(max(v, 0.0), 1.0) * n))
            if xb > xa:
                cv2.rectangle(img, (xa, y), (xb - 1, y + h - 1), color, -1)
            self._text(img, f"{v:.2f}", x0 + n + 4, y + h - 2, "chosen" if a == d.action else "text")

    def _draw_plot(self, img, d: PanelData) -> None:
        px, py, pw, ph = self.layout.plot
        xt = self.x_of(d.t)
        img[py : py + ph + 8, px : xt + 1] = self._trace_img[:, : xt + 1 - px]
        cv2.line(img, (xt, py), (xt, py + ph - 1), COLORS["cursor"], 1)
        lo, span = self._ylo, self._yhi - self._ylo

        def y1(v: float) -> int:  # y_of for one number, without numpy's per-call overhead
            return int(round(py + (ph - 1) * (1.0 - min(max((v - lo) / span, 0.0), 1.0))))

        for v, color in ((d.value, "value"), (d.return_to_go, "return")):
            if v is None:
                continue
            if _finite(v) is None:  # a visible marker where the number is missing
                self._text(img, "NaN", xt + 4, py + 12, "chosen")
            else:
                cv2.circle(img, (xt, y1(v)), 3, COLORS[color], -1)


def write_episode_video(
    trace: EpisodeTrace,
    internals: EpisodeInternals,
    path: str | os.PathLike,
    options: ComposeOptions | None = None,
    fps: float | None = None,
    preset: str = "veryfast",
    crf: int = 23,
) -> Path:
    """Render frames 0..T of the episode and stream them to an H.264 MP4 at ``path``. Returns the path.

    fps defaults to ``trace.fps`` (30 when unset); preset and crf go to libx264 (see VideoWriter)."""
    comp = Compositor(trace, internals, options)
    rate = float(fps or trace.fps or 30.0)
    buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
    with VideoWriter(path, rate, comp.size, preset=preset, crf=crf) as writer, \
            bar(comp.T + 1, "encode", unit="frame") as progress:
        for t in range(comp.T + 1):
            writer.write(comp.render(t, out=buf))
            progress.update(1)
    return Path(path)
