"""Box actions: per dimension a track over the action range with the Gaussian's +-1 std band, its mean
(a white line the row's height) and the action taken (an orange mark in the row's lower half) (a tanh-squashed policy is drawn in action units; a deterministic actor shows the
action only). The range of each track is fixed for the episode: the bounds when finite, else the span
of what the episode shows."""

from __future__ import annotations

import cv2
import numpy as np

from ..agent.actions import squash_to_bounds
from .style import COLORS, put_text

__all__ = ["GaussianPanel"]


class GaussianPanel:
    """Draws onto the rows of a :class:`~rlviz.draw.layout.PanelLayout` (one row per action dimension)."""

    def __init__(self, internals, actions: np.ndarray, layout, font_scale: float):
        self.internals, self.L, self.fs = internals, layout, font_scale
        it = internals
        mean = np.asarray(it.mean, dtype=np.float64)
        self.D = mean.shape[1]
        low = np.full(self.D, -np.inf) if it.low is None else np.asarray(it.low, np.float64)
        high = np.full(self.D, np.inf) if it.high is None else np.asarray(it.high, np.float64)
        disp = (lambda u: squash_to_bounds(u, low, high)) if it.squash else (lambda u: u)
        self.mean = disp(mean)
        std = None if it.std is None else np.asarray(it.std, dtype=np.float64)
        self.band = None if std is None else (disp(mean - std), disp(mean + std))
        self.actions = np.asarray(actions, dtype=np.float64).reshape(-1, self.D)
        self.lo, self.hi = self._ranges(low, high)

    def _ranges(self, low, high):
        series = [self.mean, self.actions] + (list(self.band) if self.band is not None else [])
        lo, hi = low.copy(), high.copy()
        for d in range(self.D):
            if np.isfinite(low[d]) and np.isfinite(high[d]):
                continue
            v = np.concatenate([s[:, d] for s in series])
            v = v[np.isfinite(v)]
            a, b = (float(v.min()), float(v.max())) if v.size else (-1.0, 1.0)
            pad = 0.05 * (b - a) if b > a else 1.0
            lo[d] = a - pad if not np.isfinite(low[d]) else low[d]
            hi[d] = b + pad if not np.isfinite(high[d]) else high[d]
        return lo, hi

    @property
    def title(self) -> str:
        it = self.internals
        if it.std is None:
            return "action (deterministic actor)"
        return ("tanh-Gaussian" if it.squash else "Gaussian") + ": mean, +-1 std, action"

    def x_of(self, d: int, v: float) -> int:
        """Pixel column of action value ``v`` on dimension ``d``'s track."""
        L = self.L
        frac = (float(v) - self.lo[d]) / (self.hi[d] - self.lo[d])
        return L.bar_x0 + int(round(min(max(frac, 0.0), 1.0) * (L.bar_len - 1)))

    def draw_static(self, img: np.ndarray, names, x0: int) -> None:
        L, small = self.L, self.fs * 0.8
        for d, (name, y) in enumerate(zip(names, L.bar_rows)):
            put_text(img, name, x0, y + L.bar_h - 2, scale=self.fs)
            cv2.rectangle(img, (L.bar_x0, y), (L.bar_x0 + L.bar_len - 1, y + L.bar_h - 1), COLORS["track"], -1)
            if self.lo[d] < 0 < self.hi[d]:
                xz = self.x_of(d, 0.0)
                cv2.line(img, (xz, y), (xz, y + L.bar_h - 1), COLORS["grid"], 1)
        y = L.bar_rows[-1] + L.bar_h + 10
        put_text(img, f"{self.lo[0]:.3g}", L.bar_x0, y, "dim", small)
        s = f"{self.hi[0]:.3g}"
        put_text(img, s, L.bar_x0 + L.bar_len - cv2.getTextSize(s, cv2.FONT_HERSHEY_SIMPLEX, small, 1)[0][0], y,
                 "dim", small)

    def draw(self, img: np.ndarray, t: int, action) -> None:
        L, h = self.L, self.L.bar_h
        for d, y in enumerate(L.bar_rows):
            if self.band is not None:
                xa, xb = self.x_of(d, self.band[0][t, d]), self.x_of(d, self.band[1][t, d])
                cv2.rectangle(img, (min(xa, xb), y), (max(xa, xb), y + h - 1), COLORS["bar"], -1)
                xm = self.x_of(d, self.mean[t, d])
                cv2.rectangle(img, (xm - 2, y), (xm + 1, y + h - 1), COLORS["mean"], -1)
            if action is not None:
                v = float(np.asarray(action, dtype=np.float64).reshape(-1)[d])
                xc = self.x_of(d, v)
                cv2.rectangle(img, (xc - 2, y + h // 2), (xc + 1, y + h - 1), COLORS["chosen"], -1)  # lower half
                put_text(img, f"{v:+.2f}", L.bar_x0 + L.bar_len + 4, y + h - 2, "chosen", self.fs)

    def entropy_fraction(self, h: float) -> float:
        """Where a Gaussian entropy (nats) sits between the episode's lowest and highest."""
        e = np.asarray(self.internals.entropy, dtype=np.float64)
        e = e[np.isfinite(e)]
        if not e.size or not np.isfinite(h) or e.max() <= e.min():
            return 0.5 if np.isfinite(h) else 0.0
        return float((h - e.min()) / (e.max() - e.min()))
