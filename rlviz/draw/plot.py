"""Time plots of the panel: the value estimate against the return-to-go (with reward ticks), and the
user's own per-step scalars (``annotate(**extra)``). The full traces are drawn once; each frame reveals
them up to t and adds a cursor."""

from __future__ import annotations

import cv2
import numpy as np

from .style import COLORS, EXTRA_COLORS, put_text, text_width

__all__ = ["TimePlot", "value_plot_series", "extras_series"]


class TimePlot:
    """Series float [T+1] over (x, y, w, h), one fixed y scale for the episode (NaNs are skipped)."""

    def __init__(self, box: tuple, num_steps: int, series: list, font_scale: float, ticks=None):
        self.box, self.T, self.series, self.fs = box, int(num_steps), series, font_scale
        self.ticks = ticks  # x positions (frame indices) of reward ticks under the plot, or None
        vals = np.concatenate([np.asarray(s, dtype=np.float64) for _, s, _ in series]) if series else np.zeros(0)
        vals = vals[np.isfinite(vals)]
        lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        self.lo, self.hi = lo - pad, hi + pad
        self._img: np.ndarray = np.zeros((0, 0, 3), np.uint8)  # the pre-drawn traces (draw_traces)

    def x_of(self, t: int) -> int:
        x, _, w, _ = self.box
        return x + int(round(t * (w - 1) / max(self.T, 1)))

    def y_of(self, v) -> np.ndarray:
        _, y, _, h = self.box
        frac = (np.asarray(v, dtype=np.float64) - self.lo) / (self.hi - self.lo)
        return np.round(y + (h - 1) * (1.0 - np.clip(frac, 0.0, 1.0))).astype(np.int32)

    def draw_static(self, img: np.ndarray, title_items: list) -> None:
        """The plot's frame, legend (``(label, color)`` pairs above it), zero line, scale and time axis."""
        px, py, pw, ph = self.box
        cv2.rectangle(img, (px, py), (px + pw - 1, py + ph - 1), COLORS["plot"], -1)
        x, ly = px, py - 6
        for label, color in title_items:
            cv2.line(img, (x, ly - 4), (x + 14, ly - 4), COLORS[color] if isinstance(color, str) else color, 2)
            put_text(img, label, x + 18, ly, "dim", self.fs)
            x += 26 + text_width(label, self.fs)
        if self.lo < 0 < self.hi:
            yz = int(self.y_of(0.0))
            cv2.line(img, (px, yz), (px + pw - 1, yz), COLORS["grid"], 1)
        small = self.fs * 0.85
        _axis_label(img, f"{self.hi:.3g}", px + 3, py + 12, small)
        _axis_label(img, f"{self.lo:.3g}", px + 3, py + ph - 4, small)

    def draw_traces(self, img: np.ndarray) -> None:
        """Pre-draw the full traces (call once the background is complete)."""
        px, py, pw, ph = self.box
        band = 8 if self.ticks is not None else 0
        self._img = img[py : py + ph + band, px : px + pw].copy()
        xs = np.array([self.x_of(i) - px for i in range(self.T + 1)], dtype=np.int32)
        for _, s, color in self.series:
            s = np.asarray(s, dtype=np.float64)
            ok = np.isfinite(s)
            pts = np.stack([xs, self.y_of(np.where(ok, s, 0.0)) - py], axis=1)
            for run in np.split(np.arange(len(s)), np.flatnonzero(np.diff(ok.astype(np.int8))) + 1):
                if run.size and ok[run[0]]:
                    cv2.polylines(self._img, [pts[run].reshape(-1, 1, 2)], False, _rgb(color), 1, cv2.LINE_AA)
        for i in self.ticks if self.ticks is not None else ():
            x = self.x_of(int(i)) - px
            cv2.line(self._img, (x, ph + 1), (x, ph + 7), COLORS["reward"], 1)

    def draw(self, img: np.ndarray, t: int) -> None:
        px, py, pw, ph = self.box
        xt = self.x_of(t)
        img[py : py + self._img.shape[0], px : xt + 1] = self._img[:, : xt + 1 - px]
        cv2.line(img, (xt, py), (xt, py + ph - 1), COLORS["cursor"], 1)
        lo, span = self.lo, self.hi - self.lo
        for _, s, color in self.series:
            v = float(s[t])
            if np.isfinite(v):
                y = int(round(py + (ph - 1) * (1.0 - min(max((v - lo) / span, 0.0), 1.0))))
                cv2.circle(img, (xt, y), 3, _rgb(color), -1)


def _rgb(color):
    return COLORS[color] if isinstance(color, str) else color


def value_plot_series(internals) -> list:
    """(label, series [T+1], colour) of the value plot: the value (or max Q) when there is one, the return-to-go."""
    out = []
    if internals.value is not None:
        out.append(("max Q" if internals.kind == "q" else "value", internals.value, "value"))
    out.append((f"return-to-go (gamma={internals.gamma:g})", internals.returns_to_go, "return"))
    return out


def extras_series(internals) -> list:
    """(name, series [T+1], colour) of the user's extra scalars."""
    extras = internals.extras or {}
    return [(name, v, EXTRA_COLORS[i % len(EXTRA_COLORS)]) for i, (name, v) in enumerate(sorted(extras.items()))]


def _axis_label(img: np.ndarray, s: str, x: int, y: int, scale: float) -> None:
    """An axis number on a plot-coloured box, so grid lines never run through it."""
    (w, h), base = cv2.getTextSize(s, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    cv2.rectangle(img, (x - 2, y - h - 2), (x + w + 2, y + base), COLORS["plot"], -1)
    put_text(img, s, x, y, "dim", scale)
