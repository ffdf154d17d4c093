"""MuJoCo envs without an id prefix (gymnasium's ``Hopper-v5``..., Gymnasium-Robotics, Meta-World): told by their
registered entry point's package, drawn through MuJoCo's renderer (the OpenGL backend chosen before the first one
is made). Their heatmap's default body (the walkers' torso) is known by name in
:mod:`rlviz.evaluate.failures.body_objects`."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("MuJoCo", needs_gl=True, pip="gymnasium[mujoco]",
                entry_points=("mujoco", "dm_control", "shimmy", "gymnasium_robotics", "metaworld"))
