"""Stable-Baselines3's Atari preprocessing, rebuilt so an SB3 Atari agent sees in rlviz what it saw in training.

SB3 (and rl-zoo3) train Atari agents on ``AtariWrapper`` + ``VecFrameStack`` (+ ``VecTransposeImage`` for CNN
policies). Gymnasium's ``AtariPreprocessing`` is close but not equal (it takes ALE's own grey palette, SB3
converts max-pooled RGB frames with OpenCV's luma weights; its frame stack pads with copies of the first frame,
SB3's with zeros), so these wrappers follow SB3's documented behaviour step by step:

* :class:`SB3AtariPreprocessing`: on reset, 1..``noop_max`` no-op steps drawn from the env's own RNG (a new
  reset if the game ends meanwhile); each step repeats the action ``frame_skip`` times, sums the rewards and
  returns the pixel-wise max of the last two frames (stopping early at the end of an episode); when the game
  has a FIRE action, reset also presses FIRE then action 2 (resetting again should either end the game); frames
  become 84x84 grey (``cv2.COLOR_RGB2GRAY``, ``INTER_AREA``), shape ``[84, 84, 1]``. Life loss as terminal and
  reward clipping are training signals and are left out at evaluation (``terminal_on_life_loss`` and
  ``clip_reward`` are accepted and ignored). ``warp=False`` keeps the max-pooled RGB frames (CleanRL resizes
  and greys them with gymnasium's wrappers instead).
* :class:`SB3FrameStack`: the last ``n_stack`` observations concatenated on the last axis, newest last, zeros
  before the first; with ``channels_first`` the result is transposed to ``[C, H, W]`` as ``VecTransposeImage``
  does for CNN policies.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from ..errors import EnvError

__all__ = ["SB3AtariPreprocessing", "SB3FrameStack"]


class SB3AtariPreprocessing(gym.Wrapper):
    """SB3 ``AtariWrapper`` at evaluation: no-op reset, max-pooled frame skip, fire reset, 84x84 grey ``[H, W, 1]``."""

    def __init__(self, env: gym.Env, noop_max: int = 30, frame_skip: int = 4, screen_size: int = 84,
                 terminal_on_life_loss: bool = True, clip_reward: bool = True,
                 action_repeat_probability: float = 0.0, warp: bool = True):
        super().__init__(env)
        if action_repeat_probability:
            raise EnvError(f"SB3 AtariWrapper(action_repeat_probability={action_repeat_probability}) is not rebuilt "
                           "by rlviz; expected 0 (give sticky actions to the env: repeat_action_probability).")
        shape = env.observation_space.shape
        if shape is None or len(shape) != 3 or shape[-1] != 3:
            raise EnvError(f"SB3's AtariWrapper needs RGB frames [H, W, 3]; {env.spec.id if env.spec else env} "
                           f"gives observations of shape {shape}. Use obs_type='rgb'.")
        self.noop_max, self.frame_skip, self.size = int(noop_max), max(1, int(frame_skip)), int(screen_size)
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]  # an ALE env
        self.fire = "FIRE" in meanings and meanings[1] == "FIRE" and len(meanings) >= 3
        self._pool = np.zeros((2, *shape), dtype=np.uint8)
        self.warp = bool(warp)
        if self.warp:
            self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 1), dtype=np.uint8)

    def _warp(self, frame: np.ndarray) -> np.ndarray:
        if not self.warp:
            return frame
        import cv2

        grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        return cv2.resize(grey, (self.size, self.size), interpolation=cv2.INTER_AREA)[:, :, None]

    def _reset_base(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if self.noop_max > 0:
            for _ in range(int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1))):
                obs, _, terminated, truncated, info = self.env.step(0)
                if terminated or truncated:
                    obs, info = self.env.reset(**kwargs)
        return obs, info

    def _skip(self, action):
        total, terminated, truncated, info = 0.0, False, False, {}
        for i in range(self.frame_skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self.frame_skip - 2:
                self._pool[i - (self.frame_skip - 2)] = obs
            total += float(reward)
            if terminated or truncated:
                break
        frame = self._pool.max(axis=0) if self.frame_skip > 1 else obs
        return frame, total, terminated, truncated, info

    def reset(self, **kwargs):
        obs, info = self._reset_base(**kwargs)
        if self.fire:
            for action in (1, 2):
                obs, _, terminated, truncated, _ = self._skip(action)
                if terminated or truncated:
                    obs, _ = self._reset_base(**kwargs)
            info = {}
        return self._warp(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self._skip(action)
        return self._warp(obs), reward, terminated, truncated, info


class SB3FrameStack(gym.ObservationWrapper):
    """SB3 ``VecFrameStack`` (last axis, newest last, zero padding), then ``[C, H, W]`` when ``channels_first``."""

    def __init__(self, env: gym.Env, n_stack: int = 4, channels_first: bool = True):
        super().__init__(env)
        space = env.observation_space
        if space.shape is None or len(space.shape) != 3:
            raise EnvError(f"SB3 frame stacking needs image observations [H, W, C]; got shape {space.shape}.")
        self.n, self.channels_first = int(n_stack), bool(channels_first)
        h, w, c = space.shape
        self._stack = np.zeros((h, w, c * self.n), dtype=space.dtype)
        shape = (c * self.n, h, w) if self.channels_first else (h, w, c * self.n)
        self.observation_space = gym.spaces.Box(0, 255, shape, dtype=space.dtype)  # type: ignore[arg-type,unused-ignore]

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._stack[...] = 0
        return self.observation(obs), info

    def observation(self, obs):
        c = obs.shape[-1]
        self._stack = np.roll(self._stack, -c, axis=-1)
        self._stack[..., -c:] = obs
        return np.transpose(self._stack, (2, 0, 1)).copy() if self.channels_first else self._stack.copy()
