"""The action bars of discrete policies: probabilities (Discrete; one group of bars per part for
MultiDiscrete and MultiBinary) or Q-values, the chosen action's bar(s) highlighted. Actions the env masked
(``internals.action_masks``, MaskablePPO) are drawn as a filled "masked" track with no number; a distributional
Q-network's quantiles (``internals.quantiles``, QR-DQN) as a whisker from the lowest to the highest quantile
with a tick at each quantile, over the bar of their mean."""

from __future__ import annotations

import cv2
import numpy as np

from .style import COLORS, put_text

__all__ = ["BarsPanel"]


class BarsPanel:
    """Draws onto the rows of a :class:`~rlviz.draw.layout.PanelLayout` (one row per bar)."""

    def __init__(self, internals, layout, font_scale: float):
        self.internals, self.L, self.fs = internals, layout, font_scale
        self.q = internals.kind == "q"
        self.masks = None if internals.action_masks is None else np.asarray(internals.action_masks, dtype=bool)
        self.quantiles = internals.quantiles if self.q else None
        if self.q:
            q = np.asarray(internals.logits if self.quantiles is None else self.quantiles, dtype=np.float64)
            if self.masks is not None:  # masked actions' Q-values are not on the scale
                q = q[np.broadcast_to(self.masks[:, None, :] if q.ndim == 3 else self.masks, q.shape)]
            q = q[np.isfinite(q)]
            self.qlo = min(0.0, float(q.min())) if q.size else 0.0
            self.qhi = max(0.0, float(q.max())) if q.size else 1.0
            if self.qhi <= self.qlo:
                self.qhi = self.qlo + 1.0
        nvec = internals.nvec
        self.offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.int64) if nvec is not None else None

    @property
    def title(self) -> str:
        if self.q:
            return "Q-values" + (" (quantile spread)" if self.quantiles is not None else "")
        return "action probabilities" + (" (one group per part)" if self.offsets is not None else "")

    def chosen(self, action) -> tuple:
        """The bar indices of ``action`` (an int, or one int per part)."""
        if action is None:
            return ()
        a = np.asarray(action, dtype=np.int64).reshape(-1)
        if self.offsets is None:
            return (int(a[0]),)
        return tuple(int(o + x) for o, x in zip(self.offsets, a))

    def draw_static(self, img: np.ndarray, names, x0: int) -> None:
        L = self.L
        for name, y in zip(names, L.bar_rows):
            put_text(img, name, x0, y + L.bar_h - 2, scale=self.fs)
            cv2.rectangle(img, (L.bar_x0, y), (L.bar_x0 + L.bar_len - 1, y + L.bar_h - 1), COLORS["track"], -1)
        if self.offsets is not None:  # a line between the parts' groups
            for o in self.offsets[1:]:
                y = L.bar_rows[int(o)] - 3
                cv2.line(img, (x0, y), (L.bar_x0 + L.bar_len - 1, y), COLORS["grid"], 1)

    def x_of(self, v: float) -> int:
        """Pixel column of Q-value v."""
        n = self.L.bar_len
        return self.L.bar_x0 + int(round((min(max(v, self.qlo), self.qhi) - self.qlo) / (self.qhi - self.qlo) * n))

    def draw(self, img: np.ndarray, t: int, action) -> None:
        L = self.L
        x0, n, h = L.bar_x0, L.bar_len, L.bar_h
        vals = self.internals.logits[t] if self.q else self.internals.probs[t]
        chosen = self.chosen(action)
        masked = () if self.masks is None else tuple(np.flatnonzero(~self.masks[t]))
        xz = self.x_of(0.0) if self.q else x0
        for a, (v, y) in enumerate(zip(vals, L.bar_rows)):
            if a in masked:
                cv2.rectangle(img, (x0, y), (x0 + n - 1, y + h - 1), COLORS["masked"], -1)
                put_text(img, "masked", x0 + n + 4, y + h - 2, "dim", self.fs * 0.8)
                continue
            color = COLORS["chosen"] if a in chosen else COLORS["bar"]
            v = float(v)
            if not np.isfinite(v):
                put_text(img, "NaN", x0 + n + 4, y + h - 2, "chosen", self.fs)  # a visible marker, no bar
                continue
            if self.q:
                xa, xb = min(xz, self.x_of(v)), max(xz, self.x_of(v))
            else:
                xa, xb = x0, x0 + int(round(min(max(v, 0.0), 1.0) * n))
            if xb > xa:
                cv2.rectangle(img, (xa, y), (xb - 1, y + h - 1), color, -1)
            if self.quantiles is not None:
                self._spread(img, np.asarray(self.quantiles[t][:, a], dtype=np.float64), y, h)
            put_text(img, f"{v:.2f}", x0 + n + 4, y + h - 2, "chosen" if a in chosen else "text", self.fs)

    def _spread(self, img: np.ndarray, quantiles: np.ndarray, y: int, h: int) -> None:
        """A whisker from the lowest to the highest quantile, a tick at each one."""
        q = quantiles[np.isfinite(quantiles)]
        if not q.size:
            return
        mid, color = y + h // 2, COLORS["quantile"]
        cv2.line(img, (self.x_of(float(q.min())), mid), (self.x_of(float(q.max())), mid), color, 1)
        for v in q:
            x = self.x_of(float(v))
            cv2.line(img, (x, y + 1), (x, y + h - 2), color, 1)

    def entropy_fraction(self, h: float) -> float:
        """Relative entropy is already in [0, 1]."""
        return h
