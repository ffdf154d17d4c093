"""Brax (JAX): ``brax:<env>`` ids, rolled out by rlviz's JAX engine (:mod:`rlviz.jax.envs.brax_env`) and drawn by
MuJoCo's renderer (the OpenGL backend is chosen before it is loaded)."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("brax", prefixes=("brax:",), pip='"rlviz[jax]"', needs_gl=True, engine="jax",
                jax_env="brax_env:BraxEnv")
