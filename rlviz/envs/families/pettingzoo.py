"""PettingZoo's multi-agent envs: ``name_vN`` ids (``pistonball_v6``, or ``pettingzoo.butterfly.pistonball_v6``),
no prefix: told by their form, which no gymnasium id has (:func:`rlviz.envs.pettingzoo_envs.is_agents_env_id`).
Made by the family's own module, never registered with gymnasium; SuperSuit's wrappers by name."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]


def _matches(env_id: str) -> bool:
    from ..pettingzoo_envs import is_agents_env_id

    return is_agents_env_id(env_id)


FAMILY = Family("PettingZoo", matches=_matches, pip='"rlviz[pettingzoo]"', engine="pettingzoo")
