"""The training wrappers a user names as ``module:Class``.

A zip alone does not say which observation wrappers it was trained with (MiniGrid agents are trained on
``ImgObsWrapper``, ``FlatObsWrapper``...): ``--wrapper module:Class`` (repeatable, applied in order after the env's
own wrappers) names them; the command line is the user's consent to import ``module``. In a recipe read from a file
such a name passes :func:`rlviz.envs.trust.check_wrapper_name` only when trusted or listed in
:data:`KNOWN_WRAPPER_CLASSES`.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

import gymnasium as gym

from ..errors import EnvError, UsageError
from ..options import import_user_module
from .families import known_wrappers

__all__ = ["user_wrapper", "is_user_wrapper", "KNOWN_WRAPPER_CLASSES"]

#: Observation wrappers whose observations are the env's frames (pixels from a state env, e.g. dm_control's): the env
#: is made with ``render_mode="rgb_array"`` even where rlviz needs no frames of its own.
FRAME_WRAPPERS = frozenset({"gymnasium.wrappers:AddRenderObservation",
                            "gymnasium.wrappers.rendering:AddRenderObservation"})
__all__ += ["FRAME_WRAPPERS"]

#: Observation wrappers accepted by name from a file without trust (their modules are imported only to build them):
#: the families' own (:attr:`Family.wrappers <rlviz.envs.families.family.Family>`: MiniGrid's) and
#: gymnasium's :data:`FRAME_WRAPPERS` (a run folder's recipe of a pixels agent replays without
#: ``--trust-checkpoint``).
KNOWN_WRAPPER_CLASSES = known_wrappers() | FRAME_WRAPPERS

_USER_WRAPPER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def is_user_wrapper(name: str) -> bool:
    """``name`` is a ``module:Class`` wrapper (not one of rlviz's own by name)."""
    return isinstance(name, str) and _USER_WRAPPER.fullmatch(name) is not None


def user_wrapper(name: str):
    """The wrapper class ``module:Class`` names (imported here: only for names the user gave or trusted). A known
    class (:data:`KNOWN_WRAPPER_CLASSES`, accepted from a file untrusted) comes from its installed package only,
    never from the working folder (a run folder explored from inside must not stand in for MiniGrid)."""
    if not is_user_wrapper(name):
        raise UsageError(f"--wrapper {name!r}: expected 'module:Class', e.g. minigrid.wrappers:ImgObsWrapper.")
    module, _, cls = name.partition(":")
    importer = importlib.import_module if name in KNOWN_WRAPPER_CLASSES else import_user_module
    try:
        found = getattr(importer(module), cls)
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


