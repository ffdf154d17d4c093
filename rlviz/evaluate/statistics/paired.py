"""Paired statistics of two agents evaluated on the same episode seeds (``rlviz compare``).

Episode ``k`` of agent A and episode ``k`` of agent B start from the same seed, so the comparison works on
the per-seed differences ``d_k = return_b[k] - return_a[k]``. Confidence intervals are percentile bootstraps
over episodes: resample the ``n`` seeds with replacement ``resamples`` times (the same index draws for every
statistic, from ``np.random.default_rng(seed)``), compute the statistic on each resample and take the 2.5th
and 97.5th percentiles. This is the paired version of what Agarwal et al. 2021 (rliable) recommend: rliable
resamples *training runs* within tasks (a stratified bootstrap), which answers "is algorithm B better"; here
the two agents are fixed networks and the randomness is the episodes', so the episodes are resampled, pairs
kept together.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import UsageError
from .stats import iqm

__all__ = ["RESAMPLES", "bootstrap_indices", "percentile_ci", "bootstrap_ci", "prob_improvement",
           "paired_comparison", "paired_difference"]

#: Bootstrap resamples used by ``rlviz compare`` (rliable's examples use 2000 and more).
RESAMPLES = 2000
#: Seed of the bootstrap's resampling (fixed: the same returns give the same intervals).
BOOTSTRAP_SEED = 0


def bootstrap_indices(n: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """int64 ``[resamples, n]``: each row ``n`` episode indices drawn with replacement."""
    if n < 1 or resamples < 1:
        raise UsageError(f"bootstrap over n={n} episodes with {resamples} resamples; both must be at least 1.")
    return np.random.default_rng(seed).integers(0, n, size=(int(resamples), int(n)))


def percentile_ci(samples, confidence: float = 0.95) -> list[float]:
    """``[lo, hi]``: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of ``samples``
    (numpy's linear interpolation)."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    lo, hi = np.percentile(np.asarray(samples, dtype=np.float64), [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def _iqm_rows(m: np.ndarray) -> np.ndarray:
    """:func:`~rlviz.evaluate.statistics.stats.iqm` of each row of ``m`` (same cut: ``floor(n / 4)`` from each end)."""
    n = m.shape[1]
    cut = int(0.25 * n)
    return np.sort(m, axis=1)[:, cut : n - cut].mean(axis=1)


def _rowwise(stat: Callable, resampled: np.ndarray) -> np.ndarray:
    if stat is np.mean:
        return resampled.mean(axis=1)
    if stat is iqm:
        return _iqm_rows(resampled)
    if stat is _improvement:
        return (resampled > 0).mean(axis=1) + 0.5 * (resampled == 0).mean(axis=1)
    return np.array([stat(row) for row in resampled], dtype=np.float64)


def _chunks(idx: np.ndarray, n: int):
    step = max(1, 1_000_000 // max(1, n))  # ~8 MB of resampled values at a time, whatever n
    return (idx[i : i + step] for i in range(0, idx.shape[0], step))


def bootstrap_ci(values, stat: Callable = np.mean, indices: np.ndarray | None = None,
                 confidence: float = 0.95) -> list[float]:
    """Percentile-bootstrap interval of ``stat(values)``. ``stat`` maps a 1-D array to a number (np.mean and
    :func:`~rlviz.evaluate.statistics.stats.iqm` run vectorised). ``indices``: the resamples ``[R, n]`` (default
    :func:`bootstrap_indices`)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    idx = bootstrap_indices(x.size) if indices is None else np.asarray(indices)
    return percentile_ci(np.concatenate([_rowwise(stat, x[rows]) for rows in _chunks(idx, x.size)]), confidence)


def _iqm_diff_ci(a: np.ndarray, b: np.ndarray, idx: np.ndarray) -> list[float]:
    """Interval of iqm(b) - iqm(a), both IQMs on the same resampled episodes."""
    return percentile_ci(np.concatenate([_iqm_rows(b[rows]) - _iqm_rows(a[rows]) for rows in _chunks(idx, a.size)]))


def _improvement(d: np.ndarray) -> float:
    return float(np.mean(d > 0) + 0.5 * np.mean(d == 0))


def prob_improvement(returns_a, returns_b) -> float:
    """P(b > a) + 0.5 P(b = a) over the paired episodes (0.5: no difference either way)."""
    a, b = _paired(returns_a, returns_b)
    return _improvement(b - a)


def _paired(returns_a, returns_b) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(returns_a, dtype=np.float64).ravel()
    b = np.asarray(returns_b, dtype=np.float64).ravel()
    if a.size != b.size or a.size == 0:
        raise UsageError(f"Paired statistics need the same episodes for both agents; received {a.size} and "
                         f"{b.size} returns.")
    return a, b


def paired_difference(returns_a, returns_b, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """``return_diff`` (mean, median, ci95 of b - a) and ``prob_improvement``: the part of
    :func:`paired_comparison` a timeline uses (the same numbers, without the IQM intervals' sorting)."""
    a, b = _paired(returns_a, returns_b)
    d = b - a
    return _difference(d, bootstrap_indices(d.size, resamples, seed))


def _difference(d: np.ndarray, idx: np.ndarray) -> dict:
    return {"return_diff": {"mean": float(d.mean()), "median": float(np.median(d)), "ci95": bootstrap_ci(d, np.mean, idx)},
            "prob_improvement": _improvement(d)}


def paired_comparison(returns_a, returns_b, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """The paired statistics of ``comparison.json``: ``return_diff`` (mean, median, ci95 of b - a),
    ``prob_improvement`` (with its ci95), ``iqm`` of each agent with its ci95 and of the difference of IQMs,
    and ``bootstrap`` (method, resamples, seed). Every interval uses the same resampled episodes."""
    a, b = _paired(returns_a, returns_b)
    d = b - a
    idx = bootstrap_indices(d.size, resamples, seed)
    return {
        **_difference(d, idx),
        "prob_improvement_ci95": bootstrap_ci(d, _improvement, idx),
        "iqm": {
            "a": {"value": iqm(a), "ci95": bootstrap_ci(a, iqm, idx)},
            "b": {"value": iqm(b), "ci95": bootstrap_ci(b, iqm, idx)},
            "diff": {"value": iqm(b) - iqm(a),
                     "ci95": _iqm_diff_ci(a, b, idx)},
        },
        "bootstrap": {"method": "paired percentile bootstrap over episodes", "resamples": int(resamples),
                      "seed": int(seed), "confidence": 0.95},
    }
