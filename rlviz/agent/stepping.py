"""The per-step hooks of a policy, in one place for every loop (rollouts, replays, ``run_episode``, the recorder).

A plain policy is ``policy.evaluate(obs)``. A ``stateful`` one (RecurrentPPO) carries a state row per env: the
loop keeps each env's row (``policy.initial_state(1)`` when its episode starts) and :func:`policy_step` stacks the
active rows, steps the policy and hands the new rows back. One that ``needs_action_masks`` (MaskablePPO) gets each
active env's ``action_masks()`` at every step. :func:`evaluate_episode` is the same for a recorded episode: its
observations in order (a stateful policy reads them as one episode from its initial state), with the masks the
recorder stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .capabilities import capabilities_of
from .masking import env_action_masks
from .policy import Policy, PolicyOutput

__all__ = ["plain", "start_state", "episode_masks", "policy_step", "evaluate_episode"]


def plain(policy: Policy) -> bool:
    """True for a policy that needs neither a state nor masks: ``evaluate(obs)`` is all."""
    return capabilities_of(policy).plain


def start_state(policy: Policy):
    """The state row of an env starting an episode (None for a policy without state)."""
    return policy.initial_state(1) if capabilities_of(policy).recurrent else None  # type: ignore[attr-defined]


def episode_masks(policy: Policy, env) -> np.ndarray | None:
    """bool [A]: ``env``'s action masks now, when ``policy`` takes them (None otherwise)."""
    return env_action_masks(env, policy.num_actions) if capabilities_of(policy).action_masks else None


def policy_step(policy: Policy, obs: np.ndarray, states: list, envs: list) -> tuple[PolicyOutput, list]:
    """One step of ``policy`` on the active envs: obs [B, *obs], ``states`` one state row per env (from
    :func:`start_state`, then from the previous call), ``envs`` the B envs (their masks are read here). Returns
    (PolicyOutput [B], the B new state rows)."""
    caps = capabilities_of(policy)
    if caps.plain:
        return policy.evaluate(obs), states
    kwargs: dict[str, Any] = {}
    if caps.action_masks:
        kwargs["masks"] = np.stack([env_action_masks(env, policy.num_actions) for env in envs])
    if not caps.recurrent:
        return policy.evaluate(obs, **kwargs), states
    stacked = tuple(np.concatenate(parts) for parts in zip(*states))
    out, new = policy.step(obs, stacked, **kwargs)  # type: ignore[attr-defined]  # a stateful policy
    return out, [tuple(part[i : i + 1] for part in new) for i in range(len(states))]


def evaluate_episode(policy: Policy, obs, masks: np.ndarray | None = None) -> PolicyOutput:
    """What ``policy`` says on each of a recorded episode's observations [T+1, *obs] (in order; a stateful
    policy from its initial state), with the episode's action masks bool [T+1, A] when it takes them."""
    if masks is not None and capabilities_of(policy).action_masks:
        return policy.evaluate(obs, masks=masks)  # type: ignore[call-arg]  # a policy that takes masks
    return policy.evaluate(obs)
