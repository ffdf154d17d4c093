"""Env families that register their ids with gymnasium when their package is imported, and the training wrappers a
user names as ``module:Class``.

``MiniGrid-Empty-5x5-v0`` exists only after ``import minigrid``, ``dm_control/cheetah-run-v0`` after ``import
shimmy``: users write the bare id (gymnasium's ``minigrid:MiniGrid-...`` prefix form works too). :func:`register_family`
imports the one package rlviz's table (:data:`FAMILIES`, never a file) names for an unregistered id's prefix, when
that package is installed, and says which it imported (the package's own import-time prints and warnings, such as the
old gym's banner that Shimmy brings, are dropped: :func:`quiet_import`). The table chooses the module, so an id read from a file may
trigger it as ALE's and MinAtar's registrations do (:mod:`rlviz.envs.trust`).

A zip alone does not say which observation wrappers it was trained with (MiniGrid agents are trained on
``ImgObsWrapper``, ``FlatObsWrapper``...): ``--wrapper module:Class`` (repeatable, applied in order after the env's
own wrappers) names them; the command line is the user's consent to import ``module``. In a recipe read from a file
such a name passes :func:`rlviz.envs.trust.check_wrapper_name` only when trusted or listed in
:data:`KNOWN_WRAPPER_CLASSES`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import re
import sys
import warnings
from collections.abc import Iterator

import gymnasium as gym

from ..errors import EnvError, UsageError
from ..options import import_user_module
from .mujoco_state import mujoco_model

__all__ = ["FAMILIES", "register_family", "user_wrapper", "is_user_wrapper", "KNOWN_WRAPPER_CLASSES",
           "describe_space", "quiet_import"]

#: (id prefix, package that registers those ids on import, the pip name).
FAMILIES = (
    ("MiniGrid-", "minigrid", "minigrid"),
    ("BabyAI-", "minigrid", "minigrid"),
    ("dm_control/", "shimmy", "shimmy[dm-control]"),
    ("procgen-", "procgen", "procgen"),
    ("procgen/", "procgen_gym", "procgen-gym"),
)

#: Observation wrappers whose observations are the env's frames (pixels from a state env, e.g. dm_control's): the env
#: is made with ``render_mode="rgb_array"`` even where rlviz needs no frames of its own.
FRAME_WRAPPERS = frozenset({"gymnasium.wrappers:AddRenderObservation",
                            "gymnasium.wrappers.rendering:AddRenderObservation"})
__all__ += ["FRAME_WRAPPERS"]

#: Observation wrappers accepted by name from a file without trust (their modules are imported only to build them):
#: MiniGrid's and gymnasium's :data:`FRAME_WRAPPERS` (a run folder's recipe of a pixels agent replays without
#: ``--trust-checkpoint``).
KNOWN_WRAPPER_CLASSES = frozenset(f"minigrid.wrappers:{c}" for c in (
    "ImgObsWrapper", "FlatObsWrapper", "RGBImgObsWrapper", "RGBImgPartialObsWrapper", "FullyObsWrapper",
    "OneHotPartialObsWrapper", "DictObservationSpaceWrapper", "DirectionObsWrapper", "ReseedWrapper",
    "ActionBonus", "PositionBonus", "SymbolicObsWrapper", "ViewSizeWrapper")) | FRAME_WRAPPERS

_USER_WRAPPER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_IMPORTED: set = set()


@contextlib.contextmanager
def quiet_import() -> Iterator[None]:
    """A package rlviz imports on the user's behalf says nothing: Shimmy imports the old ``gym`` when it is
    installed, which prints its end-of-life banner (``gym_notices``) on stderr; GLFW warns of a missing display.
    What is printed or warned during the import is dropped (an error still raises)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def register_family(env_id: str, say: bool = True) -> str | None:
    """Import the package that registers ``env_id`` (by its prefix in :data:`FAMILIES`) when the id is not
    registered and the package is installed; the package imported, or None. ``say``: one line on stderr naming it."""
    if env_id in gym.registry:
        return None
    for prefix, module, _ in FAMILIES:
        if not env_id.startswith(prefix) or module in _IMPORTED:
            continue
        if module not in sys.modules and importlib.util.find_spec(module) is None:
            continue
        with quiet_import():
            importlib.import_module(module)
        _IMPORTED.add(module)
        if say and env_id in gym.registry:
            print(f"rlviz: {env_id} is registered by the {module} package: imported {module}", file=sys.stderr)
        return module
    return None


