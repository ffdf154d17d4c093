"""Env families: one module per family, each holding one :class:`~.family.Family` record (``FAMILY``), and the
registry that reads them: every question rlviz asks of an env id's family (does it register on import? its default
recipe, its heatmap objects, does it need headless OpenGL?) is a lookup here (:func:`family_of`), never a prefix
test elsewhere (held by ``tests/test_families.py``).

The registry is the modules of this package (every module but :mod:`.family` and private ones), read once, on the
first lookup, sorted by name; adding a family is adding its module (docs/development.md, "Adding an env family").

``MiniGrid-Empty-5x5-v0`` exists only after ``import minigrid``, ``dm_control/cheetah-run-v0`` after ``import
shimmy``: users write the bare id. :func:`register_family` imports the one package the family's record names for an
unregistered id of it, when that package is installed, and says which it imported (the package's own import-time
prints and warnings are dropped: :func:`~rlviz.envs.quiet.quiet_import`). The record chooses the module,
so an id read from a file may trigger it as ALE's and MinAtar's registrations do (:mod:`rlviz.envs.trust`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import sys
import warnings
from typing import Any

import gymnasium as gym

from ..quiet import quiet_import
from .family import Family

__all__ = ["Family", "FAMILIES", "families", "family_of", "family_named", "register_family", "family_hint",
           "known_wrappers", "reload"]

_IMPORTED: set = set()


@functools.cache
def families() -> tuple[Family, ...]:
    """Every family's record: the ``FAMILY`` of each module of this package, sorted by name."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "family" or info.name.startswith("_"):
            continue
        family = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    return tuple(sorted(found, key=lambda f: f.name))


def reload() -> tuple[Family, ...]:
    """The registry read again (after a family's module was added to this package's path)."""
    families.cache_clear()
    _match.cache_clear()
    return families()


@functools.lru_cache(maxsize=1024)
def _match(env_id: str) -> tuple[Family, str] | None:
    for family in families():
        prefix = family.prefix_of(env_id)
        if prefix is not None:
            return family, prefix
    for family in families():
        if family.matches is not None and family.matches(env_id):
            return family, ""
    return None


def family_of(env_id: Any) -> Family | None:
    """The family of ``env_id`` (by its prefix, else by a prefix-less family's test), or None."""
    if not isinstance(env_id, str):
        return None
    found = _match(env_id)
    return found[0] if found is not None else None


def family_named(name: str) -> Family:
    """The family called ``name`` (KeyError for none)."""
    for family in families():
        if family.name == name:
            return family
    raise KeyError(f"no env family {name!r}; known: {', '.join(f.name for f in families())}")


def known_wrappers() -> frozenset[str]:
    """The observation wrappers every family lets a recipe from a file name without trust."""
    return frozenset().union(*(f.wrappers for f in families()))


def register_family(env_id: str, say: bool = True) -> str | None:
    """Import the package that registers ``env_id`` (its family's ``package``) when the id is not registered and
    the package is installed; the package imported, or None. ``say``: one line on stderr naming it."""
    if env_id in gym.registry:
        return None
    family = family_of(env_id)
    module = family.package if family is not None else None
    if module is None or module in _IMPORTED:
        return None
    if module not in sys.modules and importlib.util.find_spec(module) is None:
        return None
    with quiet_import():
        importlib.import_module(module)
    _IMPORTED.add(module)
    if say and env_id in gym.registry:
        print(f"rlviz: {env_id} is registered by the {module} package: imported {module}", file=sys.stderr)
    return module


def family_hint(env_id: str) -> str:
    """" pip install X" for an id of a family whose package is not installed, else ""."""
    found = _match(env_id) if isinstance(env_id, str) else None
    if found is None:
        return ""
    family, prefix = found
    if family.package is not None and importlib.util.find_spec(family.package) is None:
        return f" {prefix}* envs are registered by the {family.package} package: pip install \"{family.pip}\"."
    return ""


#: names of 0.5's ``rlviz.envs.families`` module that live elsewhere now -> their module (kept until 0.7)
_MOVED = {"user_wrapper": "user_wrappers", "is_user_wrapper": "user_wrappers", "quiet_import": "quiet",
          "KNOWN_WRAPPER_CLASSES": "user_wrappers", "FRAME_WRAPPERS": "user_wrappers",
          "describe_space": "env_facts", "body_action_names": "env_facts", "env_mission": "env_facts"}


def __getattr__(name: str) -> Any:
    if name == "FAMILIES":
        return families()
    if name in _MOVED:
        new = f"rlviz.envs.{_MOVED[name]}"
        warnings.warn(f"rlviz.envs.families.{name} moved to {new} in rlviz 0.6; import it from there. The old path "
                      "goes away in rlviz 0.7.", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
