"""JAX env families behind :class:`~rlviz.jax.contract.JaxEnv`, one module each, built from a prefixed id by
:func:`make_jax_env` (``gymnax:``, ``craftax:``, ``brax:``, ``jumanji:``). The family's package is imported when
an env of it is made; a missing one is named in one line."""

from __future__ import annotations

import importlib
from typing import Any

from ...envs.families import families
from ...envs.jax_ids import JAX_FAMILIES, is_jax_env_id, jax_family
from ...errors import UsageError

__all__ = ["make_jax_env", "FAMILY_MODULES", "JAX_FAMILIES", "is_jax_env_id"]

#: family prefix -> (module of this package, class): each JAX family's record says (:attr:`Family.jax_env
#: <rlviz.envs.families.family.Family>`, rlviz.envs.families)
FAMILY_MODULES = {f.name: tuple(f.jax_env.split(":")) for f in families() if f.jax_env}

_CACHE: dict[tuple[str, str], Any] = {}


def make_jax_env(env_id: str, env_kwargs: dict | None = None) -> Any:
    """The :class:`~rlviz.jax.contract.JaxEnv` of ``env_id`` (``family:name``) with ``env_kwargs`` (params fields or
    constructor arguments); the same object for the same id and kwargs (so compiled functions are reused)."""
    family = jax_family(env_id)
    if family is None:
        raise UsageError(f"{env_id!r} is not a JAX env id; expected one of {', '.join(f + ':<id>' for f in JAX_FAMILIES)} "
                         "(e.g. gymnax:Breakout-MinAtar).")
    import json

    key = (env_id, json.dumps(env_kwargs or {}, sort_keys=True, default=str))
    if key not in _CACHE:
        module, cls = FAMILY_MODULES[family]
        env_cls = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
        env = env_cls(env_id.partition(":")[2], dict(env_kwargs or {}))
        env.env_kwargs = dict(env_kwargs or {})  # (recorded in the run's recipe)
        _CACHE[key] = env
    return _CACHE[key]
