"""The two per-batch checks a rollout runs on every step for the diagnostics (:mod:`rlviz.evaluate.statistics.diagnostics`),
vectorised over the batch: :func:`nonfinite_rows` (non-finite internals) and :func:`obs_keys` (a 64-bit key per
observation, for loop detection).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["nonfinite_rows", "obs_keys"]

_HASH_BYTES = 8192  # observations larger than this are hashed on a strided sample of about this many bytes
_SUM = np.add.reduce


def nonfinite_rows(logits: np.ndarray, probs: np.ndarray, value: np.ndarray | None) -> np.ndarray | None:
    """bool [B]: rows of a batch with any non-finite logit, probability or value; None when all are finite
    (the common case, one sum per array: a NaN or inf anywhere makes the total non-finite; the rows are only
    looked at then)."""
    total = _SUM(logits, None, np.float64) + _SUM(probs, None, np.float64)
    if value is not None:
        total += _SUM(value, None, np.float64)
    if math.isfinite(total):
        return None
    rows = logits.sum(axis=-1, dtype=np.float64) + probs.sum(axis=-1, dtype=np.float64)
    if value is not None:
        rows = rows + value
    bad = ~np.isfinite(rows)
    return bad if bad.any() else None


_WEIGHTS = np.zeros(0, np.uint64)
_SHIFT = np.uint64(29)


def _weights(n: int) -> np.ndarray:
    """Fixed random odd 64-bit weights, one per 8-byte word of a row (the same in every process)."""
    global _WEIGHTS
    if _WEIGHTS.size < n:
        _WEIGHTS = np.random.default_rng(0x5EED).integers(0, 2**64, size=max(n, 1024), dtype=np.uint64) | np.uint64(1)
    return _WEIGHTS[:n]


def obs_keys(batch) -> np.ndarray:
    """A 64-bit key (uint64 [B]) per observation of ``batch`` [B, ...] (any dtype), in one vectorised pass: equal rows get
    equal keys. Rows larger than ``_HASH_BYTES`` are keyed on a strided sample of their elements (about that
    many bytes). Each row's 8-byte words w are folded (w ^ w >> 29, a bijection that brings high bits down)
    and summed with fixed random odd weights (so position counts): two different rows collide with
    probability below 2**-28 (about 2**-63 for most differences), and a loop needs >= 100 equal steps."""
    a = np.asarray(batch)
    a = a.reshape(a.shape[0], -1)
    if a.shape[1] * a.itemsize > _HASH_BYTES:
        a = a[:, :: a.shape[1] * a.itemsize // _HASH_BYTES + 1]
    raw = np.ascontiguousarray(a).view(np.uint8)
    if raw.shape[1] % 8:
        raw = np.concatenate([raw, np.zeros((raw.shape[0], 8 - raw.shape[1] % 8), np.uint8)], axis=1)
    x = raw.view(np.uint64)
    return (x ^ (x >> _SHIFT)) @ _weights(x.shape[1])  # integer matmul: sums wrap modulo 2**64
