"""CleanRL's continuous-action scripts' agents (Box actions), recognised from their state_dicts; the layouts and
the dispatch are in :mod:`rlviz.sources.cleanrl.scripts`. The networks below rebuild CleanRL's published layer
shapes (written here, not imported from CleanRL):

=============================  ==========================================================  ==========================
script                         parameters                                                  rebuilt as
=============================  ==========================================================  ==========================
``ppo_continuous_action.py``   ``actor_mean.{0,2,4}`` Linear 64-64 Tanh, out [D];           Gaussian: mean, std =
                               ``actor_logstd`` [1, D]; ``critic.{0,2,4}`` 64-64, out [1]   exp(actor_logstd); value
``sac_continuous_action.py``   ``fc1``, ``fc2`` (ReLU), ``fc_mean`` [D], ``fc_logstd`` [D];  tanh-Gaussian into the
                               buffers ``action_scale``, ``action_bias`` [D] (the Actor)    bounds; no value
=============================  ==========================================================  ==========================

The SAC actor's log-std is ``tanh`` mapped onto [-5, 2], as the script does; its action is
``tanh(u) * action_scale + action_bias``, which is rlviz's squash into the env's bounds (the buffers are checked
against them). The PPO agent's actions are clipped to the bounds (the script trains behind ``ClipAction``).
That script also trains behind gymnasium's ``NormalizeObservation``, whose running statistics the state_dict
does not hold: rlviz feeds raw observations and warns that the agent may act unlike it did in training.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CleanRLPPOContinuous", "CleanRLSACActor", "recognise_continuous", "build_continuous", "CLASSIC_BOX",
           "LOG_STD_MIN", "LOG_STD_MAX"]

#: (observation size, action dimensions) -> the only classic-control env with Box actions of that size.
CLASSIC_BOX = {(3, 1): "Pendulum-v1", (2, 1): "MountainCarContinuous-v0"}
#: sac_continuous_action.py's log-std range.
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def _tanh_mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1])] + ([nn.Tanh()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


class CleanRLPPOContinuous(nn.Module):
    """ppo_continuous_action.py's Agent: obs [B, N] -> {"mean" [B, D], "log_std" [B, D], "value" [B]}."""

    def __init__(self, obs_dim: int, action_dim: int):
        super().__init__()
        self.critic = _tanh_mlp([obs_dim, 64, 64, 1])
        self.actor_mean = _tanh_mlp([obs_dim, 64, 64, action_dim])
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def forward(self, obs: torch.Tensor):
        mean = self.actor_mean(obs)
        return {"mean": mean, "log_std": self.actor_logstd.expand_as(mean), "value": self.critic(obs).squeeze(-1)}


class CleanRLSACActor(nn.Module):
    """sac_continuous_action.py's Actor: obs [B, N] -> {"mean" [B, D] (before tanh), "log_std" [B, D]}."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: int = 256):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(obs_dim, hidden), nn.Linear(hidden, hidden)
        self.fc_mean, self.fc_logstd = nn.Linear(hidden, action_dim), nn.Linear(hidden, action_dim)
        self.register_buffer("action_scale", torch.ones(action_dim))
        self.register_buffer("action_bias", torch.zeros(action_dim))

    def forward(self, obs: torch.Tensor):
        h = torch.relu(self.fc2(torch.relu(self.fc1(obs))))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(self.fc_logstd(h)) + 1.0)
        return {"mean": self.fc_mean(h), "log_std": log_std}


def _shape(state: dict, key: str) -> tuple | None:
    t = state.get(key)
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def _linear_chain(state: dict, prefix: str) -> list[tuple] | None:
    """Weight shapes of ``prefix.{0,2,4}`` when they chain in -> 64 -> 64 -> out."""
    shapes = [_shape(state, f"{prefix}.{i}.weight") or () for i in (0, 2, 4)]
    biases = [_shape(state, f"{prefix}.{i}.bias") for i in (0, 2, 4)]
    if any(s is None or len(s) != 2 for s in shapes) or biases != [(s[0],) for s in shapes]:
        return None
    if shapes[0][0] != 64 or shapes[1] != (64, 64) or shapes[2][1] != 64:
        return None
    return shapes


def _ppo(state: dict) -> tuple | None:
    keys = {f"{p}.{i}.{w}" for p in ("actor_mean", "critic") for i in (0, 2, 4) for w in ("weight", "bias")}
    if set(state) != keys | {"actor_logstd"}:
        return None
    actor, critic = _linear_chain(state, "actor_mean"), _linear_chain(state, "critic")
    if actor is None or critic is None or critic[0][1] != actor[0][1] or critic[2][0] != 1:
        return None
    dim = actor[2][0]
    return ("ppo_continuous_action.py", actor[0][1], dim) if _shape(state, "actor_logstd") == (1, dim) else None


def _sac(state: dict) -> tuple | None:
    names = {f"{p}.{w}" for p in ("fc1", "fc2", "fc_mean", "fc_logstd") for w in ("weight", "bias")}
    if set(state) != names | {"action_scale", "action_bias"}:
        return None
    fc1, fc2 = _shape(state, "fc1.weight") or (), _shape(state, "fc2.weight")
    mean, logstd = _shape(state, "fc_mean.weight") or (), _shape(state, "fc_logstd.weight")
    if len(fc1) != 2 or fc2 != (fc1[0], fc1[0]) or len(mean) != 2 or mean[1] != fc1[0] or logstd != mean:
        return None
    dim = mean[0]
    if _shape(state, "action_scale") != (dim,) or _shape(state, "action_bias") != (dim,):
        return None
    return "sac_continuous_action.py", fc1[1], dim, fc1[0]


def recognise_continuous(state: dict) -> tuple | None:
    """(script, observation size, action dimensions, hidden width or None) for a state_dict of one of the scripts
    above, else None."""
    found = _ppo(state) or _sac(state)
    if found is None:
        return None
    return found if len(found) == 4 else (*found, None)


def build_continuous(script: str, obs_dim: int, action_dim: int, hidden: int | None = None) -> nn.Module:
    """The network :func:`recognise_continuous` named, before its weights are loaded."""
    if script == "sac_continuous_action.py":
        return CleanRLSACActor(obs_dim, action_dim, hidden or 256)
    return CleanRLPPOContinuous(obs_dim, action_dim)
