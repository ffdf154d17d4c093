"""JAX env ids (``gymnax:Breakout-MinAtar``, ``craftax:Craftax-Symbolic-v1``, ``brax:ant``, ``jumanji:Snake-v1``):
told apart from gymnasium ids by their family prefix, without importing jax or the family (``rlviz.jax.envs`` builds
them). The prefix is the user's consent, as a gymnasium id typed on the command line is."""

from __future__ import annotations

__all__ = ["JAX_FAMILIES", "is_jax_env_id", "jax_family"]

#: the JAX env families rlviz rolls out with its JAX engine, by id prefix
JAX_FAMILIES = ("gymnax", "craftax", "brax", "jumanji")


def jax_family(env_id: object) -> str | None:
    """The family of a JAX env id (``"gymnax"`` for ``"gymnax:CartPole-v1"``), None for any other id."""
    if not isinstance(env_id, str) or ":" not in env_id:
        return None
    prefix, _, name = env_id.partition(":")
    return prefix if prefix in JAX_FAMILIES and name else None


def is_jax_env_id(env_id: object) -> bool:
    """True for ``<family>:<name>`` with a family of :data:`JAX_FAMILIES`."""
    return jax_family(env_id) is not None
