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
``ppo_atari_lstm.py``  ``network.*`` as ppo_atari.py (1 frame), ``lstm.*_l0`` LSTM 512->H,       recurrent
                       ``actor`` [A, H], ``critic`` [1, H]; input ``x / 255``                   actor-critic
=====================  ====================================================================  ==============

``ppo_atari_lstm.py``'s agent carries the LSTM's (h, c) from step to step, zeros at an episode start (its
``get_states(x, lstm_state, done)`` multiplies the state by ``1 - done``): :class:`CleanRLLSTM` follows the
recurrent protocol (:mod:`rlviz.agent.recurrent`), and the loops reset its state where an episode starts.

``ppo_continuous_action.py`` and ``sac_continuous_action.py`` (Box actions): :mod:`rlviz.sources.cleanrl.continuous`.

Env: ``--env``, else for the Atari scripts the run folder CleanRL saves into,
``runs/{env_id}__{exp_name}__{seed}__{time}/`` (:func:`run_folder_env`). The Atari scripts train on ``NoopReset(30) -> MaxAndSkip(4) -> FireReset -> Resize 84x84 -> Grayscale ->
FrameStack(4)`` (gymnasium's resize and grey wrappers; life loss and reward clipping are training-only):
:func:`cleanrl_atari_recipe` builds that chain for the env id given with ``--env``. The vector scripts default
to CartPole-v1; an env is inferred only where the observation size and action count name exactly one of
gymnasium's classic-control envs with that kind of actions (Pendulum-v1 and MountainCarContinuous-v0 for Box
actions), else ``--env`` is required.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ...agent.actions import action_spec
from ...agent.policy import Policy, TorchPolicy
from ...agent.recurrent import RecurrentTorchPolicy
from ...envs.families import family_named, family_of
from ...envs.recipe import EnvRecipe, WrapperSpec, register_envs
from ...envs.trust import check_env_id
from ...errors import EnvError, UsageError
from .continuous import CLASSIC_BOX, build_continuous, recognise_continuous

__all__ = ["CleanRLLayout", "recognise_cleanrl", "cleanrl_atari_recipe", "CleanRLPPO", "CleanRLQNetwork", "CleanRLLSTM",
           "run_folder_env"]

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


