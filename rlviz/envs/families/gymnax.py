"""gymnax (JAX): ``gymnax:<id>`` ids (classic control, MinAtar, bsuite, misc), rolled out by rlviz's JAX engine
(:mod:`rlviz.jax.envs.gymnax_env` builds them); its MinAtar games (``gymnax:Breakout-MinAtar``) have one cell per
block of frame pixels, as MinAtar's own (nearest saliency, recorded in the run's recipe)."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]


def _recipe(env_id: str) -> dict:
    return {"env_id": env_id, "saliency_mode": "nearest" if env_id.endswith("-MinAtar") else None}


FAMILY = Family("gymnax", prefixes=("gymnax:",), pip='"rlviz[jax]"', recipe=_recipe, engine="jax",
                jax_env="gymnax_env:GymnaxEnv")
