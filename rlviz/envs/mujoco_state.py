"""The MuJoCo model and data behind an env: gymnasium's MuJoCo envs (``env.unwrapped.model`` / ``.data``) and
dm_control's through Shimmy (``env.unwrapped._env.physics``, whose ``.model.ptr`` / ``.data.ptr`` are the same
``mujoco.MjModel`` / ``mujoco.MjData`` types). The cameras (:mod:`rlviz.envs.cameras`), the actuators' names
(:func:`rlviz.envs.env_facts.body_action_names`) and the body heatmap
(:class:`rlviz.evaluate.failures.body_objects.BodyExtractor`) read them here, for both families alike. Nothing here
imports mujoco (the env has loaded it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["dm_control_physics", "mujoco_model", "mujoco_data", "is_dm_control"]


def dm_control_physics(env: Any) -> Any:
    """dm_control's ``Physics`` behind a Shimmy env (``DmControlCompatibilityV0``), or None."""
    inner = getattr(getattr(env, "unwrapped", env), "__dict__", {}).get("_env")  # (Shimmy forwards unknown names)
    return getattr(inner, "physics", None) if inner is not None else None


def is_dm_control(env: Any) -> bool:
    """The env is dm_control's through Shimmy."""
    return dm_control_physics(env) is not None


def mujoco_model(env: Any) -> Any:
    """The env's ``mujoco.MjModel`` (gymnasium's MuJoCo envs, dm_control through Shimmy), or None."""
    return _part(env, "model")


def mujoco_data(env: Any) -> Any:
    """The env's ``mujoco.MjData`` (its current state), or None."""
    return _part(env, "data")


def _part(env: Any, name: str) -> Any:
    physics = dm_control_physics(env)
    if physics is not None:
        return getattr(physics, name).ptr
    part = getattr(getattr(env, "unwrapped", env), name, None)
    return part if callable(getattr(part, "body", None)) else None
