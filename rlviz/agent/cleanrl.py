"""CleanRL-style agents (``get_action_and_value(x, action)``, ``get_value(x)``, no ``forward``) as modules
returning ``(logits, value)``: the one adapter behind ``TorchPolicy(agent)``, :func:`rlviz.sources.cleanrl_policy`
and the CLI.

The fast path composes the agent's parts as CleanRL's scripts do: ``actor``/``critic`` on ``network(x)``
(ppo_atari.py) or on ``x`` (ppo.py), with or without ``x / 255``. Which one is *checked*, not guessed: it must
reproduce the agent's own log-probabilities of every action and its value on probe observations. If none
does, the agent's methods are called for every action instead (exact, A times the work). Logits are
log-probabilities up to a per-row constant.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import UsageError

__all__ = ["is_cleanrl_agent", "cleanrl_num_actions", "cleanrl_module", "CleanRLComposed", "CleanRLMethods"]


def is_cleanrl_agent(obj) -> bool:
    """An ``nn.Module`` with CleanRL's ``get_action_and_value`` (its own ``forward`` or not)."""
    return isinstance(obj, nn.Module) and callable(getattr(obj, "get_action_and_value", None))


def cleanrl_num_actions(agent: nn.Module) -> int:
    """A, read from the out_features of the agent's actor's last ``nn.Linear``."""
    actor = getattr(agent, "actor", None)
    last = [m for m in actor.modules() if isinstance(m, nn.Linear)][-1:] if isinstance(actor, nn.Module) else []
    if not last:
        raise UsageError(f"Cannot tell how many actions {type(agent).__name__} has (its actor has no final "
                         "nn.Linear); pass num_actions= or action_space=.")
    return int(last[0].out_features)


class CleanRLComposed(nn.Module):
    """``actor(network(x / d)), critic(network(x / d))``, or without ``network``: CleanRL's layouts."""

    def __init__(self, agent: nn.Module, divisor: float, use_network: bool):
        super().__init__()
        self.agent: Any = agent  # CleanRL's Agent: network / actor / critic
        self.divisor = float(divisor)
        self.use_network = use_network

    def forward(self, x: torch.Tensor):
        if self.divisor != 1.0:
            x = x / self.divisor
        h = self.agent.network(x) if self.use_network else x
        return self.agent.actor(h), self.agent.critic(h).reshape(x.shape[0])


class CleanRLMethods(nn.Module):
    """Fallback through the agent's own methods: log pi(a|x) for every a via get_action_and_value(x, a)."""

    def __init__(self, agent: nn.Module, num_actions: int):
        super().__init__()
        self.agent: Any = agent
        self.num_actions = int(num_actions)

    def forward(self, x: torch.Tensor):
        b, a = x.shape[0], self.num_actions
        xs = x.repeat_interleave(a, dim=0)
        actions = torch.arange(a, device=x.device).repeat(b)
        _, logp, _, value = self.agent.get_action_and_value(xs, actions)
        return logp.reshape(b, a), value.reshape(b, a)[:, 0]


def _candidates(agent: nn.Module):
    if not (isinstance(getattr(agent, "actor", None), nn.Module) and isinstance(getattr(agent, "critic", None),
                                                                                 nn.Module)):
        return
    for use_network in ([True, False] if isinstance(getattr(agent, "network", None), nn.Module) else [False]):
        for divisor in (1.0, 255.0):
            yield CleanRLComposed(agent, divisor, use_network)


def cleanrl_module(agent: nn.Module, x: torch.Tensor, num_actions: int) -> nn.Module:
    """The module computing ``agent``'s (logits, value), checked on the observations ``x`` [B, *obs_shape]."""
    methods = CleanRLMethods(agent, num_actions)
    try:
        with torch.no_grad():
            ref_logp, ref_value = methods(x)
            if callable(getattr(agent, "get_value", None)):
                ref_value = agent.get_value(x).reshape(x.shape[0])  # type: ignore[operator]
    except Exception as exc:
        raise UsageError(
            f"{type(agent).__name__}.get_action_and_value(x, action) failed on observations of shape "
            f"{tuple(x.shape)} ({type(exc).__name__}: {exc}); rlviz expects CleanRL's signature returning "
            "(action, log_prob, entropy, value)."
        ) from exc
    for candidate in _candidates(agent):
        try:
            with torch.no_grad():
                logits, value = candidate(x)
        except Exception:
            continue
        if logits.shape == ref_logp.shape and torch.allclose(
            torch.log_softmax(logits, -1), ref_logp, atol=1e-5
        ) and torch.allclose(value, ref_value, atol=1e-5):
            return candidate
    return methods
