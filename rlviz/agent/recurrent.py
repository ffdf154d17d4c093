"""Your own recurrent torch module (LSTM, GRU, anything with a state) as an rlviz policy: the documented protocol.

A module plugs in by giving two methods (:class:`RecurrentModule`, torch tensors in and out)::

    initial_state(batch) -> state            # a tensor or a tuple of tensors, the state at an episode start
    step(obs, state) -> (logits, new_state)  # or (logits, value, new_state); obs float32 [B, *obs]

``logits`` [B, A] (any per-row offset: they are read as log-probabilities after ``log_softmax``), ``value`` [B] or
[B, 1]. The state keeps whatever layout the module likes (``nn.LSTM``'s (h, c) [layers, B, H], ``nn.GRU``'s h
[layers, B, H], an ``LSTMCell``'s [B, H]...): the batch axis of each tensor is found by comparing
``initial_state(1)`` with ``initial_state(2)``. The first tensor of the state is the memory rlviz shows (an LSTM's
h, a GRU's h; its last layer when it has a layers axis).

:class:`RecurrentTorchPolicy` adapts such a module to the stateful :class:`~rlviz.agent.policy.Policy` contract of
the loops (:mod:`rlviz.agent.stepping`: one state row per env, ``initial_state(1)`` at each episode start, so a
``done`` resets the state as CleanRL's ``get_states`` does) and to the recurrent contract of 0.5
(``torch_step``, ``state_tensors``, ``state_arrays``, ``memory_of``, ``memory_kind``). Every step forwards exactly
:meth:`~rlviz.agent.policy.Policy.rows_for` rows (padded), so an episode's numbers do not depend on the rows beside
it: the same alone, among 16 envs or in a worker.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from ..errors import UsageError
from .policy import Policy, PolicyOutput, check_action_space, resolve_device

__all__ = ["RecurrentModule", "RecurrentTorchPolicy", "is_recurrent_module", "padded_steps"]


@runtime_checkable
class RecurrentModule(Protocol):
    """What a recurrent torch module gives rlviz (see the module docstring)."""

    def initial_state(self, batch: int) -> Any:
        """The state of ``batch`` envs starting an episode: a tensor or a tuple of tensors."""

    def step(self, obs: torch.Tensor, state: Any) -> tuple:
        """One env step: (logits [B, A], new state) or (logits [B, A], value [B], new state)."""


def is_recurrent_module(obj) -> bool:
    """An ``nn.Module`` with the recurrent protocol's ``initial_state`` and ``step``."""
    return isinstance(obj, nn.Module) and callable(getattr(obj, "initial_state", None)) and callable(
        getattr(obj, "step", None))


def _memory_kind(module: nn.Module) -> str:
    declared = getattr(module, "memory_kind", None)
    if declared in ("lstm", "gru", "other"):
        return str(declared)
    kinds = {"lstm" if isinstance(m, (nn.LSTM, nn.LSTMCell)) else "gru" for m in module.modules()
             if isinstance(m, (nn.LSTM, nn.LSTMCell, nn.GRU, nn.GRUCell))}
    return kinds.pop() if len(kinds) == 1 else "other"


def _parts(state, who: str) -> tuple[torch.Tensor, ...]:
    parts = tuple(state) if isinstance(state, (tuple, list)) else (state,)
    if not parts or not all(isinstance(p, torch.Tensor) for p in parts):
        raise UsageError(f"{who}.initial_state(batch) returned {type(state).__name__}; expected a torch tensor or a "
                         "tuple of torch tensors (the recurrent protocol, rlviz.agent.recurrent).")
    return parts


