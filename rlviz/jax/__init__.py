"""rlviz's JAX engine: flax agents on gymnax, Craftax, Brax and Jumanji envs, rolled out in one jit-compiled,
vmapped ``lax.scan`` and met with the rest of rlviz at the run record (:class:`rlviz.evaluate.RolloutResult`).

Needs ``pip install "rlviz[jax]"``; ``import rlviz`` never imports jax (this package loads it on use).
"""

from __future__ import annotations

from .contract import JAX_KINDS, JaxEnv, JaxPolicy, PolicyOut

__all__ = ["JAX_KINDS", "JaxEnv", "JaxPolicy", "PolicyOut"]
