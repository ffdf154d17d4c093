"""rlviz's JAX engine: flax agents on gymnax, Craftax, Brax and Jumanji envs, rolled out in one jit-compiled,
vmapped ``lax.scan`` and met with the rest of rlviz at the run record (:class:`rlviz.evaluate.RolloutResult`).

Needs ``pip install "rlviz[jax]"``; ``import rlviz`` never imports jax (this package loads it on use:
``FlaxPolicy`` and ``load_jax_agent`` are imported when first named).
"""

from __future__ import annotations

import importlib
from typing import Any

from .contract import JAX_KINDS, JaxEnv, JaxPolicy, PolicyOut

__all__ = ["JAX_KINDS", "JaxEnv", "JaxPolicy", "PolicyOut", "FlaxPolicy", "FlaxPolicyOptions", "load_jax_agent",
           "JaxAgentOptions", "every", "require_jax"]

_LAZY = {"FlaxPolicy": "policy", "FlaxPolicyOptions": "policy", "load_jax_agent": "load", "JaxAgentOptions": "load",
         "every": "callbacks"}


def require_jax(what: str = "flax agents") -> None:
    """Raise one :class:`~rlviz.errors.UsageError` line naming the extra when jax or flax is missing."""
    from ..errors import UsageError

    for name in ("jax", "flax"):
        try:
            importlib.import_module(name)
        except ImportError:
            raise UsageError(f'{what} need {name}, which is not installed; pip install "rlviz[jax]".') from None


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        require_jax()
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
