"""JAX env ids (``gymnax:Breakout-MinAtar``, ``craftax:Craftax-Symbolic-v1``, ``brax:ant``, ``jumanji:Snake-v1``):
told apart from gymnasium ids by their family's prefix (the records of :mod:`rlviz.envs.families` whose engine is
"jax"), without importing jax or the family (``rlviz.jax.envs`` builds them). The prefix is the user's consent, as
a gymnasium id typed on the command line is."""

from __future__ import annotations

from .families import families, family_of

__all__ = ["JAX_FAMILIES", "is_jax_env_id", "jax_family"]


def jax_families() -> tuple[str, ...]:
    """The JAX env families rlviz rolls out with its JAX engine, by name (= their id prefix before ``:``)."""
    return tuple(f.name for f in families() if f.engine == "jax")


#: the JAX env families rlviz rolls out with its JAX engine, by name (= their id prefix before ``:``)
JAX_FAMILIES: tuple[str, ...] = jax_families()
__all__ += ["jax_families"]


def jax_family(env_id: object) -> str | None:
    """The family of a JAX env id (``"gymnax"`` for ``"gymnax:CartPole-v1"``), None for any other id."""
    if not isinstance(env_id, str) or ":" not in env_id:
        return None
    family = family_of(env_id)
    if family is None or family.engine != "jax" or not env_id.partition(":")[2]:
        return None
    return family.name


def is_jax_env_id(env_id: object) -> bool:
    """True for ``<family>:<name>`` with a JAX family of :mod:`rlviz.envs.families`."""
    return jax_family(env_id) is not None
