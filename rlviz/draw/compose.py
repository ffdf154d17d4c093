"""The episode video frame: the game (with a saliency overlay) beside a panel of the agent's internals.

numpy in, numpy out, drawn with OpenCV. The :class:`Compositor` lays the canvas out and picks the action
panel by the action space (:mod:`.panels_discrete` bars, :mod:`.panels_continuous` Gaussian tracks); the
value and extra-scalar plots are :mod:`.plot`'s. Everything that does not change within an episode (labels,
axes, tracks, the full traces) is drawn once; :meth:`Compositor.render` copies that background, pastes the
upscaled game frame, reveals the traces up to ``t`` and draws the few things that move. Its options, the panel's
numbers and the canvas's geometry are :mod:`.layout`'s (imported from here too).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from ..episode.trace import EpisodeInternals, EpisodeTrace
from ..errors import UsageError
from .layout import ComposeOptions, PanelData, PanelLayout, panel_layout
from .overlay import saliency_to_frame
from .panels_continuous import GaussianPanel
from .panels_dict import DictSaliencyPanel, view_internals
from .panels_discrete import BarsPanel
from .panels_features import FeaturePanel, feature_names
from .panels_memory import MemoryStrip, memory_plot_series, memory_series
from .plot import TimePlot, extras_series, value_plot_series
from .style import COLORS, FONT, put_text, text_width

__all__ = ["ComposeOptions", "PanelData", "PanelLayout", "Compositor", "COLORS"]


def _finite(v) -> float | None:
    """``float(v)``, or None for NaN/inf: the panels draw a gap and a "NaN" marker there, never crash."""
    v = float(v)
    return v if math.isfinite(v) else None


def fast_blend(frame: np.ndarray, heat: np.ndarray, color_img: np.ndarray, alpha: float) -> np.ndarray:
    """Same result as :func:`rlviz.draw.overlay.blend` (within 1 grey level), about 5x faster (cv2.blendLinear).

    frame uint8 [H, W, 3]; heat float32 [H, W] in [0, 1]; color_img uint8 [H, W, 3] filled with the tint.
    """
    a = np.clip(heat, 0.0, 1.0, dtype=np.float32) * np.float32(alpha)
    return cv2.blendLinear(frame, color_img, np.float32(1.0) - a, a)


def _check_inputs(trace: EpisodeTrace, internals: EpisodeInternals) -> None:
    frames = trace.frames
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise UsageError(f"trace.frames must be uint8 [T+1, H, W, 3] RGB; received {frames.dtype} {list(frames.shape)}.")
    n = trace.num_steps + 1
    arrays = {"trace.frames": frames, "internals.probs": internals.probs, "internals.logits": internals.logits,
              "internals.entropy": internals.entropy, "internals.returns_to_go": internals.returns_to_go,
              "internals.value": internals.value, "internals.saliency": internals.saliency,
              "internals.mean": internals.mean, "internals.std": internals.std}
    arrays.update({f"internals.extras[{k!r}]": v for k, v in (internals.extras or {}).items()})
    bad = {k: v.shape[0] for k, v in arrays.items() if v is not None and v.shape[0] != n}
    if bad:
        raise UsageError(f"The trace has {trace.num_steps} steps, so every per-frame array needs {n} entries; "
                         f"received {bad}. Build internals from the same trace.")
    per_bar = internals.mean if internals.mean is not None else internals.probs
    if per_bar.ndim != 2 or per_bar.shape[1] != len(trace.action_names):
        what = "mean must be [T+1, D]" if internals.mean is not None else "probs must be [T+1, A]"
        raise UsageError(f"internals.{what} with one entry per action name ({len(trace.action_names)}); "
                         f"received {list(per_bar.shape)}.")


class Compositor:
    """Draws frame t of an episode video. ``size`` is (width, height), both multiples of 16."""

    def __init__(self, trace: EpisodeTrace, internals: EpisodeInternals, options: ComposeOptions | None = None):
        _check_inputs(trace, internals)
        internals = view_internals(trace, internals)  # (a MiniGrid agent's bare view: drawn beside the render)
        self.trace, self.internals = trace, internals
        self.options = opt = options or ComposeOptions()
        if opt.saliency_mode not in ("auto", "linear", "nearest"):
            raise UsageError(f"saliency_mode={opt.saliency_mode!r}; use 'auto', 'linear' or 'nearest'.")
        self.T = trace.num_steps
        self.A = len(trace.action_names)
        _, fh, fw, _ = trace.frames.shape
        self.frame_hw = (fh, fw)
        sal = internals.saliency
        self._vector_sal = sal is not None and sal.ndim == 2  # per-feature saliency [T+1, D]: bars, not a tint
        fs = float(opt.font_scale)
        (_, th), base = cv2.getTextSize("Ag", FONT, fs, 1)
        self._lh = th + base + 6
        self._fs = fs
        self._cum = np.concatenate([[0.0], np.cumsum(np.asarray(trace.rewards, dtype=np.float64))])
        self._layout()
        self.action_panel: GaussianPanel | BarsPanel
        if internals.mean is not None:
            self.action_panel = GaussianPanel(internals, trace.actions, self.layout, fs)
        else:
            self.action_panel = BarsPanel(internals, self.layout, fs)
        rewarded = np.flatnonzero(np.asarray(trace.rewards) != 0) + 1  # a reward arrives with the next frame
        self.value_plot = TimePlot(self.layout.plot, self.T, value_plot_series(internals), fs, ticks=rewarded)
        extras = extras_series(internals)
        self.extras_plot = TimePlot(self.layout.extras_plot, self.T, extras, fs) if extras and self.layout.extras_plot else None
        self._background = self._draw_background()
        self.value_plot.draw_traces(self._background)
        if self.extras_plot is not None:
            self.extras_plot.draw_traces(self._background)
        self._sal_mode = opt.saliency_mode
        self._color_img = np.empty((fh, fw, 3), np.uint8)
        self._color_img[:] = opt.saliency_color
        self.features: FeaturePanel | DictSaliencyPanel | None = None  # per-feature saliency (vector observations)
        if sal is not None and self._vector_sal and self.layout.features is not None and internals.saliency_keys:
            fx, fy, fw_, _ = self.layout.features  # a Dict's keys: maps and bars
            self.features = DictSaliencyPanel(sal, internals.saliency_keys, (fx, fy, fw_), self._lh, fs,
                                              trace.observations, trace.env_id)
            self.features.draw_static(self._background)
        elif sal is not None and self._vector_sal and self.layout.features is not None:
            fx, fy, fw_, frow = self.layout.features
            self.features = FeaturePanel(sal, feature_names(trace.env_id, sal.shape[1]), (fx, fy, fw_), frow, fs)
            self.features.draw_static(self._background)
        self.memory_strip, self.memory_plot = self._memory_parts()
        if internals.saliency is not None and not self._vector_sal and self._sal_mode == "auto":
            h, w = internals.saliency.shape[1:]
            self._sal_mode = "nearest" if fh % h == 0 and fw % w == 0 else "linear"

    def _memory_parts(self) -> tuple:
        """A recurrent policy's memory saliency strip and memory plot under the game (None, None without memory)."""
        L, it = self.layout, self.internals
        strip = plot = None
        if L.memory_strip is not None and it.memory_saliency is not None:
            strip = MemoryStrip(it.memory_saliency, L.memory_strip, self._fs)
            strip.draw_static(self._background)
        if L.memory_plot is not None and it.memory is not None:
            plot = TimePlot(L.memory_plot, self.T, memory_plot_series(memory_series(it)), self._fs, ticks=[0])
            plot.draw_static(self._background, [(label, color) for label, _, color in plot.series])
            px, py, _, ph = L.memory_plot
            put_text(self._background, "reset", px + 4, py + ph + 8 + self._lh - 2, "dim", self._fs * 0.85)
            plot.draw_traces(self._background)
        return strip, plot

    # -- geometry -------------------------------------------------------------------------------
    def _layout(self) -> None:
        self.layout, self._names = panel_layout(self.options, self.frame_hw, self.trace.action_names, self.internals,
                                                self._fs, self._lh, getattr(self.trace, "mission", ""))

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the rendered frames, both multiples of 16."""
        return self.layout.width, self.layout.height

    def x_of(self, t: int) -> int:
        """Pixel column of time step t in the value plot."""
        return self.value_plot.x_of(t)

    def y_of(self, v: np.ndarray | float) -> np.ndarray:
        """Pixel row of value v in the value plot (fixed scale for the whole episode)."""
        return self.value_plot.y_of(v)

    def _text(self, img, s, x, y, color="text", scale=None) -> None:
        put_text(img, s, x, y, color, scale or self._fs)

    # -- static parts -----------------------------------------------------------------------------
    def _draw_background(self) -> np.ndarray:
        L, lh, it = self.layout, self._lh, self.internals
        img = np.empty((L.height, L.width, 3), np.uint8)
        img[:] = COLORS["background"]
        x0 = L.panel_x + 12
        self._text(img, self.action_panel.title, x0, L.bar_rows[0] - 6, "dim")
        self.action_panel.draw_static(img, self._names, x0)
        self.value_plot.draw_static(img, [(label, color) for label, _, color in self.value_plot.series])
        if it.value is None:  # static note where the value number would be
            self._text(img, "no value head", L.panel_x + 12, 12 + 3 * lh - 6, "dim")
        if L.mission is not None:  # the episode's text goal (MiniGrid), under the header
            mx, my = L.mission[:2]
            for i, line in enumerate(L.mission_lines):
                self._text(img, line, mx, my + (i + 1) * lh - 4, "text")
        px, py, pw, ph = L.plot
        small = self._fs * 0.85
        ay = py + ph + 8 + lh - 2
        self._text(img, "0", px, ay, "dim", small)
        s = f"T={self.T}"
        self._text(img, s, px + pw - text_width(s, small), ay, "dim", small)
        rx = px + pw // 2 - 30
        cv2.line(img, (rx, ay - 9), (rx, ay - 1), COLORS["reward"], 1)
        self._text(img, "reward", rx + 5, ay, "dim", small)
        ex, ey, elen, eh = L.entropy_bar
        self._text(img, "entropy", x0, ey + eh - 2)
        cv2.rectangle(img, (ex, ey), (ex + elen - 1, ey + eh - 1), COLORS["track"], -1)
        if self.extras_plot is not None:
            self.extras_plot.draw_static(img, [(name, color) for name, _, color in self.extras_plot.series])
        sal = f"saliency: {it.saliency_label or 'on'}" if it.saliency is not None else "saliency: off"
        if it.saliency is None:
            self._text(img, sal + f"   |   {self.trace.env_id}", x0, L.height - 12, "dim")
            return img
        self._text(img, sal, x0, L.height - 12 - lh, "dim")
        if L.features is not None and it.saliency_keys:
            self._text(img, "saliency per observation key (full = the key's episode max)", x0, L.features[1] - 6,
                       "dim", small)
            self._text(img, f"maps and bars per key   |   {self.trace.env_id}", x0, L.height - 12, "dim")
            return img
        if L.features is not None:
            self._text(img, "saliency per observation feature (full bar = episode max)", x0, L.features[1] - 6,
                       "dim", small)
            self._text(img, f"bars per feature   |   {self.trace.env_id}", x0, L.height - 12, "dim")
            return img
        x = self._saliency_scale(img, x0, L.height - 12, small)  # what the tint means: 0 .. the episode's max
        self._text(img, f"|   {self.trace.env_id}", x, L.height - 12, "dim")
        return img

    def _saliency_scale(self, img: np.ndarray, x: int, y: int, scale: float) -> int:
        """Draw "0 [tint ramp] episode max" (the overlay over black at 0..1, maps are normalised per episode);
        returns the x after it."""
        opt = self.options
        self._text(img, "0", x, y, "dim", scale)
        x0, w, h = x + 12, 80, 10
        ramp = np.linspace(0.0, float(opt.saliency_alpha), w, dtype=np.float32)[:, None]
        img[y - h : y, x0 : x0 + w] = (ramp * np.asarray(opt.saliency_color, np.float32) + 0.5).astype(np.uint8)
        self._text(img, "episode max", x0 + w + 4, y, "dim", scale)
        return x0 + w + 16 + text_width("episode max", scale)

    def panel_data(self, t: int) -> PanelData:
        """The numbers the panel shows at frame t (0..T)."""
        t = self._check_t(t)
        tr, it = self.trace, self.internals
        action, name = None, None
        if t < self.T:
            a = np.asarray(tr.actions[t])
            if a.ndim == 0 and it.mean is None:
                action = int(a)
                name = str(tr.action_names[action])
            else:
                action = a.copy()
                name = "[" + ", ".join(f"{v:+.2f}" if it.mean is not None else str(int(v)) for v in a.reshape(-1)) + "]"
        return PanelData(
            t=t, num_steps=self.T, action=action, action_name=name,
            probs=np.asarray(it.probs[t], dtype=np.float32), logits=np.asarray(it.logits[t], dtype=np.float32),
            kind=it.kind, value=float(it.value[t]) if it.value is not None else None,
            return_to_go=float(it.returns_to_go[t]), return_so_far=float(self._cum[t]),
            entropy=float(it.entropy[t]), lives=int(tr.lives[t]) if tr.lives is not None else None,
            mean=None if it.mean is None else np.asarray(it.mean[t], dtype=np.float32),
            std=None if it.std is None else np.asarray(it.std[t], dtype=np.float32),
            extras={k: float(v[t]) for k, v in it.extras.items()} if it.extras else None,
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
        if sal is not None and not self._vector_sal:
            heat = saliency_to_frame(np.asarray(sal[t], dtype=np.float32), self.frame_hw, self._sal_mode)
            frame = fast_blend(frame, heat, self._color_img, self.options.saliency_alpha)
        elif isinstance(self.features, DictSaliencyPanel):  # MiniGrid's view: its saliency on the full grid too
            on_grid = self.features.grid_heat(t, frame)
            if on_grid is not None and on_grid.shape == frame.shape[:2]:
                frame = fast_blend(frame, on_grid, self._color_img, self.options.saliency_alpha)
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
        self.action_panel.draw(out, t, d.action)
        self.value_plot.draw(out, t)
        if self.extras_plot is not None:
            self.extras_plot.draw(out, t)
            self._draw_extras_numbers(out, d)
        self._draw_entropy(out, d)
        if self.features is not None:
            self.features.draw(out, t)
        if self.memory_strip is not None:
            self.memory_strip.draw(out, t)
        if self.memory_plot is not None:
            self.memory_plot.draw(out, t)
        return out

    def _draw_entropy(self, img, d: PanelData) -> None:
        ex, ey, elen, eh = self.layout.entropy_bar
        if not np.isfinite(d.entropy):
            self._text(img, "n/a", ex + 4, ey + eh - 2, "dim")
            return
        frac = self.action_panel.entropy_fraction(d.entropy)
        n = int(round(min(max(frac, 0.0), 1.0) * elen))
        if n > 0:
            cv2.rectangle(img, (ex, ey), (ex + n - 1, ey + eh - 1), COLORS["entropy"], -1)
        self._text(img, f"{d.entropy:.2f}", ex + elen + 6, ey + eh - 2)

    def _draw_extras_numbers(self, img, d: PanelData) -> None:
        x, y, w, _ = self.layout.extras_plot  # type: ignore[misc]  # drawn only with an extras plot
        s = "   ".join(f"{name} {d.extras[name]:.4g}" for name, _, _ in self.extras_plot.series)  # type: ignore[index, union-attr]
        self._text(img, s, x + w - text_width(s, self._fs * 0.85) - 2, y + 12, "text", self._fs * 0.85)

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
