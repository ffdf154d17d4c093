"""A recurrent policy's saliency given the state it carried: the states an episode's steps were taken in
(:func:`carried_states`), and :class:`GivenState`, the policy with those states fixed, which the saliency methods
take as they take a feed-forward policy (its outputs then depend on the observation only).

A recurrent policy follows the contract of docs/memory.md: ``initial_state(n)``, ``torch_step(obs, state)`` (one
differentiable step on batch-first torch states), ``state_tensors`` / ``state_arrays``. The image saliency of step
t is the saliency of the observation at t with the state carried into t held fixed (what the memory brought is
not explained by that map; :mod:`rlviz.explain.memory` is).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy
from ..errors import UsageError

__all__ = ["GivenState", "carried_states", "check_recurrent", "stack_rows"]

_CONTRACT = ("initial_state", "torch_step", "state_tensors", "state_arrays")


def check_recurrent(policy: Any, what: str) -> None:
    """A one-line UsageError unless ``policy`` is recurrent with the 0.5 contract (``torch_step`` and the state
    conversions)."""
    missing = [name for name in _CONTRACT if not callable(getattr(policy, name, None))]
    if not capabilities_of(policy).recurrent or missing:
        raise UsageError(f"{what} needs a recurrent policy with {', '.join(_CONTRACT)} (docs/memory.md); "
                         f"{type(policy).__name__} lacks {', '.join(missing) or 'stateful = True'}. Wrap your "
                         "module with the recurrent protocol of rlviz.agent.recurrent.")


def stack_rows(rows: list) -> tuple:
    """Per-step state rows (each a tuple of [1, ...] arrays) -> one tuple of [n, ...] arrays."""
    return tuple(np.concatenate(parts) for parts in zip(*rows))


@torch.no_grad()
def carried_states(policy: Any, observations, start: tuple | None = None) -> tuple:
    """The state each observation of an episode was seen in: rows [T+1, ...] per state part (row t: the state
    carried into step t; row 0 ``start``, default ``policy.initial_state(1)``), from one ``torch_step`` per step,
    as the loops carry it. ``observations`` [T+1, *obs] as the policy takes them (read one chunk at a time)."""
    check_recurrent(policy, "the carried states")
    n = int(observations.shape[0])
    state = policy.state_tensors(start if start is not None else policy.initial_state(1))
    out = [np.empty((n,) + tuple(s.shape[1:]), np.float32) for s in state]
    for c in range(0, n, 256):
        chunk = policy.to_tensor(np.asarray(observations[c : c + 256]))
        seen: list = []
        for i in range(chunk.shape[0]):
            seen.append(state)
            _, state = policy.torch_step(chunk[i : i + 1], state)
        for part, rows in zip(out, policy.state_arrays(tuple(torch.cat(p) for p in zip(*seen)))):
            part[c : c + chunk.shape[0]] = rows
    return tuple(out)


class GivenState(Policy):
    """``policy`` with the state of each row fixed: ``forward(obs [n])`` is ``policy.torch_step(obs, state)``'s heads,
    the state ``state`` (batch-first rows, numpy or torch) of n rows, or of one row given to every observation
    (SmoothGrad's noisy copies, perturbation's masked frames of one step). Gradients flow to the observations only."""

    stateful = False

    def __init__(self, policy: Any, state: tuple):
        check_recurrent(policy, "saliency of a recurrent policy")
        self.inner = policy
        for name in ("num_actions", "kind", "device", "action_spec", "squash", "obs_format", "batch_size"):
            setattr(self, name, getattr(policy, name, getattr(Policy, name, None)))
        self.differentiable = capabilities_of(policy).differentiable
        self.module = getattr(policy, "module", None)
        self.forward_rows = None
        if all(isinstance(t, torch.Tensor) for t in state):
            self.state: tuple = tuple(t.detach() for t in state)
        else:
            self.state = tuple(policy.state_tensors(state))
        self.rows = int(self.state[0].shape[0])

    def _state_for(self, n: int) -> tuple:
        if n == self.rows:
            return self.state
        if self.rows == 1:
            return tuple(s.expand(n, *s.shape[1:]) for s in self.state)
        if n == 1:  # a shape check on the first observation
            return tuple(s[:1] for s in self.state)
        raise UsageError(f"GivenState holds {self.rows} state rows; received {n} observations. Pass one state row "
                         "per observation, or one row for all.")

    def heads(self, obs: torch.Tensor) -> dict:
        h, _ = self.inner.torch_step(obs, self._state_for(int(obs.shape[0])))
        if capabilities_of(self).continuous_actions:
            return {"mean": h["logits"], "std": None, "value": h.get("value")}
        return {"logits": h["logits"], "value": h.get("value")}

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h, _ = self.inner.torch_step(obs, self._state_for(int(obs.shape[0])))
        return h["logits"], h.get("value")
