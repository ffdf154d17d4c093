"""Turn the networks people already have into a :class:`~rlviz.agent.policy.Policy`.

Supported, checked in this order by :func:`to_policy`:

* an rlviz :class:`Policy` (returned as is);
* a Stable-Baselines3 / sb3-contrib algorithm or policy (PPO, A2C, DQN, SAC, TD3, DDPG, QR-DQN, TQC; see
  :mod:`rlviz.sources.stable_baselines3.zips`);
* a CleanRL-style agent: a module with ``get_action_and_value(x, action)`` (ppo.py, ppo_atari.py
  ...). See :func:`cleanrl_policy`;
* a Q-network (``kind="q"``, or ``kind="auto"`` and a class name containing "QNetwork", "QNet"
  or "DQN", as CleanRL's ``QNetwork``): forward gives Q-values [B, A];
* any ``nn.Module`` whose forward maps float32 obs [B, *obs_shape] to logits [B, A],
  ``(logits, value)`` or ``{"logits", "value"}``: :class:`TorchPolicy`.

:func:`build_model` builds the network a state_dict belongs to from ``"pkg.module:Class"``,
``"path/to/file.py:Class"`` and optional literal keyword arguments ``"...:Class(hidden=256)"``.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import numpy as np
from torch import nn

from ..agent.actions import action_spec
from ..agent.cleanrl import is_cleanrl_agent  # noqa: F401 (0.1 import path)
from ..agent.policy import Policy, TorchPolicy, TorchPolicyOptions
from ..agent.recurrent import RecurrentTorchPolicy, is_recurrent_module
from ..errors import UsageError
from ..options import import_user_attr
from .stable_baselines3.zips import sb3_policy

__all__ = ["to_policy", "cleanrl_policy", "build_model", "looks_like_q_network", "SpaceInfo"]

_Q_NAME = re.compile(r"q_?net|dqn", re.IGNORECASE)
_SB3 = ("stable_baselines3", "sb3_contrib")


def looks_like_q_network(module) -> bool:
    """True for modules named like a Q-network (CleanRL's ``QNetwork``, ``DQN``, ``QNet``...)."""
    return bool(_Q_NAME.search(type(module).__name__))


def to_policy(obj, *, observation_space=None, action_space=None, kind: str = "auto", device="auto",
              probe_obs: np.ndarray | None = None) -> Policy:
    """The :class:`Policy` for ``obj`` (see the module docstring for what is supported)."""
    if isinstance(obj, Policy):
        return obj
    if type(obj).__module__.startswith(_SB3) or type(getattr(obj, "policy", None)).__module__.startswith(_SB3):
        return sb3_policy(obj, device=device, observation_space=observation_space)
    if not isinstance(obj, nn.Module):
        raise UsageError(
            f"rlviz cannot use a {type(obj).__name__} as a policy; expected a torch.nn.Module (forward returning "
            "logits, (logits, value) or Q-values), a CleanRL agent, a Stable-Baselines3 model or an rlviz Policy."
        )
    if is_recurrent_module(obj):  # the recurrent protocol (rlviz.agent.recurrent): initial_state, step
        return RecurrentTorchPolicy(obj, device=device, action_space=action_space)
    if is_cleanrl_agent(obj) and kind in ("auto", "actor_critic"):
        return cleanrl_policy(obj, observation_space=observation_space, action_space=action_space, device=device,
                              probe_obs=probe_obs)
    if kind == "auto" and looks_like_q_network(obj):
        kind = "q"
    return TorchPolicy(obj, kind=kind, device=device, action_space=action_space)


# -- CleanRL --------------------------------------------------------------------------------------
def _probe(observation_space, probe_obs, n: int = 4) -> np.ndarray:
    if probe_obs is not None:
        return np.asarray(probe_obs)
    if observation_space is None:
        raise UsageError("A CleanRL agent needs observation_space= or probe_obs= to check how it reads observations.")
    import copy

    space = copy.deepcopy(observation_space)
    space.seed(0)
    return np.stack([np.asarray(space.sample()) for _ in range(n)])


def cleanrl_policy(agent: nn.Module, *, observation_space=None, action_space=None, device="auto",
                   probe_obs: np.ndarray | None = None) -> TorchPolicy:
    """Policy for a CleanRL-style agent (``get_action_and_value(x, action) -> (action, logprob, entropy,
    value)``, optionally ``get_value(x)``): ``TorchPolicy(agent)`` with the agent's parts composed as checked
    by :func:`rlviz.agent.cleanrl.cleanrl_module` on probe observations (sampled from ``observation_space``
    with seed 0, or ``probe_obs``) right away instead of on the first forward.
    """
    return TorchPolicy(agent, action_space=action_space, device=device,
                       options=TorchPolicyOptions(probe_obs=_probe(observation_space, probe_obs)))


# -- building a network for a state_dict ----------------------------------------------------------
class SpaceInfo:
    """Stands in for CleanRL's ``envs`` (``single_observation_space``) and a single env
    (``observation_space``) when a network's constructor only reads spaces."""

    num_envs = 1

    def __init__(self, observation_space, action_space):
        self.observation_space = self.single_observation_space = observation_space
        self.action_space = self.single_action_space = action_space


_SPEC = re.compile(r"\s*(?P<target>[^()]+?)\s*(?:\((?P<args>.*)\))?\s*", re.DOTALL)


def _parse_spec(spec: str) -> tuple[str, str, dict]:
    m = _SPEC.fullmatch(spec)
    if not m or ":" not in m.group("target"):
        raise UsageError(
            f"model={spec!r}: expected 'pkg.module:Class' or 'path/to/file.py:Class', optionally with keyword "
            "arguments: 'pkg.module:Class(hidden=256)'."
        )
    where, _, name = m.group("target").rpartition(":")
    kwargs = {}
    if m.group("args") and m.group("args").strip():
        try:
            call: Any = ast.parse(f"f({m.group('args')})", mode="eval").body
            if call.args:
                raise ValueError("positional arguments are not supported")
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        except (SyntaxError, ValueError) as exc:
            raise UsageError(f"model={spec!r}: arguments must be name=literal pairs ({exc}).") from None
    return where.strip(), name.strip(), kwargs


def _import_attr(where: str, name: str):
    return import_user_attr(where, name, "model=")


def _auto_kwargs(factory, given: dict, observation_space, action_space) -> dict:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return dict(given)
    n = action_spec(action_space).size if action_space is not None else None  # A, sum(nvec) or D
    shape = tuple(getattr(observation_space, "shape", ()) or ())
    fill = {
        **dict.fromkeys(("envs", "env"), SpaceInfo(observation_space, action_space)),
        **dict.fromkeys(("observation_space", "obs_space"), observation_space),
        "action_space": action_space,
        **dict.fromkeys(("num_actions", "n_actions", "action_dim", "action_size", "num_outputs"), n),
        **dict.fromkeys(("obs_shape", "input_shape", "observation_shape"), shape),
    }
    kwargs, missing = dict(given), []
    for pname, p in params.items():
        if pname in kwargs or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if pname in fill and fill[pname] is not None:
            kwargs[pname] = fill[pname]
        elif p.default is p.empty:
            missing.append(pname)
    if missing:
        raise UsageError(
            f"Cannot build {getattr(factory, '__qualname__', factory)}: no value for {missing}. rlviz fills "
            f"arguments named {sorted(fill)}; give the others in the spec, e.g. 'pkg.mod:Class({missing[0]}=...)'."
        )
    return kwargs


def build_model(model: Any, *, observation_space=None, action_space=None) -> nn.Module:
    """An ``nn.Module`` from an instance (returned as is), a class/factory or a spec string."""
    if isinstance(model, nn.Module):
        return model
    given: dict = {}
    if isinstance(model, str):
        where, name, given = _parse_spec(model)
        model = _import_attr(where, name)
    if not callable(model):
        raise UsageError(f"model={model!r} is neither an nn.Module, a class nor a 'pkg.module:Class' string.")
    try:
        module = model(**_auto_kwargs(model, given, observation_space, action_space))
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"Building {getattr(model, '__qualname__', model)} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(module, nn.Module):
        raise UsageError(f"model= built a {type(module).__name__}; expected a torch.nn.Module.")
    return module
