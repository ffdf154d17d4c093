"""Facts read from a made env, for messages and panels: a space as an error names it, a MuJoCo env's action
dimensions by name, a MiniGrid env's text goal. Nothing is imported: the env is read."""

from __future__ import annotations

import gymnasium as gym

from .mujoco_state import mujoco_model

__all__ = ["describe_space", "body_action_names", "env_mission"]


def describe_space(space) -> str:
    """A space as an error message names it: a Box/Discrete by shape and dtype, a Dict key by key."""
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, gym.spaces.Tuple):
        return "Tuple(" + ", ".join(describe_space(v) for v in space.spaces) + ")"
    if isinstance(space, gym.spaces.Box):
        return f"{tuple(space.shape)} ({space.dtype})"
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return str(space)
    return type(space).__name__  # Text, MiniGrid's MissionSpace: no shape


def body_action_names(env, dims: int) -> tuple[str, ...] | None:
    """A MuJoCo env's action dimensions (gymnasium's, or dm_control's through Shimmy) named by its actuators, or the
    joints unnamed ones drive (Hopper: thigh_joint, leg_joint, foot_joint), when the model has exactly ``dims`` of them, all named; else None. Nothing is imported: the env's model is read."""
    model = mujoco_model(env)
    if model is None or getattr(model, "nu", None) != dims or not callable(getattr(model, "actuator", None)):
        return None
    try:  # an unnamed actuator (Hopper's) by the joint it drives (actuator_trnid[i, 0], for a joint transmission)
        names = tuple(str(model.actuator(i).name) or (str(model.joint(int(model.actuator_trnid[i, 0])).name)
                                                     if int(model.actuator_trntype[i]) == 0 else "") for i in range(dims))
    except Exception:  # not a MuJoCo model after all
        return None
    return names if all(names) and len(set(names)) == dims else None


def env_mission(env) -> str:
    """The episode's text goal of a MiniGrid / BabyAI env (``env.unwrapped.mission``, set by its reset: the
    observation wrappers an SB3 agent is trained with drop it from the observation), else ""."""
    mission = getattr(getattr(env, "unwrapped", env), "mission", None)
    return mission if isinstance(mission, str) else ""

