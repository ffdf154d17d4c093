"""The memory of a recurrent policy beside the game (docs/memory.md), numpy in, numpy out:

* :class:`MemoryStrip`: under the frame, the memory saliency of step t: one cell per observation t-W+1 .. t (the
  current one on the right), its brightness the share of the decision that comes from it (NaN: before the episode,
  drawn as empty track).
* the memory plot: over the episode, ||h_t|| and ||h_t - h_{t-1}|| (each divided by its episode max), the share of
  saturated units (|h| > 0.95, tanh memories only), and the reset at the episode's start marked
  (:func:`memory_plot_series`, drawn by :class:`~rlviz.draw.plot.TimePlot`).
"""

from __future__ import annotations

import cv2
import numpy as np

from ..episode.memory import saturation
from .style import COLORS, put_text, text_width

__all__ = ["MemoryStrip", "memory_plot_series", "memory_series", "STRIP_HEIGHT", "MEMORY_COLOR"]

#: Height in pixels of the strip's cells.
STRIP_HEIGHT = 22
#: Colour of a cell that holds the whole decision (share 1).
MEMORY_COLOR = (255, 176, 40)


class MemoryStrip:
    """Cells of ``shares`` [T+1, W] (row t: the shares of t-k, k = 0..W-1) over the box (x, y, w, h)."""

    def __init__(self, shares: np.ndarray, box: tuple, font_scale: float):
        self.shares = np.asarray(shares, np.float32)
        self.box, self.fs = box, font_scale
        self.W = int(self.shares.shape[1])

    def cell(self, i: int) -> tuple[int, int]:
        """(x0, x1) of cell i (0: the oldest observation, W-1: the current one)."""
        x, _, w, _ = self.box
        return x + (i * w) // self.W, x + ((i + 1) * w) // self.W - 2

    def draw_static(self, img: np.ndarray) -> None:
        x, y, w, h = self.box
        small = self.fs * 0.85
        put_text(img, f"memory saliency: share of the decision per observation (last {self.W})", x, y - 6,
                 "dim", small)
        put_text(img, f"t-{self.W - 1}", x, y + h + 14, "dim", small)
        put_text(img, "now", x + w - text_width("now", small), y + h + 14, "dim", small)

    def draw(self, img: np.ndarray, t: int) -> None:
        _, y, _, h = self.box
        row = self.shares[int(t)]
        track, full = np.asarray(COLORS["track"], np.float32), np.asarray(MEMORY_COLOR, np.float32)
        for i in range(self.W):
            s = float(row[self.W - 1 - i])
            x0, x1 = self.cell(i)
            color = track if not np.isfinite(s) else track + (full - track) * min(max(s, 0.0), 1.0) ** 0.5
            cv2.rectangle(img, (x0, y), (x1, y + h - 1), tuple(int(c) for c in color), -1)
        best = int(np.nanargmax(row)) if np.isfinite(row).any() else -1
        if best >= 0:  # the observation the decision leans on most, outlined
            x0, x1 = self.cell(self.W - 1 - best)
            cv2.rectangle(img, (x0, y), (x1, y + h - 1), COLORS["text"], 1)


def memory_series(internals) -> dict:
    """float32 [T+1] each, from an episode's ``internals.memory`` [T+1, D]: ``norm`` ||h_t||, ``change``
    ||h_t - h_{t-1}|| (0 at t = 0, the reset), ``saturation`` the share of units beyond |0.95| (NaN unless the
    memory is an LSTM's or a GRU's: tanh units)."""
    m = np.asarray(internals.memory, np.float32)
    change = np.zeros(m.shape[0], np.float32)
    change[1:] = np.linalg.norm(np.diff(m, axis=0), axis=1)
    tanh = internals.memory_kind in ("lstm", "gru")
    sat = saturation(m) if tanh else np.full(m.shape[0], np.nan, np.float32)
    return {"norm": np.linalg.norm(m, axis=1).astype(np.float32), "change": change, "saturation": sat}


def memory_plot_series(series: dict) -> list:
    """(label, series [T+1], colour) of the memory plot from :func:`rlviz.record.memory.memory_series`' dict."""
    out = []
    for key, label, color in (("norm", "|h| / max", (90, 200, 255)), ("change", "|h - h_prev| / max", MEMORY_COLOR)):
        v = np.asarray(series[key], np.float64)
        top = float(np.nanmax(v)) if np.isfinite(v).any() else 0.0
        out.append((label, v / top if top > 0 else v, color))
    sat = np.asarray(series["saturation"], np.float64)
    if np.isfinite(sat).any():
        out.append(("saturated share", sat, (255, 120, 120)))
    return out
