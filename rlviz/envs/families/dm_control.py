"""dm_control's suite through Shimmy: ``dm_control/<domain>-<task>-v0`` ids, registered by ``import shimmy`` (which
imports mujoco: the OpenGL backend is chosen first). The heatmap's default object is the torso of the domains that
have one, in the floor's plane for the bodies that move on it, else in x-z."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY", "DM_TORSO_DOMAINS", "DM_FLOOR_DOMAINS"]

#: the suite's domains whose models have a body named "torso"
DM_TORSO_DOMAINS = ("cheetah", "walker", "hopper", "humanoid", "quadruped", "dog", "fish")
#: the suite's domains whose bodies move on the floor (the others are planar, in x-z)
DM_FLOOR_DOMAINS = ("humanoid", "humanoid_CMU", "quadruped", "dog", "fish", "swimmer")


def domain(env_id: str) -> str:
    """``dm_control/cheetah-run-v0`` -> ``cheetah``."""
    return env_id.split("/", 1)[1].split("-", 1)[0]


FAMILY = Family(
    "dm_control", prefixes=("dm_control/",), package="shimmy", pip="shimmy[dm-control]", needs_gl=True,
    objects=lambda env_id: "body:torso" if domain(env_id) in DM_TORSO_DOMAINS else None,
    body_plane=lambda env_id: "xy" if domain(env_id) in DM_FLOOR_DOMAINS else "xz")
