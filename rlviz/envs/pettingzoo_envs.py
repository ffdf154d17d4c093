"""PettingZoo env ids in recipes: ``pistonball_v6``, ``pettingzoo.butterfly.pistonball_v6``, ``simple_spread_v3`` (MPE
through ``mpe2``), ``connect_four_v3``, ``pong_v3``... and their SuperSuit preprocessing, so a multi-agent run folder
replays as an Atari one does.

An id is resolved against a fixed table of packages (:data:`PACKAGES`; never a name a file chose): a short id is
looked up in each family in turn, a dotted one must start with one of them. :func:`make_agents_env` builds the env
(``parallel_env()``, or ``env()`` (AEC) for turn-based games that have no parallel form, e.g. classic board games)
and applies the recipe's wrappers in order: SuperSuit's by name (``ss:color_reduction_v0``, ``ss:resize_v1``,
``ss:frame_stack_v1``... :data:`SUPERSUIT_WRAPPERS`, kwargs as JSON) and ``channels_first`` (SB3's
``VecTransposeImage``, which an SB3 zip trained on image observations records).

:func:`rlviz.envs.recipe.pettingzoo_recipe` writes such a recipe; PettingZoo's SB3 tutorial's pistonball preprocessing is::

    pettingzoo_recipe("pistonball_v6", {"n_pistons": 4}, [("color_reduction_v0", {"mode": "B"}),
                      ("resize_v1", {"x_size": 84, "y_size": 84}), ("frame_stack_v1", {"stack_size": 3})])

The rest of rlviz (loaders, saliency checks) sees one agent through :class:`AgentView`, a gymnasium env whose spaces
and reset observation are the first agent's (a shared-parameter policy takes every agent's); the episodes themselves
run through :mod:`rlviz.evaluate.rollouts.agents`. Needs ``pip install "rlviz[pettingzoo]"``.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import EnvError, UsageError, require

__all__ = ["PACKAGES", "SUPERSUIT_WRAPPERS", "is_agents_env_id", "agents_module",
           "make_agents_env", "AgentView", "split_observation", "policy_space", "is_parallel"]

#: The packages a PettingZoo id may name, in the order a short id is looked up.
PACKAGES = ("pettingzoo.butterfly", "pettingzoo.classic", "pettingzoo.sisl", "pettingzoo.atari", "mpe2")

#: SuperSuit wrappers a recipe may name (``ss:<name>``); training-only ones are marked so in the recipe.
SUPERSUIT_WRAPPERS = frozenset(f"ss:{n}" for n in (
    "color_reduction_v0", "resize_v1", "frame_stack_v1", "frame_stack_v2", "dtype_v0", "normalize_obs_v0",
    "flatten_v0", "reshape_v0", "max_observation_v0", "frame_skip_v0", "sticky_actions_v0", "clip_reward_v0",
    "black_death_v3", "pad_observations_v0", "pad_action_space_v0", "agent_indicator_v0", "clip_actions_v0",
    "delay_observations_v0", "scale_actions_v0"))

_ID = re.compile(r"(?:(pettingzoo\.\w+|mpe2)\.)?([a-z][a-z0-9_]*_v\d+)")


def _parse(env_id: Any) -> tuple[str | None, str] | None:
    m = _ID.fullmatch(env_id) if isinstance(env_id, str) else None
    if m is None or (m.group(1) is not None and m.group(1) not in PACKAGES):
        return None
    return m.group(1), m.group(2)


def is_agents_env_id(env_id: Any) -> bool:
    """``env_id`` is a PettingZoo id (``name_vN``, optionally ``package.name_vN`` of :data:`PACKAGES`): no
    gymnasium id has that form (theirs end ``-vN``)."""
    return _parse(env_id) is not None


def agents_module(env_id: str) -> Any:
    """The env module of a PettingZoo id (e.g. ``pettingzoo.butterfly.pistonball_v6``), imported; a one-line error
    when PettingZoo or the family's package is missing, or no family has the id."""
    parsed = _parse(env_id)
    if parsed is None:
        raise UsageError(f"{env_id!r} is not a PettingZoo env id; expected e.g. 'pistonball_v6' or "
                         "'pettingzoo.butterfly.pistonball_v6'.")
    package, name = parsed
    require("pettingzoo", "pettingzoo", f"the PettingZoo env {env_id}")
    for pkg in (package,) if package else PACKAGES:
        try:
            if importlib.util.find_spec(pkg) is None or importlib.util.find_spec(f"{pkg}.{name}") is None:
                continue
            return importlib.import_module(f"{pkg}.{name}")
        except ImportError as exc:  # the family's own dependencies (pymunk, multi_agent_ale_py, ...)
            raise EnvError(f"Cannot import the PettingZoo env {pkg}.{name}: {exc}. Install its family: pip install "
                           f"\"pettingzoo[{pkg.split('.')[-1]}]\" (MPE: pip install mpe2).") from None
        except Exception as exc:  # noqa: BLE001 - PettingZoo's deprecated ids raise on attribute access
            raise EnvError(f"Cannot use the PettingZoo env {pkg}.{name}: {str(exc).splitlines()[0][:200]}.") from None
    if name.startswith("simple") and package in (None, "mpe2") and importlib.util.find_spec("mpe2") is None:
        raise EnvError(f"The PettingZoo env {env_id!r} is an MPE env, and MPE envs live in the mpe2 package, which is "
                       "not installed here: pip install mpe2.")
    raise EnvError(f"Unknown PettingZoo env id {env_id!r}: none of {', '.join(PACKAGES)} has {name!r} (installed "
                   "here). Check the version suffix (e.g. knights_archers_zombies_v10 -> _v11).")


