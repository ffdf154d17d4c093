"""rlviz's preprocessing wrappers by name: the only wrapper names an env recipe can hold.

A recipe stores wrapper *names* (keys of :data:`WRAPPERS`), never import paths, so a recipe read from a file
can only build these wrappers, with plain keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from .cleanrl_atari import CleanRLLifeReset
from .compat import frame_stack, grayscale
from .sb3_atari import SB3AtariPreprocessing, SB3FrameStack

__all__ = ["WRAPPERS"]


def _envpool_atari(env: gym.Env, **kw) -> gym.Env:
    from .envpool_atari import EnvpoolAtari  # (cv2: loaded with the env that needs it, not by the recorders)

    return EnvpoolAtari(env, **kw)


class ChannelsFirst(gym.ObservationWrapper):
    """[H, W, C] image observations as [C, H, W]: what SB3's ``VecTransposeImage`` gives the agents it trains on
    image envs (MiniGrid's ``ImgObsWrapper`` too)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
            raise ValueError(f"channels_first takes [H, W, C] Box observations; the env gives {space}")
        self.observation_space = gym.spaces.Box(space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1),
                                                dtype=space.dtype)  # type: ignore[arg-type,unused-ignore]  # (a Box's own dtype)

    def observation(self, observation):
        return np.ascontiguousarray(np.transpose(observation, (2, 0, 1)))


def _clip_reward(env: gym.Env) -> gym.Env:
    return gym.wrappers.TransformReward(env, lambda r: float(np.sign(float(r))))


WRAPPERS: dict[str, Callable[..., gym.Env]] = {
    "atari": lambda env, **kw: gym.wrappers.AtariPreprocessing(env, **kw),
    "frame_stack": frame_stack,  # gymnasium 1.x's FrameStackObservation (rebuilt on 0.29: envs/compat.py)
    "clip_reward": lambda env, **kw: _clip_reward(env),
    "time_limit": lambda env, **kw: gym.wrappers.TimeLimit(env, **kw),
    # Stable-Baselines3 / rl-zoo3 Atari agents: AtariWrapper + VecFrameStack (+ VecTransposeImage), rebuilt exactly
    "sb3_atari": lambda env, **kw: SB3AtariPreprocessing(env, **kw),
    "sb3_frame_stack": lambda env, **kw: SB3FrameStack(env, **kw),
    # CleanRL's Atari scripts resize and grey with gymnasium's wrappers
    "resize": lambda env, shape: gym.wrappers.ResizeObservation(env, tuple(shape)),
    "grayscale": grayscale,  # gymnasium 1.x's GrayscaleObservation (rebuilt on 0.29)
    # agents trained on envpool's Atari (CleanRL's *_envpool* scripts): its observation pipeline on gymnasium's ALE
    "envpool_atari": lambda env, **kw: _envpool_atari(env, **kw),
    # CleanRL's gymnasium Atari scripts: NOOP, FIRE, 2 after a lost life (EpisodicLifeEnv + FireResetEnv)
    "cleanrl_life_reset": lambda env, **kw: CleanRLLifeReset(env),
    # SB3 agents of image envs (VecTransposeImage): MiniGrid's ImgObsWrapper, RGB renders
    "channels_first": lambda env, **kw: ChannelsFirst(env),
}
