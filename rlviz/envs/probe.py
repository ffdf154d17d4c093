"""A look at an env before the long work (its spaces, one seeded reset observation), shared by the loading and the
checks of one job.

Loading an agent reads the env's spaces (twice: the reader's, then the observation check of ``load_agent``) and the
job's checks reset it once or twice (the default attention, the saliency check): each of these built and closed an
env of its own, and an Atari env loads its ROM at each build and each seeded reset (~0.3-0.5 s). Inside
:func:`shared_probes` the env of a recipe is built once (``render_mode=None``, as each look built it) and kept until
the scope closes, and each seed's first reset observation is kept, so the looks share them. Outside a scope each
look builds and closes its own env, as before. The looks only read: the rollout builds its own envs, so what a job
outputs does not change.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from .recipe import EnvRecipe, make_env

__all__ = ["shared_probes", "probe_env", "probe_reset"]


class _Scope:
    """The envs built in one :func:`shared_probes` scope (by recipe) and their first reset observations (by recipe
    and seed)."""

    def __init__(self) -> None:
        self.envs: dict[str, Any] = {}
        self.resets: dict[tuple[str, int | None], Any] = {}
        self.open = True

    def close(self) -> None:
        """Close the kept envs; later looks build their own."""
        self.open = False
        envs, self.envs = list(self.envs.values()), {}
        self.resets.clear()
        for env in envs:
            env.close()


_SCOPE: ContextVar[_Scope | None] = ContextVar("rlviz_probe_scope", default=None)


class _Borrowed:
    """An open outer scope as a nested :func:`shared_probes` gives it: its ``close()`` leaves the outer scope open
    (a job run inside a caller's scope does not end the caller's sharing)."""

    def __init__(self, scope: _Scope) -> None:
        self.scope = scope

    @property
    def open(self) -> bool:
        return self.scope.open

    def close(self) -> None:
        """Nothing: the scope is its opener's to close."""


@contextlib.contextmanager
def shared_probes() -> Iterator[_Scope | _Borrowed]:
    """Inside: one probe env per recipe, closed when the block ends (or at the yielded scope's ``close()``); nested
    in an open scope, the outer one is used (and the nested block's ``close()`` leaves it open)."""
    outer = _SCOPE.get()
    if outer is not None and outer.open:
        yield _Borrowed(outer)
        return
    scope = _Scope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        scope.close()


def _key(recipe: EnvRecipe | str) -> str:
    return recipe if isinstance(recipe, str) else json.dumps(recipe.to_dict(), sort_keys=True, default=repr)


@contextlib.contextmanager
def probe_env(recipe: EnvRecipe | str) -> Iterator[Any]:
    """An env of ``recipe`` (``render_mode=None``) to look at: the scope's, or one of its own closed after the
    block."""
    scope = _SCOPE.get()
    if scope is None or not scope.open:
        env = make_env(recipe, render_mode=None)
        try:
            yield env
        finally:
            env.close()
        return
    key = _key(recipe)
    if key not in scope.envs:
        scope.envs[key] = make_env(recipe, render_mode=None)
    yield scope.envs[key]


def probe_reset(recipe: EnvRecipe | str, seed: int | None) -> tuple[Any, Any, Any]:
    """(the first observation of ``env.reset(seed=seed)``, the observation space, the action space) of a probe env;
    in a scope, the observation of that seed is reset once (each caller gets its own copy)."""
    scope = _SCOPE.get()
    with probe_env(recipe) as env:
        if scope is None or not scope.open:
            return env.reset(seed=seed)[0], env.observation_space, env.action_space
        key = (_key(recipe), seed)
        if key not in scope.resets:
            scope.resets[key] = env.reset(seed=seed)[0]
        return copy.deepcopy(scope.resets[key]), env.observation_space, env.action_space