def family_hint(env_id: str) -> str:
    """" pip install X" for an id of a family whose package is not installed, else ""."""
    for prefix, module, pip in FAMILIES:
        if env_id.startswith(prefix) and importlib.util.find_spec(module) is None:
            return f" {prefix}* envs are registered by the {module} package: pip install \"{pip}\"."
    return ""


def is_user_wrapper(name: str) -> bool:
    """``name`` is a ``module:Class`` wrapper (not one of rlviz's own by name)."""
    return isinstance(name, str) and _USER_WRAPPER.fullmatch(name) is not None


def user_wrapper(name: str):
    """The wrapper class ``module:Class`` names (imported here: only for names the user gave or trusted)."""
    if not is_user_wrapper(name):
        raise UsageError(f"--wrapper {name!r}: expected 'module:Class', e.g. minigrid.wrappers:ImgObsWrapper.")
    module, _, cls = name.partition(":")
    try:
        found = getattr(import_user_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise EnvError(f"--wrapper {name!r}: cannot import {cls} from {module} ({exc}); check the name and that the "
                       "package is installed.") from None
    if isinstance(found, type) and issubclass(found, gym.Env):  # gymnasium.Wrapper and its kin
        return found
    if inspect.isfunction(found) and found.__module__.partition(".")[0] not in sys.stdlib_module_names:
        return found  # a factory of the user's: called with the env, its result checked (make_env)
    what = f"the class {cls}, not a gymnasium Env or Wrapper subclass" if isinstance(found, type) else \
        f"a {type(found).__name__} of {found.__module__ if inspect.isfunction(found) else module}"
    raise UsageError(f"--wrapper {name!r} is {what}; expected a gymnasium.Wrapper subclass (e.g. "
                     "minigrid.wrappers:ImgObsWrapper) or a Python function of yours that takes the env and returns "
                     "the wrapped env. Nothing was called.")


def describe_space(space) -> str:
    """A space as an error message names it: a Box/Discrete by shape and dtype, a Dict key by key."""
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, gym.spaces.Tuple):
        return "Tuple(" + ", ".join(describe_space(v) for v in space.spaces) + ")"
    if isinstance(space, gym.spaces.Box):
        return f"{tuple(space.shape)} ({space.dtype})"
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return str(space)
    return type(space).__name__  # Text, MiniGrid's MissionSpace: no shape


__all__ += ["family_hint"]


def body_action_names(env, dims: int) -> tuple[str, ...] | None:
    """A MuJoCo env's action dimensions (gymnasium's, or dm_control's through Shimmy) named by its actuators, or the
    joints unnamed ones drive (Hopper: thigh_joint, leg_joint, foot_joint), when the model has exactly ``dims`` of them, all named; else None. Nothing is imported: the env's model is read."""
    model = mujoco_model(env)
    if model is None or getattr(model, "nu", None) != dims or not callable(getattr(model, "actuator", None)):
        return None
    try:  # an unnamed actuator (Hopper's) by the joint it drives (actuator_trnid[i, 0], for a joint transmission)
        names = tuple(str(model.actuator(i).name) or (str(model.joint(int(model.actuator_trnid[i, 0])).name)
                                                     if int(model.actuator_trntype[i]) == 0 else "") for i in range(dims))
    except Exception:  # not a MuJoCo model after all
        return None
    return names if all(names) and len(set(names)) == dims else None


__all__ += ["body_action_names"]


def env_mission(env) -> str:
    """The episode's text goal of a MiniGrid / BabyAI env (``env.unwrapped.mission``, set by its reset: the
    observation wrappers an SB3 agent is trained with drop it from the observation), else ""."""
    mission = getattr(getattr(env, "unwrapped", env), "mission", None)
    return mission if isinstance(mission, str) else ""


__all__ += ["env_mission"]
