"""The per-step hooks of a policy, in one place for every loop (rollouts, replays, ``run_episode``, the recorder).

A plain policy is ``policy.evaluate(obs)``. A ``stateful`` one (RecurrentPPO) carries a state row per env: the
loop keeps each env's row (``policy.initial_state(1)`` when its episode starts) and :func:`policy_step` stacks the
active rows, steps the policy and hands the new rows back. One that ``needs_action_masks`` (MaskablePPO) gets each
active env's ``action_masks()`` at every step. :func:`evaluate_episode` is the same for a recorded episode: its
observations in order (a stateful policy reads them as one episode from its initial state), with the masks the
recorder stored.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np

from .capabilities import capabilities_of
from .masking import env_action_masks
from .policy import Policy, PolicyOutput

__all__ = ["plain", "start_state", "episode_masks", "policy_step", "evaluate_episode", "evaluate_from", "FromState"]


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


def evaluate_from(policy: Policy, obs, state) -> PolicyOutput:
    """What a stateful ``policy`` says on observations [T, *obs] in order, starting from the state row ``state``
    (its memory at a saved step) instead of its initial state: a step per observation, as the loops compute it."""
    outs = []
    for t in range(int(obs.shape[0])):
        out, state = policy.step(np.asarray(obs[t : t + 1]), state)  # type: ignore[attr-defined]  # stateful
        outs.append(out)
    first = outs[0]
    rows = {f.name: np.concatenate([getattr(o, f.name) for o in outs]) for f in fields(first)
            if isinstance(getattr(first, f.name), np.ndarray) and np.ndim(getattr(first, f.name)) >= 1
            and f.name not in ("nvec", "low", "high")}
    return replace(first, **rows)


class FromState:
    """``policy`` resumed at a saved step: :meth:`evaluate` reads observations as the continuation of an episode
    whose state row was ``state`` there (:func:`evaluate_from`); everything else is the policy's."""

    def __init__(self, policy: Policy, state):
        self._policy, self._state = policy, state

    def evaluate(self, obs, batch_size: int | None = None, masks=None) -> PolicyOutput:
        return evaluate_from(self._policy, obs, self._state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)
