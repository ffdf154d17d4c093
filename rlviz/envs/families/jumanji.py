"""Jumanji (JAX): ``jumanji:<id>`` ids, rolled out by rlviz's JAX engine (:mod:`rlviz.jax.envs.jumanji_env`)."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("jumanji", prefixes=("jumanji:",), pip='"rlviz[jax]"', engine="jax", jax_env="jumanji_env:JumanjiEnv")
