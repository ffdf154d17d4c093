"""CleanRL's standard scripts' saved agents, recognised from their state_dicts: no ``--model`` needed.

CleanRL's single-file scripts save ``torch.save(agent.state_dict(), "<run>.cleanrl_model")``. The parameter names
and shapes tell which script wrote one, and the networks below rebuild the published layer shapes (written here,
not imported from CleanRL):

=====================  ====================================================================  ==============
script                 parameters                                                            rebuilt as
=====================  ====================================================================  ==============
``ppo.py``             ``actor.{0,2,4}``, ``critic.{0,2,4}``: Linear 64-64, Tanh              actor-critic
``ppo_atari.py``       ``network.{0,2,4}`` Nature CNN, ``network.7`` Linear 3136->512,         actor-critic
                       ``actor`` [A, 512], ``critic`` [1, 512]; input ``x / 255``
``dqn.py``             ``network.{0,2,4}``: Linear 120-84, ReLU, out [A]                      Q-values
``dqn_atari.py``       ``network.{0,2,4}`` Nature CNN, ``network.{7,9}`` 512, out [A]; ``/255``  Q-values
=====================  ====================================================================  ==============

``ppo_continuous_action.py`` and ``sac_continuous_action.py`` (Box actions): :mod:`rlviz.sources.cleanrl_continuous`.

Env: the Atari scripts train on ``NoopReset(30) -> MaxAndSkip(4) -> FireReset -> Resize 84x84 -> Grayscale ->
FrameStack(4)`` (gymnasium's resize and grey wrappers; life loss and reward clipping are training-only):
:func:`cleanrl_atari_recipe` builds that chain for the env id given with ``--env``. The vector scripts default
to CartPole-v1; an env is inferred only where the observation size and action count name exactly one of
gymnasium's classic-control envs with that kind of actions (Pendulum-v1 and MountainCarContinuous-v0 for Box
actions), else ``--env`` is required.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..agent.actions import action_spec
from ..agent.policy import TorchPolicy
from ..envs.recipe import EnvRecipe, WrapperSpec
from ..errors import EnvError, UsageError
from .cleanrl_continuous import CLASSIC_BOX, build_continuous, recognise_continuous

__all__ = ["CleanRLLayout", "recognise_cleanrl", "cleanrl_atari_recipe", "CleanRLPPO", "CleanRLQNetwork"]

#: (observation size, actions) -> the only classic-control env with discrete actions of that size.
_CLASSIC = {(4, 2): "CartPole-v1", (6, 3): "Acrobot-v1", (2, 3): "MountainCar-v0"}


def _mlp(sizes: list[int], act) -> nn.Sequential:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def _nature_torso(in_channels: int) -> list[nn.Module]:
    return [nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU()]


class CleanRLPPO(nn.Module):
    """ppo.py (``atari=False``: obs [B, D], Tanh MLPs) or ppo_atari.py (obs [B, 4, 84, 84] in 0..255):
    obs -> (logits [B, A], value [B])."""

    def __init__(self, obs_dim: int, num_actions: int, atari: bool = False, in_channels: int = 4):
        super().__init__()
        self.atari = atari
        self.actor: nn.Module
        self.critic: nn.Module
        if atari:
            self.network = nn.Sequential(*_nature_torso(in_channels))
            self.actor, self.critic = nn.Linear(512, num_actions), nn.Linear(512, 1)
        else:
            self.actor = _mlp([obs_dim, 64, 64, num_actions], nn.Tanh)
            self.critic = _mlp([obs_dim, 64, 64, 1], nn.Tanh)

    def forward(self, obs: torch.Tensor):
        h = self.network(obs / 255.0) if self.atari else obs
        return self.actor(h), self.critic(h).squeeze(-1)


class CleanRLQNetwork(nn.Module):
    """dqn.py (obs [B, D], ReLU 120-84) or dqn_atari.py (obs [B, 4, 84, 84] in 0..255): obs -> Q [B, A]."""

    def __init__(self, obs_dim: int, num_actions: int, atari: bool = False, in_channels: int = 4):
        super().__init__()
        self.atari = atari
        if atari:
            self.network = nn.Sequential(*_nature_torso(in_channels), nn.Linear(512, num_actions))
        else:
            self.network = _mlp([obs_dim, 120, 84, num_actions], nn.ReLU)

    def forward(self, obs: torch.Tensor):
        return self.network(obs / 255.0 if self.atari else obs)


@dataclass(frozen=True)
class CleanRLLayout:
    """A recognised CleanRL script: its name, the network to rebuild, kind, observation size / channels, actions
    (Box actions: their dimensions, ``box``; ``squash``: a tanh-Gaussian; ``hidden``: the SAC actor's width)."""

    script: str
    kind: str
    atari: bool
    obs_dim: int
    num_actions: int
    box: bool = False
    squash: bool = False
    hidden: int | None = None

    def build(self) -> nn.Module:
        if self.box:
            return build_continuous(self.script, self.obs_dim, self.num_actions, self.hidden)
        cls = CleanRLPPO if self.kind == "actor_critic" else CleanRLQNetwork
        return cls(self.obs_dim, self.num_actions, atari=self.atari, in_channels=self.obs_dim)

    def policy(self, module: nn.Module, action_space, device="auto", source: str = "") -> TorchPolicy:
        """The policy for ``module`` (built by :meth:`build`, weights loaded) acting in ``action_space``."""
        spec = action_spec(action_space)
        if self.box and (spec.kind != "box" or spec.size != self.num_actions):
            raise EnvError(f"{source} is CleanRL {self.script}'s agent for {self.num_actions}-dimensional Box "
                           f"actions; the env's actions are {action_space}. Pass the env it was trained on (--env).")
        if self.squash:
            self._check_bounds(module, spec, source)
        if self.script == "ppo_continuous_action.py":
            warnings.warn(
                f"{source}: CleanRL's ppo_continuous_action.py trains behind gymnasium's NormalizeObservation, whose "
                "running mean and variance the .cleanrl_model does not hold; rlviz feeds the agent raw observations, "
                "so it may act unlike it did in training.", UserWarning, stacklevel=4)
        return TorchPolicy(module, kind=self.kind, device=device, action_space=action_space, squash=self.squash)

    def _check_bounds(self, module: nn.Module, spec, source: str) -> None:
        scale, bias = (getattr(module, n).detach().cpu().numpy() for n in ("action_scale", "action_bias"))
        low, high = bias - scale, bias + scale
        if not (np.allclose(low, spec.low, atol=1e-5) and np.allclose(high, spec.high, atol=1e-5)):
            raise EnvError(f"{source}: the SAC actor's action_scale and action_bias say actions in [{low}, {high}], "
                           f"but the env's bounds are [{spec.low}, {spec.high}]; pass the env it was trained on.")

    def recipe(self, env, source: str) -> EnvRecipe:
        """The env: ``env`` (an id or recipe) when given, for Atari with CleanRL's chain; else inferred."""
        if isinstance(env, EnvRecipe):
            return env
        if env:
            return cleanrl_atari_recipe(env, self.obs_dim) if self.atari else EnvRecipe.for_env_id(env)
        known = CLASSIC_BOX if self.box else _CLASSIC
        inferred = None if self.atari else known.get((self.obs_dim, self.num_actions))
        if inferred is None:
            raise UsageError(
                f"{source} is CleanRL {self.script}'s agent ({self.obs_dim} {'frames' if self.atari else 'inputs'}, "
                f"{self.num_actions} {'action dimensions' if self.box else 'actions'}); which env it played cannot "
                "be told from the weights: pass --env "
                f"{'BreakoutNoFrameskip-v4' if self.atari else '<env id>'} (env=...).")
        return EnvRecipe(inferred)


def _shape(state: dict, key: str) -> tuple | None:
    t = state.get(key)
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def _mlp_dims(state: dict, prefix: str, hidden: tuple[int, int]) -> tuple[int, int] | None:
    """(input size, output size) when ``prefix.{0,2,4}`` is Linear in -> hidden[0] -> hidden[1] -> out."""
    names = {f"{prefix}.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")}
    if not names <= set(state):
        return None
    w0, w2, w4 = (_shape(state, f"{prefix}.{i}.weight") or () for i in (0, 2, 4))
    if len(w0) != 2 or w0[0] != hidden[0] or w2 != (hidden[1], hidden[0]) or len(w4) != 2 or w4[1] != hidden[1]:
        return None
    return w0[1], w4[0]


