"""Which states to branch from, and what the per-state numbers add up to.

:func:`top_states` ranks every state of both agents' episodes by the total-variation distance of the two action
distributions there and takes the top K, at most one per window of ``window`` steps of an episode (the states
around one moment of disagreement are near-copies of each other; the next pick comes from another moment or
another episode), and a state met again in another episode (the same TV and values: a deterministic game's
opening) is picked once. States with TV below :data:`MIN_TV` are not disagreements (identical agents give 0).
The order is total (TV, then agent, episode, step), so the picks do not depend on how the rollouts were run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .probe import EpisodeDisagreement

__all__ = ["Pick", "top_states", "summarize_disagreement", "MIN_TV"]

#: The smallest total-variation distance that counts as a disagreement.
MIN_TV = 1e-3
_QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Pick:
    """State ``step`` of episode ``episode`` (seed ``seed``) of agent ``side``'s rollout: TV there, each agent's
    value (NaN without a value head), whether their greedy actions differ."""

    side: str
    episode: int
    seed: int
    step: int
    tv: float
    value_a: float
    value_b: float
    differ: bool


def _pick(ep: EpisodeDisagreement, t: int) -> Pick:
    own, other = float(ep.own_value[t]), float(ep.other_value[t])
    va, vb = (own, other) if ep.side == "a" else (other, own)
    return Pick(ep.side, ep.index, ep.seed, int(t), float(ep.tv[t]), va, vb, bool(ep.differ[t]))


def top_states(episodes: Sequence[EpisodeDisagreement], k: int, window: int) -> list[Pick]:
    """The ``k`` states of largest TV, at most one per ``window`` steps of an episode, largest first."""
    if k <= 0 or not episodes:
        return []
    tv = np.concatenate([e.tv for e in episodes]).astype(np.float64)
    which = np.concatenate([np.full(e.length, i) for i, e in enumerate(episodes)]).astype(np.int64)
    step = np.concatenate([np.arange(e.length) for e in episodes]).astype(np.int64)
    side = np.array([0 if e.side == "a" else 1 for e in episodes], np.int64)[which]
    index = np.array([e.index for e in episodes], np.int64)[which]
    ok = np.isfinite(tv) & (tv >= MIN_TV)
    order = np.lexsort((step[ok], index[ok], side[ok], -tv[ok]))  # the last key sorts first
    taken: dict[int, list[int]] = {}
    seen: set[tuple[float, float, float]] = set()
    picks: list[Pick] = []
    for j in np.flatnonzero(ok)[order]:
        near = taken.setdefault(int(which[j]), [])
        if any(abs(int(step[j]) - s) < window for s in near):
            continue
        pick = _pick(episodes[int(which[j])], int(step[j]))
        same = (pick.tv, pick.value_a, pick.value_b)
        if same in seen:  # the same state in another episode (a deterministic game's opening): once is enough
            continue
        seen.add(same)
        near.append(int(step[j]))
        picks.append(pick)
        if len(picks) == k:
            break
    return picks


def summarize_disagreement(episodes: Iterable[EpisodeDisagreement]) -> dict[str, Any]:
    """Per agent whose states they are ("on_a_states", "on_b_states") and over both ("all"): states, the share
    where the greedy actions differ, TV's mean and quantiles, a 10-bin histogram of TV over [0, 1], and the mean
    value of each agent on those states."""
    by: dict[str, list[EpisodeDisagreement]] = {"a": [], "b": []}
    for e in episodes:
        by[e.side].append(e)
    out = {f"on_{s}_states": _numbers(eps) for s, eps in by.items()}
    out["all"] = _numbers(by["a"] + by["b"])
    return out


def _numbers(eps: list[EpisodeDisagreement]) -> dict[str, Any]:
    if not eps or not sum(e.length for e in eps):
        return {"states": 0}
    tv = np.concatenate([e.tv for e in eps]).astype(np.float64)
    differ = np.concatenate([e.differ for e in eps])
    va: list[np.ndarray] = []
    vb: list[np.ndarray] = []
    for e in eps:
        (va if e.side == "a" else vb).append(e.own_value)
        (vb if e.side == "a" else va).append(e.other_value)
    finite = tv[np.isfinite(tv)]
    hist = np.histogram(np.clip(finite, 0, 1), bins=10, range=(0.0, 1.0))[0] if finite.size else np.zeros(10)
    out: dict[str, Any] = {
        "states": int(tv.size),
        "greedy_differ_share": float(differ.mean()),
        "disagree_share": float((finite >= MIN_TV).mean()) if finite.size else None,
        "tv_mean": float(finite.mean()) if finite.size else None,
        **{f"tv_q{int(q * 100)}": (float(np.quantile(finite, q)) if finite.size else None) for q in _QUANTILES},
        "tv_histogram": [int(c) for c in hist],
        "value_a_mean": _mean(np.concatenate(va)) if va else None,
        "value_b_mean": _mean(np.concatenate(vb)) if vb else None,
    }
    return out


def _mean(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None
