"""How far apart two policies' action distributions are on the same states: the total-variation distance and
the KL divergence, per state. One implementation for the timeline's policy change between checkpoints
(:func:`rlviz.training.evaluate.policy_change`) and compare's disagreements (:mod:`rlviz.disagree`).

Discrete and multi-part actions (MultiDiscrete, MultiBinary): the distance of (products of) categoricals, TV
averaged over the parts. Box actions: the Gaussian KL summed over dimensions and its Pinsker bound
``min(1, sqrt(KL / 2))`` as TV (exact TV has no closed form in several dimensions). Deterministic actors (a
mean, no std): no distribution, so no TV (:func:`action_distance` gives None); two Box actors of which either is
deterministic are compared by their actions instead (:func:`action_gap`): per state, the mean over the action's
dimensions of ``|a_1 - a_2| / (high - low)``, the distance scaled by the env's action bounds (0: the same action,
1: opposite ends of the bounds; a dimension with infinite bounds is not scaled). :func:`disagreement` picks the
measure; :func:`action_l2` is the plain Euclidean distance of the actions (the timeline's ``action_distance_mean``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["tv_kl_categorical", "tv_kl_gaussian", "action_distance", "greedy_actions", "action_gap", "action_l2",
           "disagreement", "TV", "ACTION_GAP", "MEASURES"]

#: The names of the two measures of how far apart two policies are on a state (:func:`disagreement`).
TV, ACTION_GAP = "total_variation", "action_gap"
#: What each measure is, in words (written beside the numbers: disagreements.json, the docs).
MEASURES = {
    TV: "total-variation distance of the two action distributions (Box: its Pinsker bound min(1, sqrt(KL/2)))",
    ACTION_GAP: "mean over action dimensions of |a_A - a_B| / (high - low), the actions' distance scaled by the "
                "action bounds (deterministic actors; a dimension with infinite bounds unscaled)",
}


def tv_kl_categorical(p: np.ndarray, q: np.ndarray, nvec: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """Per state: total variation and KL(p || q) of (products of) categoricals ``[B, sum(nvec)]``; [B] each."""
    bounds = np.cumsum((0,) + (tuple(nvec) if nvec else (p.shape[1],)))
    tv, kl = np.zeros(p.shape[0]), np.zeros(p.shape[0])
    for a, b in zip(bounds[:-1], bounds[1:]):
        pa, qa = p[:, a:b], q[:, a:b]
        tv += 0.5 * np.abs(pa - qa).sum(axis=1)
        kl += np.where(pa > 0, pa * (np.log(np.clip(pa, 1e-12, None)) - np.log(np.clip(qa, 1e-12, None))), 0).sum(1)
    return tv / (len(bounds) - 1), kl


def tv_kl_gaussian(m1: np.ndarray, s1: np.ndarray, m0: np.ndarray, s0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per state: KL(N(m1, s1) || N(m0, s0)) summed over dimensions ``[B, D]``, and the total variation bound
    ``min(1, sqrt(KL / 2))`` (Pinsker); [B] each, as (tv, kl)."""
    s1, s0 = np.maximum(s1, 1e-12), np.maximum(s0, 1e-12)
    kl = (np.log(s0 / s1) + (s1 ** 2 + (m1 - m0) ** 2) / (2 * s0 ** 2) - 0.5).sum(axis=1)
    return np.minimum(1.0, np.sqrt(np.maximum(kl, 0) / 2)), kl


def action_distance(p, q) -> tuple[np.ndarray, np.ndarray] | None:
    """(tv, kl) float64 [B] of two :class:`~rlviz.agent.policy.PolicyOutput` on the same B states (KL(p || q)),
    or None when either has no distribution (a deterministic actor)."""
    if p.mean is not None and q.mean is not None:
        if p.std is None or q.std is None:
            return None
        return tv_kl_gaussian(p.mean.astype(np.float64), p.std.astype(np.float64), q.mean.astype(np.float64),
                              q.std.astype(np.float64))
    return tv_kl_categorical(p.probs.astype(np.float64), q.probs.astype(np.float64), p.nvec)


def greedy_actions(out) -> np.ndarray | None:
    """int64 [B, parts]: the most likely action of each part (Discrete: one part), or None for Box actions."""
    if out.mean is not None:
        return None
    probs = out.probs
    bounds = np.cumsum((0,) + (tuple(out.nvec) if out.nvec else (probs.shape[1],)))
    return np.stack([probs[:, a:b].argmax(axis=1) for a, b in zip(bounds[:-1], bounds[1:])], axis=1)


def action_l2(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per state: the Euclidean distance of two Box actions ``[B, D]``; float64 [B]."""
    return np.asarray(np.linalg.norm(np.asarray(p, np.float64) - np.asarray(q, np.float64), axis=1))


def action_gap(p: np.ndarray, q: np.ndarray, low: np.ndarray | None = None,
               high: np.ndarray | None = None) -> np.ndarray:
    """Per state: the mean over dimensions of ``|p - q| / (high - low)`` of two Box actions ``[B, D]`` (a dimension
    whose bounds are missing, infinite or empty: ``|p - q|``), float64 [B]; in [0, 1] for actions inside the bounds."""
    diff = np.abs(np.asarray(p, np.float64) - np.asarray(q, np.float64)).reshape(len(p), -1)
    scale = np.ones(diff.shape[1])
    if low is not None and high is not None:
        width = (np.asarray(high, np.float64) - np.asarray(low, np.float64)).reshape(-1)
        scale = np.where(np.isfinite(width) & (width > 0), width, 1.0)
    return np.asarray((diff / scale).mean(axis=1))


def disagreement(p, q, spec=None) -> tuple[str, np.ndarray] | None:
    """(measure, float64 [B]) for two :class:`~rlviz.agent.policy.PolicyOutput` on the same B states:
    (:data:`TV`, the total variation) when both have a distribution, (:data:`ACTION_GAP`, :func:`action_gap` scaled
    by ``spec``'s bounds, an :class:`~rlviz.agent.actions.ActionSpec`) for Box actors of which either is
    deterministic; None otherwise."""
    dist = action_distance(p, q)
    if dist is not None:
        return TV, dist[0]
    if p.mean is None or q.mean is None:
        return None
    return ACTION_GAP, action_gap(p.mean, q.mean, getattr(spec, "low", None), getattr(spec, "high", None))
