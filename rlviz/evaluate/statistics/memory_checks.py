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
(:func:`rlviz.explain.given_state.carried_states`). Neither finding is raised on fewer than
:data:`MIN_MEMORY_STEPS` steps in all.
"""

from __future__ import annotations

import numpy as np
import torch

from ...episode.memory import SATURATION_LEVEL, saturation
from ...explain.given_state import check_recurrent
from .diagnostics import Finding

__all__ = ["MEMORY_THRESHOLDS", "MEMORY_WARNING_IDS", "MIN_MEMORY_STEPS", "memory_effect",
           "memory_findings", "reset_findings"]

MEMORY_THRESHOLDS = {"unused_change": 0.01, "saturated_share": 0.5, "saturation_level": SATURATION_LEVEL}
MEMORY_WARNING_IDS = ("memory_unused", "memory_saturated", "state_not_reset")
MIN_MEMORY_STEPS = 8


@torch.no_grad()
def memory_effect(policy, observations, states) -> np.ndarray:
    """float64 [T+1]: how much the outputs at each step change when the state carried into it is replaced by the
    initial state (0 at t = 0, where they are the same)."""
    check_recurrent(policy, "memory diagnostics")
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


def memory_findings(policy, episodes: list) -> list[Finding]:
    """The memory findings for ``episodes``: a list of (observations [T+1, *obs], carried state rows [T+1, ...])."""
    check_recurrent(policy, "memory diagnostics")
    changes, sats = [], []
    kind = str(getattr(policy, "memory_kind", "other"))
    for obs, states in episodes:
        changes.append(memory_effect(policy, obs, states)[1:])
        if kind in ("lstm", "gru") and callable(getattr(policy, "memory_of", None)):
            sats.append(saturation(policy.memory_of(tuple(np.asarray(s) for s in states)))[1:])
    change = np.concatenate(changes) if changes else np.zeros(0)
    out: list[Finding] = []
    if change.size >= MIN_MEMORY_STEPS and float(change.max()) <= MEMORY_THRESHOLDS["unused_change"]:
        out.append(Finding("memory_unused", "warning",
                           f"Zeroing the agent's memory at each of {change.size} steps changes its outputs by at most "
                           f"{float(change.max()):.4f}: it ignores its state and acts on the current observation "
                           "alone. Check that the state reaches the actor (a detached or overwritten state, a "
                           "recurrent layer trained with sequence length 1) or use a feed-forward agent.",
                           {"max_change": round(float(change.max()), 6), "mean_change": round(float(change.mean()), 6),
                            "steps": int(change.size)}))
    sat = np.concatenate(sats) if sats else np.zeros(0)
    if sat.size >= MIN_MEMORY_STEPS and float(sat.mean()) >= MEMORY_THRESHOLDS["saturated_share"]:
        out.append(Finding("memory_saturated", "warning",
                           f"{100 * float(sat.mean()):.0f}% of the memory's units sit beyond |0.95| on average over "
                           f"{sat.size} steps: its tanh units are pinned, so new observations hardly move them and "
                           "their gradients vanish. Check the recurrent weights' scale and the input normalisation.",
                           {"mean_saturated_share": round(float(sat.mean()), 4), "steps": int(sat.size)}))
    return out


def reset_findings(carried: list, initial: np.ndarray, atol: float = 1e-6) -> list[Finding]:
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
        gap = float(np.abs(first[0].reshape(-1) - init).max())
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