class CleanRLLSTM(nn.Module):
    """ppo_atari_lstm.py's agent (obs [B, C, 84, 84] in 0..255): Nature CNN -> one LSTM layer (512 -> H) -> actor and
    critic, as the recurrent protocol (:mod:`rlviz.agent.recurrent`): ``initial_state(B)`` = zeros (h, c)
    [1, B, H] each, ``step(obs, state) -> (logits [B, A], value [B], new state)``: one time step of the script's
    ``get_states`` on a state that is not reset (the loops give ``initial_state`` where an episode starts)."""

    memory_kind = "lstm"

    def __init__(self, in_channels: int, num_actions: int, hidden: int = 128):
        super().__init__()
        self.network = nn.Sequential(*_nature_torso(in_channels))
        self.lstm = nn.LSTM(512, hidden)
        self.actor, self.critic = nn.Linear(hidden, num_actions), nn.Linear(hidden, 1)

    def initial_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.actor.weight
        shape = (self.lstm.num_layers, int(batch), self.lstm.hidden_size)
        return torch.zeros(shape, dtype=w.dtype, device=w.device), torch.zeros(shape, dtype=w.dtype, device=w.device)

    def step(self, obs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        out, new = self.lstm(self.network(obs / 255.0).unsqueeze(0), state)
        h = out[0]
        return self.actor(h), self.critic(h).reshape(h.shape[0]), new


_RUN = re.compile(r"(?P<env>[\w.:/-]+-v\d+)__(?P<exp>[\w.-]+)__\d+__\d+")


def run_folder_env(source: str) -> str | None:
    """The env id in CleanRL's run folder name ``{env_id}__{exp_name}__{seed}__{time}`` holding ``source``."""
    folder = Path(source).parent
    m = _RUN.fullmatch(folder.name)
    if m is None:
        return None
    # an id with a namespace ("ALE/Breakout-v5": a family's prefix ending in "/") makes CleanRL's run_name a folder
    # inside runs/ALE/
    namespace = f"{folder.parent.name}/"
    family = family_of(namespace)
    return namespace + m.group("env") if family is not None and namespace in family.prefixes else m.group("env")


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
        if self.script == "ppo_atari_lstm.py":
            return CleanRLLSTM(self.obs_dim, self.num_actions, int(self.hidden or 128))
        cls = CleanRLPPO if self.kind == "actor_critic" else CleanRLQNetwork
        return cls(self.obs_dim, self.num_actions, atari=self.atari, in_channels=self.obs_dim)

    def policy(self, module: nn.Module, action_space, device="auto", source: str = "") -> Policy:
        """The policy for ``module`` (built by :meth:`build`, weights loaded) acting in ``action_space``."""
        if isinstance(module, CleanRLLSTM):
            return RecurrentTorchPolicy(module, device=device, action_space=action_space)
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
        named = run_folder_env(source) if self.atari else None
        if named:  # runs/{env_id}__{exp_name}__{seed}__{time}/: an id read from a path passes rlviz.envs.trust
            register_envs(named)
            check_env_id(named, source)
            return cleanrl_atari_recipe(named, self.obs_dim)
        known = CLASSIC_BOX if self.box else _CLASSIC
        inferred = None if self.atari else known.get((self.obs_dim, self.num_actions))
        if inferred is None:
            raise UsageError(
                f"{source} is CleanRL {self.script}'s agent ({self.obs_dim} {'frames' if self.atari else 'inputs'}, "
                f"{self.num_actions} {'action dimensions' if self.box else 'actions'}); which env it played cannot "
                "be told from the weights nor from CleanRL's run folder runs/{env_id}__{exp_name}__{seed}__{time}/: "
                "pass --env "
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


def _lstm_hidden(state: dict) -> int | None:
    """H when ``lstm.*_l0`` is one nn.LSTM layer 512 -> H (ppo_atari_lstm.py's), else None."""
    w = _shape(state, "lstm.weight_hh_l0")
    h = w[1] if w is not None and len(w) == 2 and w[0] == 4 * w[1] else None
    ok = h and (_shape(state, "lstm.weight_ih_l0"), _shape(state, "lstm.bias_ih_l0"), _shape(state, "lstm.bias_hh_l0")) \
        == ((4 * h, 512), (4 * h,), (4 * h,))
    return h if ok else None


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
    actor = actor if actor is not None and len(actor) == 2 else None  # [A, features]
    if keys == torso | {"actor.weight", "actor.bias", "critic.weight", "critic.bias"} and actor and actor[1] == 512 \
            and _shape(state, "critic.weight") == (1, 512):
        return CleanRLLayout("ppo_atari.py", "actor_critic", True, channels, actor[0])
    lstm = _lstm_hidden(state)
    lstm_keys = {f"lstm.{w}_{g}_l0" for w in ("weight", "bias") for g in ("ih", "hh")}
    if lstm and keys == torso | lstm_keys | {"actor.weight", "actor.bias", "critic.weight", "critic.bias"} and actor \
            and actor[1] == lstm and _shape(state, "critic.weight") == (1, lstm):
        return CleanRLLayout("ppo_atari_lstm.py", "actor_critic", True, channels, actor[0], hidden=lstm)
    head = _shape(state, "network.9.weight")
    if keys == torso | {"network.9.weight", "network.9.bias"} and head and head[1] == 512:
        return CleanRLLayout("dqn_atari.py", "q", True, channels, head[0])
    return None


def cleanrl_atari_recipe(env_id: str, stack: int = 4) -> EnvRecipe:
    """CleanRL's Atari chain at evaluation: no-op reset, max-pooled skip 4, fire reset (SB3's wrappers, which
    CleanRL imports), gymnasium's 84x84 resize then grey, frame stack (padding with the first frame)."""
    kwargs = {"frameskip": 1} if family_of(env_id) is family_named("ALE") else {}  # (v4 ids: their own skip)
    wrappers = (WrapperSpec("sb3_atari", {"warp": False}), WrapperSpec("resize", {"shape": (84, 84)}),
                WrapperSpec("grayscale", {}), WrapperSpec("frame_stack", {"stack_size": int(stack)}))
    return EnvRecipe(env_id, kwargs, wrappers, saliency_mode="linear")
