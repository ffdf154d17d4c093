"""gymnasium 0.29.1 (CleanRL's pin) and 1.x behind one set of names: rlviz runs in the training code's venv.

What 1.x has and 0.29 lacks, rebuilt here with 1.x's behaviour, so an env recipe gives the same observations,
bit for bit, under either version (tests/test_compat.py compares them with gymnasium 1.x's own wrappers):

* :class:`FrameStackObservation` (0.29: ``FrameStack``, returning ``LazyFrames``): the last ``stack_size``
  observations as one array ``[stack_size, *obs_shape]`` of the observation's dtype, oldest first; after a reset
  the older slots hold the reset observation (``padding_type="reset"``, 1.x's default) or zeros (``"zero"``);
* :class:`GrayscaleObservation` (0.29: ``GrayScaleObservation``, through OpenCV's rounding): 1.x's
  ``sum(rgb * [0.2125, 0.7154, 0.0721])`` truncated to uint8, ``[H, W]`` (``keep_dim``: ``[H, W, 1]``);
* :func:`same_step_vector_env`: a vector env that resets a finished sub-env inside the step that ended it
  (0.29's only behaviour; 1.1+: ``AutoresetMode.SAME_STEP``).

:data:`GYMNASIUM_1` tells which API is installed; :func:`frame_stack` and :func:`grayscale` give gymnasium's own
wrapper on 1.x and the one here on 0.29.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import EnvError, UsageError

__all__ = ["GYMNASIUM_1", "GYMNASIUM_VERSION", "FrameStackObservation", "GrayscaleObservation", "frame_stack",
           "grayscale", "same_step_vector_env"]


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


GYMNASIUM_VERSION = _version(gym.__version__)
#: gymnasium 1.x's API (``FrameStackObservation``, vector autoreset modes) is installed
GYMNASIUM_1 = GYMNASIUM_VERSION >= (1, 0)

_GREY_WEIGHTS = np.array([0.2125, 0.7154, 0.0721])


class FrameStackObservation(gym.Wrapper):
    """gymnasium 1.x's ``FrameStackObservation`` for Box observations, on either version (see the module docstring)."""

    def __init__(self, env: gym.Env, stack_size: int, *, padding_type: str = "reset"):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise UsageError(f"frame_stack needs a Box observation space; this env's is {space}.")
        if not isinstance(stack_size, (int, np.integer)) or int(stack_size) <= 0:
            raise UsageError(f"frame_stack stack_size={stack_size!r}; expected a positive integer.")
        if padding_type not in ("reset", "zero"):
            raise UsageError(f"frame_stack padding_type={padding_type!r}; expected 'reset' or 'zero'.")
        self.stack_size, self.padding_type = int(stack_size), padding_type
        self.observation_space = spaces.Box(np.stack([space.low] * self.stack_size),
                                            np.stack([space.high] * self.stack_size), dtype=space.dtype)  # type: ignore[arg-type,unused-ignore]  # (a Box's own dtype)
        self._zero = np.zeros(space.shape, dtype=space.dtype)
        self._queue: deque[Any] = deque([self._zero] * self.stack_size, maxlen=self.stack_size)

    def _stacked(self) -> np.ndarray:
        return np.stack(self._queue).astype(self.observation_space.dtype, copy=False)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        pad = obs if self.padding_type == "reset" else self._zero
        self._queue.extend([pad] * (self.stack_size - 1) + [obs])
        return self._stacked(), info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._queue.append(obs)
        return self._stacked(), reward, terminated, truncated, info


class GrayscaleObservation(gym.ObservationWrapper):
    """gymnasium 1.x's ``GrayscaleObservation`` on either version (see the module docstring)."""

    def __init__(self, env: gym.Env, keep_dim: bool = False):
        super().__init__(env)
        space = env.observation_space
        if not (isinstance(space, spaces.Box) and len(space.shape) == 3 and space.shape[-1] == 3
                and space.dtype == np.uint8):
            raise UsageError(f"grayscale needs RGB uint8 observations [H, W, 3]; this env's are {space}.")
        self.keep_dim = bool(keep_dim)
        shape = tuple(space.shape[:2]) + ((1,) if self.keep_dim else ())
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        grey = np.sum(np.multiply(observation, _GREY_WEIGHTS), axis=-1).astype(np.uint8)
        return grey[..., None] if self.keep_dim else grey


def frame_stack(env: gym.Env, **kw: Any) -> gym.Env:
    """gymnasium's ``FrameStackObservation`` on 1.x, :class:`FrameStackObservation` on 0.29."""
    if GYMNASIUM_1:
        return gym.wrappers.FrameStackObservation(env, **kw)
    return FrameStackObservation(env, **kw)


def grayscale(env: gym.Env, **kw: Any) -> gym.Env:
    """gymnasium's ``GrayscaleObservation`` on 1.x, :class:`GrayscaleObservation` on 0.29."""
    if GYMNASIUM_1:
        return gym.wrappers.GrayscaleObservation(env, **kw)
    return GrayscaleObservation(env, **kw)


def same_step_vector_env(fns: Sequence[Callable[[], gym.Env]], asynchronous: bool = False) -> gym.vector.VectorEnv:
    """A Sync (or Async) vector env of ``fns`` that resets a finished sub-env in the step that ended it."""
    cls = gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv
    if not GYMNASIUM_1:
        return cls(list(fns))  # 0.29: same-step autoreset is the only mode
    mode = getattr(gym.vector, "AutoresetMode", None)
    if mode is None:
        raise EnvError(f"gymnasium {gym.__version__} has no same-step autoreset (AutoresetMode came in 1.1); "
                       "pip install 'gymnasium>=1.1' (or gymnasium 0.29.1, which resets in the same step).")
    return cls(list(fns), autoreset_mode=mode.SAME_STEP)