def is_parallel(env: Any) -> bool:
    """A parallel env (``step(dict)``), not an AEC one (``step(action)`` for ``agent_selection``)."""
    from pettingzoo.utils.env import AECEnv

    return not isinstance(env, AECEnv)


def make_agents_env(recipe: Any, render_mode: str | None = "rgb_array", training: bool = False) -> Any:
    """The PettingZoo env of ``recipe`` (parallel where the family has one, else AEC) with its wrappers."""
    module = agents_module(recipe.env_id)
    make = getattr(module, "parallel_env", None) or module.env
    try:
        env = make(render_mode=render_mode, **dict(recipe.env_kwargs))
    except (TypeError, ValueError, AssertionError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise EnvError(f"Cannot make the PettingZoo env {recipe.env_id!r} with kwargs {recipe.env_kwargs}: "
                       f"{first}.") from None
    except OSError as exc:  # Atari: multi_agent_ale_py without the game's ROM
        raise EnvError(f"Cannot make the PettingZoo env {recipe.env_id!r}: {exc}.") from None
    except Exception as exc:  # noqa: BLE001 - kwargs from a recipe file break the env's constructor anywhere
        raise EnvError(f"Cannot make the PettingZoo env {recipe.env_id!r} with kwargs {str(recipe.env_kwargs)[:80]}: "
                       f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:160]}.") from None
    for w in recipe.wrappers:
        if w.training_only and not training:
            continue
        env = _wrap(env, w)
    return env


def _wrap(env: Any, w: Any) -> Any:
    if w.name == "channels_first":
        ss = require("supersuit", "pettingzoo", "SuperSuit preprocessing")

        def space(s: Any) -> Any:
            return gym.spaces.Box(s.low.transpose(2, 0, 1), s.high.transpose(2, 0, 1), dtype=s.dtype)

        return ss.observation_lambda_v0(env, lambda o, s: np.ascontiguousarray(np.transpose(o, (2, 0, 1))),
                                        lambda s: space(s))
    if w.name not in SUPERSUIT_WRAPPERS:
        raise EnvError(f"Unknown wrapper {w.name!r} in a PettingZoo recipe; known: channels_first or "
                       f"{', '.join(sorted(SUPERSUIT_WRAPPERS))}.")
    ss = require("supersuit", "pettingzoo", "SuperSuit preprocessing")
    try:
        return getattr(ss, w.name[3:])(env, **w.kwargs)
    except Exception as exc:  # noqa: BLE001 - SuperSuit asserts, raises TypeError, KeyError... on odd kwargs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise EnvError(f"Cannot apply the SuperSuit wrapper {w.name[3:]} with kwargs {str(w.kwargs)[:80]}: "
                       f"{type(exc).__name__}: {first}.") from None


def split_observation(obs: Any) -> tuple[Any, Any]:
    """(what the policy sees, the action mask or None): classic games give ``{"observation", "action_mask"}``."""
    if isinstance(obs, dict) and "observation" in obs:
        return obs["observation"], obs.get("action_mask")
    return obs, None


class AgentView(gym.Env):
    """One agent's view of a PettingZoo env for what needs a gymnasium env's facts (spaces, one reset observation,
    a frame): the first agent's spaces, which every agent must share (one policy plays them all). ``agents_env``
    is the PettingZoo env; ``step`` is refused (episodes run in :mod:`rlviz.evaluate.rollouts.agents`)."""

    def __init__(self, agents_env: Any, env_id: str):
        self.agents_env = agents_env
        self.env_id = env_id
        self.render_mode = getattr(agents_env, "render_mode", None)
        self.metadata = dict(getattr(agents_env, "metadata", {}) or {})
        agents = list(agents_env.possible_agents)
        spaces = {a: policy_space(agents_env.observation_space(a)) for a in agents}
        actions = {a: agents_env.action_space(a) for a in agents}
        first = agents[0]
        odd = [a for a in agents if spaces[a] != spaces[first] or actions[a] != actions[first]]
        if odd:
            raise EnvError(f"{env_id}: agents {odd} have other observation or action spaces than {first}; one shared "
                           "policy plays every agent here. Pad them as the agent was trained: ss:pad_observations_v0, "
                           "ss:pad_action_space_v0 in the recipe.")
        self.observation_space = spaces[first]
        self.action_space = actions[first]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        try:
            return self._reset(seed, options)
        except Exception as exc:  # noqa: BLE001 - an env made from a recipe file's kwargs may fail on reset
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            raise EnvError(f"The PettingZoo env {self.env_id} fails on reset ({type(exc).__name__}: {first}); check "
                           "its kwargs in the recipe.") from None

    def _reset(self, seed: int | None, options: dict | None) -> Any:
        env = self.agents_env
        if is_parallel(env):
            obs, infos = env.reset(seed=seed, options=options)
            a = env.agents[0]
            return split_observation(obs[a])[0], infos.get(a, {})
        env.reset(seed=seed, options=options)
        a = env.agent_selection
        return split_observation(env.observe(a))[0], env.infos.get(a, {})

    def step(self, action: Any) -> Any:
        raise UsageError(f"{self.env_id} is a multi-agent env: its episodes run through rlviz.evaluate.rollouts.agents "
                         "(rlviz render does this), not one agent's step().")

    def render(self) -> Any:
        return self.agents_env.render()

    def close(self) -> None:
        self.agents_env.close()


def policy_space(space: Any) -> Any:
    """The space of what the policy sees (:func:`split_observation`): a classic game's ``observation`` part."""
    if isinstance(space, gym.spaces.Dict) and "observation" in space.spaces:
        return space.spaces["observation"]
    return space
