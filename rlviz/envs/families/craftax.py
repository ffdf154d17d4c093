"""Craftax (JAX): ``craftax:<id>`` ids, rolled out by rlviz's JAX engine (:mod:`rlviz.jax.envs.craftax_env`)."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("craftax", prefixes=("craftax:",), pip='"rlviz[jax]"', engine="jax", jax_env="craftax_env:CraftaxEnv")