def _cnn_channels(state: dict) -> int | None:
    w = _shape(state, "network.0.weight")
    ok = (w is not None and len(w) == 4 and w[0] == 32 and w[2:] == (8, 8)
          and _shape(state, "network.2.weight") == (64, 32, 4, 4) and _shape(state, "network.4.weight") == (64, 64, 3, 3)
          and _shape(state, "network.7.weight") == (512, 3136))
    return w[1] if ok and w is not None else None


def recognise_cleanrl(state) -> CleanRLLayout | None:
    """The CleanRL script whose agent ``state`` (a state_dict) is, or None when it is none of them exactly."""
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        return None
    keys = set(state)
    box = recognise_continuous(state)
    if box is not None:
        script, obs_dim, dim, hidden = box
        sac = script.startswith("sac")
        return CleanRLLayout(script, "logits" if sac else "actor_critic", False, obs_dim, dim, True, sac, hidden)
    if keys == {"actor.0.weight", "actor.0.bias", "actor.2.weight", "actor.2.bias", "actor.4.weight", "actor.4.bias",
                "critic.0.weight", "critic.0.bias", "critic.2.weight", "critic.2.bias", "critic.4.weight",
                "critic.4.bias"}:
        actor, critic = _mlp_dims(state, "actor", (64, 64)), _mlp_dims(state, "critic", (64, 64))
        if actor and critic and critic == (actor[0], 1):
            return CleanRLLayout("ppo.py", "actor_critic", False, actor[0], actor[1])
    if keys == {"network.0.weight", "network.0.bias", "network.2.weight", "network.2.bias", "network.4.weight",
                "network.4.bias"}:
        dims = _mlp_dims(state, "network", (120, 84))
        if dims:
            return CleanRLLayout("dqn.py", "q", False, dims[0], dims[1])
    channels = _cnn_channels(state)
    if channels is None:
        return None
    torso = {f"network.{i}.{p}" for i in (0, 2, 4, 7) for p in ("weight", "bias")}
    actor = _shape(state, "actor.weight")
    if keys == torso | {"actor.weight", "actor.bias", "critic.weight", "critic.bias"} and actor and actor[1] == 512 \
            and _shape(state, "critic.weight") == (1, 512):
        return CleanRLLayout("ppo_atari.py", "actor_critic", True, channels, actor[0])
    head = _shape(state, "network.9.weight")
    if keys == torso | {"network.9.weight", "network.9.bias"} and head and head[1] == 512:
        return CleanRLLayout("dqn_atari.py", "q", True, channels, head[0])
    return None


def cleanrl_atari_recipe(env_id: str, stack: int = 4) -> EnvRecipe:
    """CleanRL's Atari chain at evaluation: no-op reset, max-pooled skip 4, fire reset (SB3's wrappers, which
    CleanRL imports), gymnasium's 84x84 resize then grey, frame stack (padding with the first frame)."""
    kwargs = {"frameskip": 1} if env_id.startswith("ALE/") else {}
    wrappers = (WrapperSpec("sb3_atari", {"warp": False}), WrapperSpec("resize", {"shape": (84, 84)}),
                WrapperSpec("grayscale", {}), WrapperSpec("frame_stack", {"stack_size": int(stack)}))
    return EnvRecipe(env_id, kwargs, wrappers, saliency_mode="linear")