def _batch_axes(one: tuple, two: tuple, who: str) -> tuple[int, ...]:
    """The axis of each state tensor that holds the batch: the one that is 1 in ``one`` and 2 in ``two``."""
    axes = []
    for a, b in zip(one, two):
        diff = [i for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
        if a.dim() != b.dim() or len(diff) != 1 or (a.shape[diff[0]], b.shape[diff[0]]) != (1, 2):
            raise UsageError(f"{who}.initial_state(1) gave shapes {[tuple(t.shape) for t in one]} and initial_state(2) "
                             f"{[tuple(t.shape) for t in two]}; each tensor needs one batch axis of size batch.")
        axes.append(diff[0])
    return tuple(axes)


def _pad(a: np.ndarray, rows: int) -> np.ndarray:
    return a if a.shape[0] == rows else np.concatenate([a, np.repeat(a[:1], rows - a.shape[0], axis=0)])


def padded_steps(policy, obs: np.ndarray, state: tuple) -> tuple[dict, tuple]:
    """``policy.torch_step`` on numpy rows, in forwards of exactly ``policy.rows_for`` rows (the last one padded
    with copies of its first row), no gradients: (heads {name: tensor [B, ...]}, new state rows)."""
    obs = np.asarray(obs)
    n, rows = int(obs.shape[0]), policy.rows_for(obs.shape[1:])
    heads: dict[str, list] = {}
    new: list = []
    with torch.no_grad():
        for at in range(0, n, rows):
            o = _pad(obs[at : at + rows], rows)
            s = tuple(_pad(np.asarray(p[at : at + rows]), rows) for p in state)
            h, out = policy.torch_step(policy.to_tensor(o), policy.state_tensors(s))
            for k, v in h.items():
                heads.setdefault(k, []).append(v)
            new.append(policy.state_arrays(out))
    return ({k: torch.cat(v)[:n] for k, v in heads.items()},
            tuple(np.concatenate(p)[:n] for p in zip(*new)))


class RecurrentTorchPolicy(Policy):
    """A module with the recurrent protocol as a stateful rlviz policy (discrete actions).

    Args:
        module: ``initial_state(batch)`` and ``step(obs, state)`` (see the module docstring).
        num_actions: A; read from the env's ``action_space`` or the first step when omitted.
        device: ``"auto"``, ``"cpu"``, ``"cuda:0"``...
        obs_transform: optional callable on the observation tensor before ``step`` (e.g. ``lambda x: x / 255``).
        action_space: the env's (Discrete) action space.
    """

    stateful = True

    def __init__(self, module: nn.Module, num_actions: int | None = None, device: str | torch.device = "auto",
                 obs_transform=None, action_space=None):
        who = type(module).__name__
        if not is_recurrent_module(module):
            raise UsageError(f"RecurrentTorchPolicy takes an nn.Module with initial_state(batch) and step(obs, state); "
                             f"{who} has not both (the recurrent protocol, rlviz.agent.recurrent).")
        if action_space is not None:
            num_actions = check_action_space(action_space, num_actions)
        self.device = resolve_device(device)
        self.module = module.to(self.device).eval()
        protocol: Any = self.module  # its initial_state and step
        self.obs_transform = obs_transform
        self.num_actions = int(num_actions) if num_actions is not None else -1
        self.kind = "actor_critic"
        self._kind_known = False
        self.memory_kind = _memory_kind(module)
        with torch.no_grad():
            one, two = (_parts(protocol.initial_state(n), who) for n in (1, 2))
            self._single = not isinstance(protocol.initial_state(1), (tuple, list))
        self._axes = _batch_axes(one, two, who)
        self._row_shapes = tuple(tuple(t.shape[:ax]) + tuple(t.shape[ax + 1 :]) for t, ax in zip(one, self._axes))

    # -- the state ------------------------------------------------------------------------------
    def initial_state(self, n: int) -> tuple:
        """The module's ``initial_state(n)`` as state rows: float32 arrays [n, ...] (batch axis first)."""
        with torch.no_grad():
            parts = _parts(self.module.initial_state(int(n)), type(self.module).__name__)
        return self.state_arrays(tuple(p.movedim(ax, 0) for p, ax in zip(parts, self._axes)))

    def state_tensors(self, rows) -> tuple:
        """State rows (numpy, batch-first) -> float32 torch tensors, batch-first, on the policy's device."""
        if len(rows) != len(self._row_shapes) or any(tuple(np.shape(r)[1:]) != s for r, s in zip(rows, self._row_shapes)):
            raise UsageError(f"{type(self.module).__name__}'s state is {len(self._row_shapes)} arrays [rows, ...] of "
                             f"{list(self._row_shapes)} per row; received {[tuple(np.shape(r)) for r in rows]}. Start "
                             "it with policy.initial_state(rows).")
        return tuple(torch.as_tensor(np.asarray(r, np.float32), device=self.device) for r in rows)

    @staticmethod
    def state_arrays(tensors) -> tuple:
        """Batch-first state tensors -> state rows (numpy float32, detached)."""
        return tuple(t.detach().float().cpu().numpy() for t in tensors)

    def memory_of(self, rows) -> np.ndarray:
        """The memory to show, float32 [rows, D]: the state's first tensor (an LSTM's or GRU's h), its last layer
        when it has a layers axis first, flattened otherwise."""
        h = np.asarray(rows[0], np.float32)
        if h.ndim == 3 and self._axes[0] == 1:  # nn.LSTM / nn.GRU: [layers, B, H] -> rows [B, layers, H]
            h = h[:, -1, :]
        return h.reshape(h.shape[0], -1)

    # -- the network ----------------------------------------------------------------------------
    def torch_step(self, obs: torch.Tensor, state: tuple) -> tuple[dict, tuple]:
        """One differentiable env step: obs [B, *obs] (:meth:`to_tensor`'s), state batch-first tensors
        (:meth:`state_tensors`) -> ({"logits": log-probabilities [B, A], "value": [B] when the module gives one},
        the new state, batch-first)."""
        who = type(self.module).__name__
        x = self.obs_transform(obs) if self.obs_transform is not None else obs
        mine = tuple(t.movedim(0, ax) for t, ax in zip(state, self._axes))
        out = self.module.step(x, mine[0] if self._single else mine)
        if not isinstance(out, (tuple, list)) or len(out) not in (2, 3):
            raise UsageError(f"{who}.step(obs, state) returned {type(out).__name__}; expected (logits, new_state) or "
                             "(logits, value, new_state).")
        logits, value, new = (out[0], None, out[1]) if len(out) == 2 else tuple(out)
        b = int(obs.shape[0])
        if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != b:
            raise UsageError(f"{who}.step(obs, state) gave logits of shape "
                             f"{tuple(getattr(logits, 'shape', ()))}; expected [{b}, actions].")
        self._settle(logits, value)
        heads = {"logits": torch.log_softmax(logits.float(), dim=-1)}
        if value is not None:
            heads["value"] = value.float().reshape(b)
        new_parts = _parts(new, who)
        if len(new_parts) != len(self._axes):
            raise UsageError(f"{who}.step returned a state of {len(new_parts)} tensors; initial_state gives "
                             f"{len(self._axes)}.")
        return heads, tuple(t.movedim(ax, 0) for t, ax in zip(new_parts, self._axes))

    def _settle(self, logits: torch.Tensor, value) -> None:
        if not self._kind_known:
            self.kind, self._kind_known = ("actor_critic" if value is not None else "logits"), True
        if self.num_actions < 0:
            self.num_actions = int(logits.shape[-1])
        elif logits.shape[-1] != self.num_actions:
            raise UsageError(f"{type(self.module).__name__}.step gave {logits.shape[-1]} logits but the action space "
                             f"has {self.num_actions} actions.")

    def _output(self, heads: dict) -> PolicyOutput:
        logits = heads["logits"].detach().float().cpu()
        value = heads.get("value")
        return PolicyOutput(logits.numpy(), torch.softmax(logits, -1).numpy(),
                            None if value is None else value.detach().float().cpu().numpy(), self.kind)

    # -- the Policy contract --------------------------------------------------------------------
    def step(self, obs, state, masks=None) -> tuple[PolicyOutput, tuple]:
        """One env step per row: obs [B, *obs], state B rows -> (PolicyOutput [B], the new state rows)."""
        if masks is not None:
            raise UsageError(f"{type(self.module).__name__} takes no action masks (the recurrent protocol has none).")
        heads, new = padded_steps(self, obs, state)
        return self._output(heads), new

    def heads(self, obs: torch.Tensor) -> dict:
        """One episode's observations [T, *obs] in order from the initial state, a step at a time
        (differentiable)."""
        state = self.state_tensors(self.initial_state(1))
        outs: dict[str, list] = {}
        for t in range(int(obs.shape[0])):
            h, state = self.torch_step(obs[t : t + 1], state)
            for k, v in h.items():
                outs.setdefault(k, []).append(v)
        return {k: torch.cat(v) for k, v in outs.items()} | ({} if "value" in outs else {"value": None})

    def forward(self, obs: torch.Tensor):
        h = self.heads(obs)
        return h["logits"], h.get("value")

    def evaluate(self, obs, batch_size: int | None = None) -> PolicyOutput:
        """One episode's observations [T, *obs] in order from the initial state: each step as :meth:`step` computes
        it (the same padded forwards), so the numbers equal the rollout's bit for bit."""
        if not (hasattr(obs, "shape") and hasattr(obs, "__getitem__")):
            obs = np.asarray(obs)
        if obs.shape[0] == 0:
            raise UsageError("evaluate() received an empty batch of observations; pass at least one.")
        state, outs = self.initial_state(1), []
        for t in range(int(obs.shape[0])):
            out, state = self.step(np.asarray(obs[t : t + 1]), state)
            outs.append(out)
        value = None if outs[0].value is None else np.concatenate([o.value for o in outs])
        return PolicyOutput(np.concatenate([o.logits for o in outs]), np.concatenate([o.probs for o in outs]), value,
                            self.kind)
