"""Diagnostics for agents with memory, read off recorded episodes of a recurrent policy (docs/memory.md):

=================== ==================================================================================
id                  triggered when
=================== ==================================================================================
memory_unused       zeroing the state (the policy's initial state) at every step t >= 1 of the
                    episodes changes the outputs by at most 0.01 (probabilities: total variation
                    distance; Box actions: |mean change| / (mean |mean| + 1e-6)): the agent ignores its
                    memory, so it acts as a feed-forward policy would
memory_saturated    ``memory_kind`` "lstm" or "gru" and, averaged over the steps t >= 1, >= 50% of the
                    shown units (``memory_of``: an LSTM's h) sit beyond |0.95|: its tanh units are
                    pinned, their gradients vanish and new observations hardly move them
state_not_reset     a loop's own record of the state it carried into each step (e.g. its annotations)
                    starts an episode other than the first with a state that is not the initial one:
                    the loop carried its memory across the episode boundary (:func:`reset_findings`)
=================== ==================================================================================

Each episode is given as its observations [T+1, *obs] and the state rows carried into each step
(:func:`rlviz.explain.given_state.carried_states`), or, in the jobs' rollouts (render, compare, timeline), as the
bounded sample of its steps that :class:`rlviz.evaluate.rollouts.memory_sample.MemorySample` kept while it played
(the first 16 episodes, up to 32 steps each, with the state each step carried; :func:`memory_stats` per episode,
:func:`rollout_memory_findings` over them). Neither
finding is raised on fewer than :data:`MIN_MEMORY_STEPS` steps in all.
"""

from __future__ import annotations

import numpy as np

from ...episode.memory import RESET_ATOL, SATURATION_LEVEL, saturation, start_gap
from .diagnostics import Finding

__all__ = ["MEMORY_THRESHOLDS", "MEMORY_WARNING_IDS", "MIN_MEMORY_STEPS", "memory_effect", "memory_stats",
           "findings_of_stats", "rollout_memory_findings", "memory_findings", "reset_findings"]

MEMORY_THRESHOLDS = {"unused_change": 0.01, "saturated_share": 0.5, "saturation_level": SATURATION_LEVEL}
MEMORY_WARNING_IDS = ("memory_unused", "memory_saturated", "state_not_reset")
MIN_MEMORY_STEPS = 8


def memory_effect(policy, observations, states) -> np.ndarray:
    """float64 [T+1]: how much the outputs at each step change when the state carried into it is replaced by the
    initial state (0 at t = 0, where they are the same)."""
    import torch

    from ...explain.given_state import check_recurrent

    check_recurrent(policy, "memory diagnostics")
    with torch.no_grad():
        x = policy.to_tensor(np.asarray(observations))
        n = int(x.shape[0])
        carried, _ = policy.torch_step(x, policy.state_tensors(tuple(np.asarray(s) for s in states)))
        zero, _ = policy.torch_step(x, policy.state_tensors(policy.initial_state(n)))
        a, b = carried["logits"].double(), zero["logits"].double()
        if getattr(policy, "action_spec", None) is not None and policy.action_spec.kind == "box":
            change = (a - b).abs().mean(-1) / (a.abs().mean() + 1e-6)
        else:
            change = 0.5 * (torch.exp(a) - torch.exp(b)).abs().sum(-1)
        return change.cpu().numpy()


def memory_stats(policy, observations, states) -> dict:
    """One episode's memory numbers (JSON values) on some of its steps t >= 1 (observations [n, *obs], the state
    rows carried into them [n, ...]): ``steps``, ``max_change``, ``change_sum`` (:func:`memory_effect`) and, for an
    "lstm"/"gru" memory, ``saturated_sum`` (the shares of saturated units, summed over the steps). What the
    rollouts keep per episode (``EpisodeResult.diag["memory"]``) and :func:`findings_of_stats` reads."""
    n = int(np.shape(observations)[0])
    if n == 0:
        return {"steps": 0, "max_change": 0.0, "change_sum": 0.0}
    change = memory_effect(policy, observations, states)
    out = {"steps": n, "max_change": float(change.max()), "change_sum": float(change.sum())}
    if str(getattr(policy, "memory_kind", "other")) in ("lstm", "gru") and callable(getattr(policy, "memory_of", None)):
        out["saturated_sum"] = float(saturation(policy.memory_of(tuple(np.asarray(s) for s in states))).sum())
    return out


