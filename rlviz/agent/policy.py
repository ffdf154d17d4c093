"""Policies: a batch of observations in, logits and a value estimate out.

The one contract every stage relies on is :class:`Policy`:

* ``forward(obs: Tensor[B, *obs_shape]) -> (logits Tensor[B, A], value Tensor[B] | None)``,
  differentiable (saliency takes gradients through it);
* ``evaluate(obs: ndarray[B, *obs_shape]) -> PolicyOutput``, no gradients, chunked;
* ``act(obs, rng, greedy) -> (actions int64[B], PolicyOutput)``.

Optional hooks (every loop honours them through :mod:`rlviz.agent.stepping`): ``stateful`` policies (RecurrentPPO)
give ``initial_state(n)`` (arrays [n, ...]) and ``step(obs, state) -> (PolicyOutput, state)``, a loop keeps one state
row per env, fresh at each episode start, and ``evaluate(obs)`` reads obs as one episode from the start;
``needs_action_masks`` policies (MaskablePPO) take ``masks=`` bool [B, A] (the env's ``action_masks()``).

:class:`TorchPolicy` adapts a ``torch.nn.Module`` returning ``(logits, value)``, logits only,
or Q-values (``kind="q"``: the panel shows Q-values and the value is ``max_a Q``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from ..errors import UsageError
from .actions import (
    MINATAR_ACTIONS,
    ActionSpec,
    action_names_for,
    action_spec,
    policy_entropy,
    relative_entropy,
    sample_actions,
)
from .capabilities import PolicyCapabilities, capabilities_of
from .cleanrl import cleanrl_module, cleanrl_num_actions, is_cleanrl_agent
from .outputs import split_box_output, split_output
from .policy_output import PolicyOutput
from .rows import FORWARD_ROWS, PIXEL_FORWARD_ROWS, forward_rows_for

__all__ = ["PolicyOutput", "PolicyCapabilities", "Policy", "TorchPolicy", "TorchPolicyOptions", "resolve_device", "relative_entropy", "policy_entropy", "KINDS",
           "FORWARD_ROWS", "PIXEL_FORWARD_ROWS", "forward_rows_for"]

KINDS = ("actor_critic", "logits", "q")
Kind = Literal["actor_critic", "logits", "q"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if isinstance(device, torch.device):
        return device
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UsageError(f"device={device!r} is not a torch device; use 'auto', 'cpu' or 'cuda[:N]'.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device={device!r} was asked for but CUDA is not available here; use device='auto' or 'cpu'.")
    return dev


class Policy:
    """Base class. Subclasses implement :meth:`forward`; the rest is shared.

    Attributes: ``num_actions`` (A), ``kind`` (one of :data:`KINDS`), ``device``. What it supports (the attributes
    below, declared by each subclass) is read through :attr:`capabilities`.
    """

    #: A; -1 until known (a TorchPolicy built without it reads it from its first forward).
    num_actions: int = -1
    kind: str = "actor_critic"
    device: torch.device = torch.device("cpu")
    #: Observations read per block in :meth:`evaluate` (each block is forwarded ``forward_rows`` at a time).
    batch_size: int = 1024
    #: Rows of every forward in :meth:`evaluate` (the last chunk padded): a row's result then depends on its
    #: observation only, not on the batch (measured: at a fixed batch size, not on the other rows or the row's
    #: position; it does change with the batch size), so an episode is the same alone or among 16 envs.
    #: None (the default): :func:`forward_rows_for` the observations' shape (see :meth:`rows_for`).
    forward_rows: int | None = None
    #: How observations of spaces other than a Box of rank >= 1 (Discrete, Tuple, Dict...) reach forward:
    #: "flat" (one-hot / concatenated as SB3 feeds an MLP, :mod:`rlviz.agent.obs`) or "raw" (stacked as
    #: they come: the policy preprocesses them itself, as SB3's policies do).
    obs_format: str = "flat"
    #: The env's actions (:func:`rlviz.agent.actions.action_spec`); None means Discrete(num_actions).
    action_spec: ActionSpec | None = None
    #: Box actions: the Gaussian is tanh-squashed into the bounds (SAC).
    squash: bool = False
    #: False for forward-only policies (numpy callables): gradient saliency is refused, perturbation works.
    differentiable: bool = True
    #: Carries a recurrent state from step to step (``initial_state``, ``step``; see the module docstring).
    stateful: bool = False
    #: Takes the env's ``action_masks()`` at every step (``evaluate(obs, masks=...)``; see the module docstring).
    needs_action_masks: bool = False
    #: The torch module behind :meth:`forward`, when there is one (saliency checks its BatchNorm layers).
    module: Any = None

    @property
    def capabilities(self) -> PolicyCapabilities:
        """What this policy supports (:func:`~rlviz.agent.capabilities.capabilities_of`: the attributes above,
        read once)."""
        return capabilities_of(self)

    # -- to implement -------------------------------------------------------------------------
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """obs float32 [B, *obs_shape] on ``self.device`` -> (logits [B, A], value [B] or None)."""
        raise NotImplementedError

    def heads(self, obs: torch.Tensor) -> dict:
        """Every output for obs: ``logits`` [B, n] and ``value`` [B] or None; for Box actions ``mean`` [B, D]
        and ``std`` [B, D] or None instead of logits. Default: :meth:`forward`'s (logits, value)."""
        logits, value = self.forward(obs)
        return {"logits": logits, "value": value}

    # -- shared -------------------------------------------------------------------------------
    def rows_for(self, obs_shape: tuple) -> int:
        """Rows of every forward for observations of ``obs_shape`` (one observation's, no batch axis):
        :attr:`forward_rows` when set, else :func:`forward_rows_for` the shape."""
        return int(self.forward_rows) if self.forward_rows else forward_rows_for(tuple(obs_shape))

    @property
    def has_value(self) -> bool:
        return self.kind in ("actor_critic", "q")

    def to_tensor(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Observations as a float32 tensor on the policy's device (no scaling: the module owns that)."""
        if isinstance(obs, torch.Tensor):
            return obs.to(device=self.device, dtype=torch.float32)
        arr = np.asarray(obs)
        if not arr.flags.writeable:  # e.g. a read-only memmap of a spooled episode
            arr = np.array(arr)
        return torch.as_tensor(arr, dtype=torch.float32, device=self.device)

    def probs_from_logits(self, logits: torch.Tensor) -> torch.Tensor:
        spec = self.action_spec
        if spec is not None and spec.kind in ("multi_discrete", "multi_binary"):
            return torch.cat([torch.softmax(p, dim=-1) for p in torch.split(logits, list(spec.nvec or ()), dim=-1)], -1)
        if self.kind == "q":
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)
        return torch.softmax(logits, dim=-1)

    @torch.no_grad()
    def evaluate(self, obs: np.ndarray, batch_size: int | None = None) -> PolicyOutput:
        """Internals for a batch of observations [B, *obs_shape], batch-invariant: forwards of exactly
        :meth:`rows_for` rows (see :attr:`forward_rows`), read ``batch_size`` rows at a time (disk-backed arrays)."""
        if not (hasattr(obs, "shape") and hasattr(obs, "__getitem__")):
            obs = np.asarray(obs)  # lists; arrays and disk-backed SpoolArrays are read chunk by chunk
        n = int(obs.shape[0])
        if n == 0:
            raise UsageError("evaluate() received an empty batch of observations; pass at least one.")
        rows = self.rows_for(obs.shape[1:])
        block = max(rows, int(batch_size or self.batch_size) // rows * rows)
        parts: dict[str, list] = {}
        for start in range(0, n, block):
            chunk = np.asarray(obs[start : start + block])
            for at in range(0, chunk.shape[0], rows):
                self._forward_padded(chunk[at : at + rows], rows, parts)
        return self.output_of(parts, n)

    def output_of(self, parts: dict, n: int) -> PolicyOutput:
        """The PolicyOutput of the first ``n`` rows of the heads gathered by :meth:`add_heads`, chunk by chunk."""
        out = {k: (torch.cat(v) if len(v) > 1 else v[0])[:n].numpy() for k, v in parts.items()}
        spec = self.action_spec
        if "mean" in out:
            mean = out["mean"]
            low, high = (spec.low, spec.high) if spec is not None else (None, None)
            return PolicyOutput(mean, np.zeros((mean.shape[0], 0), np.float32), out.get("value"), self.kind,
                                mean=mean, std=out.get("std"), squash=bool(self.squash), low=low, high=high)
        nvec = spec.nvec if spec is not None and spec.kind in ("multi_discrete", "multi_binary") else None
        return PolicyOutput(out["logits"], out["probs"], out.get("value"), self.kind, nvec=nvec,
                            quantiles=out.get("quantiles"))

    def _forward_padded(self, chunk: np.ndarray, rows: int, parts: dict) -> None:
        """Forward ``chunk`` (at most ``rows`` observations) padded to exactly ``rows``; append each head."""
        if chunk.shape[0] < rows:
            chunk = np.concatenate([chunk, np.repeat(chunk[:1], rows - chunk.shape[0], axis=0)])
        self.add_heads(self.heads(self.to_tensor(chunk)), parts)

    def add_heads(self, h: dict, parts: dict) -> None:
        """Append one forward chunk's heads (:meth:`heads`' dict, with or without a graph) to ``parts``, the
        probabilities computed from the logits; :meth:`output_of` turns them into a PolicyOutput."""
        if "logits" in h and "mean" not in h:
            h["probs"] = self.probs_from_logits(h["logits"].detach().float())
        for key, v in h.items():
            if v is not None:
                v = v.detach().float()
                parts.setdefault(key, []).append((v.reshape(-1) if key == "value" else v).cpu())

    def act(
        self, obs: np.ndarray, rng: np.random.Generator | None = None, greedy: bool = False
    ) -> tuple[np.ndarray, PolicyOutput]:
        """Choose actions for a batch [B, *obs_shape] with :func:`sample_actions` (a seeded ``rng`` reproduces
        the episode; ``greedy``: argmax / the Gaussian mean). Returns (actions [B, ...], the PolicyOutput)."""
        out = self.evaluate(obs)
        return sample_actions(out, rng if rng is not None else np.random.default_rng(), greedy), out


@dataclass(frozen=True, eq=False)
class TorchPolicyOptions:
    """The rarely needed settings of a :class:`TorchPolicy`.

    batch_size: rows per forward when ``evaluate`` is given more (default 1024).
    probe_obs: for a CleanRL-style agent (``get_action_and_value``, no ``forward``), observations
        [B, *obs_shape] (any dtype) to check how its parts compose (:mod:`rlviz.agent.cleanrl`) right away; without
        them the check runs on the first batch the policy sees.
    """

    batch_size: int = 1024
    probe_obs: Any = None


class TorchPolicy(Policy):
    """Adapt a ``torch.nn.Module`` (or any callable on tensors) to :class:`Policy`.

    Args:
        module: maps float32 obs [B, *obs_shape] to what the action space needs:
            Discrete: logits [B, A], (logits, value), {"logits", "value"} or Q-values (``kind="q"``);
            MultiDiscrete: logits [B, sum(nvec)]; MultiBinary(n): Bernoulli logits [B, n] (same tuple/dict forms);
            Box [D]: a dict {"mean", "log_std" or "std", "value"}, a tensor [B, 2D] = (mean, log_std), a tensor
            [B, D] (a deterministic actor's action, TD3), or a tuple (one of those tensors, value).
        num_actions: A; read from the first forward when omitted.
        kind: ``"auto"`` (actor_critic when the module returns a value, logits otherwise),
            ``"actor_critic"``, ``"logits"`` or ``"q"``.
        device: ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda:0"``...
        obs_transform: optional callable applied to the obs tensor before the module
            (e.g. ``lambda x: x / 255``), part of the differentiable path.
        action_space: the env's gymnasium action space (needed for anything but Discrete).
        squash: Box only: the Gaussian is tanh-squashed into the bounds (SAC); panels draw it in action units.
        options: a :class:`TorchPolicyOptions` (``batch_size``, CleanRL agents' ``probe_obs``).
    """

    def __init__(
        self,
        module: torch.nn.Module | Callable,
        num_actions: int | None = None,
        kind: str = "auto",
        device: str | torch.device = "auto",
        obs_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        action_space=None,
        *,
        squash: bool = False,
        options: TorchPolicyOptions | None = None,
    ):
        options = options if options is not None else TorchPolicyOptions()
        if not isinstance(options, TorchPolicyOptions):
            raise UsageError(f"options={options!r}: expected a rlviz.agent.policy.TorchPolicyOptions (batch_size, "
                             "probe_obs) or None.")
        batch_size, probe_obs = options.batch_size, options.probe_obs
        if kind not in ("auto",) + KINDS:
            raise UsageError(f"kind={kind!r} is not known; use one of 'auto', {', '.join(map(repr, KINDS))}.")
        spec = action_spec(action_space) if action_space is not None else None
        if spec is not None and spec.kind == "discrete":
            num_actions = check_action_space(action_space, num_actions)
            spec = None
        elif spec is not None:
            if kind == "q" and spec.continuous:
                raise UsageError("kind='q' needs discrete actions; the action space is a Box.")
            num_actions = spec.size
        if squash and (spec is None or not spec.continuous):
            raise UsageError("squash=True is for Box action spaces (tanh Gaussian policies); pass action_space=<Box>.")
        self.action_spec, self.squash = spec, bool(squash)
        self.device = resolve_device(device)
        if isinstance(module, torch.nn.Module):
            module = module.to(self.device)
            module.eval()
        self.module = module
        self.obs_transform = obs_transform
        self._kind = kind
        self.kind = kind if kind != "auto" else "actor_critic"
        self.num_actions = int(num_actions) if num_actions is not None else -1
        self.batch_size = int(batch_size)
        self._cleanrl = is_cleanrl_agent(module) and kind in ("auto", "actor_critic")
        if self._cleanrl:  # the same adapter as the CLI's (rlviz.agent.cleanrl)
            self.kind = self._kind = "actor_critic"
            if self.num_actions < 0:
                self.num_actions = cleanrl_num_actions(module)  # type: ignore[arg-type]  # a CleanRL agent is a Module
            if probe_obs is not None:
                self._settle_cleanrl(self.to_tensor(probe_obs))

    def _settle_cleanrl(self, x: torch.Tensor) -> None:
        self.module = cleanrl_module(self.module, x, self.num_actions)
        self._cleanrl = False

    def _raw(self, obs: torch.Tensor):
        x = self.obs_transform(obs) if self.obs_transform is not None else obs
        if self._cleanrl:
            self._settle_cleanrl(x.detach())
        return self.module(x)

    def _settle_kind(self, out) -> None:
        if self._kind == "auto":
            has_value = (isinstance(out, (tuple, list)) and len(out) == 2) or (
                isinstance(out, dict) and out.get("value") is not None
            )
            self.kind = "actor_critic" if has_value else "logits"
            self._kind = self.kind

    def heads(self, obs: torch.Tensor) -> dict:
        out = self._raw(obs)
        self._settle_kind(out)
        spec = self.action_spec
        if spec is not None and spec.continuous:
            return split_box_output(out, spec.size, self.kind)
        logits, value = split_output(out, self.kind)
        if spec is not None and spec.kind == "multi_binary" and logits.shape[-1] == len(spec.nvec or ()):
            logits = torch.stack([torch.zeros_like(logits), logits], dim=-1).reshape(logits.shape[0], -1)
        if self.num_actions < 0:
            self.num_actions = int(logits.shape[-1])
        elif logits.shape[-1] != self.num_actions:
            raise UsageError(
                f"The policy returned {logits.shape[-1]} logits but the action space has {self.num_actions} actions."
            )
        if isinstance(out, dict) and out.get("quantiles") is not None:  # a distributional Q-network's (QR-DQN)
            return {"logits": logits, "value": value, "quantiles": out["quantiles"]}
        return {"logits": logits, "value": value}

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits [B, A], value) for discrete actions; (mean [B, D], value) for Box actions."""
        h = self.heads(obs)
        return (h["mean"] if "mean" in h else h["logits"]), h.get("value")


def check_action_space(space, num_actions: int | None = None) -> int:
    """Return A for a Discrete space (agents that only take Discrete actions); a clear error otherwise."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise UsageError(f"Discrete action space with start={space.start}: rlviz expects actions 0..n-1.")
        n = int(space.n)
        if num_actions is not None and int(num_actions) != n:
            raise UsageError(f"num_actions={num_actions} but the env's action space is Discrete({n}).")
        return n
    raise UsageError(
        f"This agent takes Discrete actions only (logits over n actions); the env's action space is {space}. "
        "Use an agent made for this action space: rlviz reads Box, MultiDiscrete and MultiBinary policies from "
        "SB3 (PPO, A2C, SAC, TD3, DDPG, TQC), CleanRL, or a --model module returning them (see TorchPolicy)."
    )


__all__ += ["check_action_space", "action_names_for", "MINATAR_ACTIONS", "sample_actions", "split_box_output", "ActionSpec"]
