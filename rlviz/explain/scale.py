"""One brightness scale per episode for saliency maps, computed in chunks (memmaps never load whole).

Per-frame min-max normalisation makes overlays flicker (every frame gets a full-bright pixel, however
little the agent cares); here the whole episode shares one scale, a high percentile of all its values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["episode_scale", "normalise_episode"]


def _row_chunks(maps: np.ndarray, rows: int):
    for s in range(0, maps.shape[0], rows):
        yield np.asarray(maps[s : s + rows], dtype=np.float64).ravel()


def episode_scale(maps: np.ndarray, percentile: float = 99.5, chunk_elems: int = 1 << 22) -> float:
    """The ``percentile`` of all values of ``maps`` [T, ...] (as ``np.percentile``, linear), read in
    chunks of about ``chunk_elems`` values, so a memmap is never loaded whole: a min/max pass, a
    65,536-bin histogram pass, and a pass collecting the values of the one or two bins that hold
    the wanted order statistics."""
    if not 0 <= float(percentile) <= 100:
        raise UsageError(f"percentile={percentile}: use a number in [0, 100].")
    n = int(np.prod(maps.shape, dtype=np.int64))
    if n == 0:
        raise UsageError("episode_scale received no saliency values (an empty episode).")
    rows = max(1, int(chunk_elems) // max(1, n // maps.shape[0]))
    vmin = min(c.min() for c in _row_chunks(maps, rows))
    vmax = max(c.max() for c in _row_chunks(maps, rows))
    if not (np.isfinite(vmin) and np.isfinite(vmax)):
        raise UsageError("The saliency maps contain NaN or infinity (the policy produced non-finite outputs).")
    if vmin == vmax:
        return float(vmin)
    rank = float(percentile) / 100.0 * (n - 1)
    lo = int(np.floor(rank))
    hi, t = min(lo + 1, n - 1), rank - lo
    nbins = 1 << 16
    scale = nbins / (vmax - vmin)

    def bins(c):
        return np.minimum(((c - vmin) * scale).astype(np.int64), nbins - 1)

    counts = sum(np.bincount(bins(c), minlength=nbins) for c in _row_chunks(maps, rows))
    cum = np.cumsum(counts)
    b_lo, b_hi = int(np.searchsorted(cum, lo, side="right")), int(np.searchsorted(cum, hi, side="right"))
    before = int(cum[b_lo - 1]) if b_lo > 0 else 0
    vals: Any = []
    for c in _row_chunks(maps, rows):
        b = bins(c)
        vals.append(c[(b >= b_lo) & (b <= b_hi)])
    vals = np.sort(np.concatenate(vals))
    a, b = vals[lo - before], vals[hi - before]
    return float(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t)  # numpy's lerp


def normalise_episode(maps: np.ndarray, percentile: float = 99.5, out: np.ndarray | None = None) -> np.ndarray:
    """maps [T, h, w] -> float32 [T, h, w] in [0, 1] with ONE scale for the whole episode: the
    ``percentile`` of all its values (clipped above), so a frame with half the saliency stays half
    as bright (per-frame min-max makes overlays flicker). Falls back to the maximum when the
    percentile is 0; all-zero maps stay 0. ``out`` may be ``maps`` itself (in place, chunked)."""
    maps_shape = tuple(maps.shape)
    scale = episode_scale(maps, percentile)
    if scale <= 0:
        scale = max(float(np.max(c)) for c in _row_chunks(maps, 1 << 10))
    if out is None:
        out = np.empty(maps_shape, dtype=np.float32)
    elif tuple(out.shape) != maps_shape:
        raise UsageError(f"out has shape {tuple(out.shape)}; expected {maps_shape}.")
    rows = max(1, (1 << 22) // max(1, int(np.prod(maps_shape[1:], dtype=np.int64))))
    for s in range(0, maps_shape[0], rows):
        chunk = np.asarray(maps[s : s + rows], dtype=np.float32)
        out[s : s + rows] = np.clip(chunk / scale, 0.0, 1.0) if scale > 0 else 0.0
    return out