def findings_of_stats(stats: list) -> list[Finding]:
    """``memory_unused`` / ``memory_saturated`` over the episodes' :func:`memory_stats` (numpy only)."""
    steps = sum(int(s["steps"]) for s in stats)
    out: list[Finding] = []
    if steps >= MIN_MEMORY_STEPS:
        top = max(float(s["max_change"]) for s in stats if s["steps"])
        mean = sum(float(s["change_sum"]) for s in stats) / steps
        if top <= MEMORY_THRESHOLDS["unused_change"]:
            out.append(Finding("memory_unused", "warning",
                               f"Zeroing the agent's memory at each of {steps} steps changes its outputs by at most "
                               f"{top:.4f}: it ignores its state and acts on the current observation alone. Check "
                               "that the state reaches the actor (a detached or overwritten state, a recurrent layer "
                               "trained with sequence length 1) or use a feed-forward agent.",
                               {"max_change": round(top, 6), "mean_change": round(mean, 6), "steps": steps}))
    with_sat = [s for s in stats if "saturated_sum" in s]
    sat_steps = sum(int(s["steps"]) for s in with_sat)
    if sat_steps >= MIN_MEMORY_STEPS:
        share = sum(float(s["saturated_sum"]) for s in with_sat) / sat_steps
        if share >= MEMORY_THRESHOLDS["saturated_share"]:
            out.append(Finding("memory_saturated", "warning",
                               f"{100 * share:.0f}% of the memory's units sit beyond |0.95| on average over "
                               f"{sat_steps} steps: its tanh units are pinned, so new observations hardly move them "
                               "and their gradients vanish. Check the recurrent weights' scale and the input "
                               "normalisation.", {"mean_saturated_share": round(share, 4), "steps": sat_steps}))
    return out


def rollout_memory_findings(episodes) -> list[Finding]:
    """The memory findings of a rollout's :class:`~rlviz.episode.EpisodeResult` s (those whose ``diag`` holds
    ``"memory"``: a recurrent policy's; [] for any other)."""
    return findings_of_stats([e.diag["memory"] for e in episodes
                              if isinstance(getattr(e, "diag", None), dict) and "memory" in e.diag])


def memory_findings(policy, episodes: list) -> list[Finding]:
    """The memory findings for ``episodes``: a list of (observations [T+1, *obs], carried state rows [T+1, ...])."""
    from ...explain.given_state import check_recurrent

    check_recurrent(policy, "memory diagnostics")
    return findings_of_stats([memory_stats(policy, np.asarray(obs)[1:], tuple(np.asarray(s)[1:] for s in states))
                              for obs, states in episodes])


def reset_findings(carried: list, initial: np.ndarray, atol: float = RESET_ATOL) -> list[Finding]:
    """``state_not_reset`` for a loop's record of the state it carried into each step: ``carried`` one float
    array [steps, D] per episode, in the order the loop played them; ``initial`` [D] the policy's initial state
    (its ``memory_of``). Raised when an episode after the first starts away from ``initial``; the evidence says which
    (the first 10), how many, and the largest difference."""
    init = np.asarray(initial, np.float64).reshape(-1)
    bad, worst = [], 0.0
    for i in range(1, len(carried)):
        first = np.asarray(carried[i], np.float64)
        if first.shape[0] == 0:
            continue
        gap = start_gap(first[0], init)
        if gap > atol:
            bad.append(i)
            worst = max(worst, gap)
    if not bad:
        return []
    return [Finding("state_not_reset", "warning",
                    f"{len(bad)} of {len(carried) - 1} episodes after the first started with a memory that is not the "
                    f"initial state (largest difference {worst:.3g}): the loop did not reset the state at the episode "
                    "boundary, so each episode starts with the last one's memory. Reset it where the env resets "
                    "(policy.initial_state(1), or zero the rows of the envs whose episode ended).",
                    {"episodes": bad[:10], "not_reset": len(bad), "max_difference": round(worst, 6)})]
