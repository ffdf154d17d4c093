"""The one converter from what ``env.render()`` returns to the frame every stage uses: uint8 ``[H, W, 3]`` RGB.

The rule (tested on uint8, float in [0, 1] and float in [0, 255]):

* ``uint8``: kept as is;
* ``bool``: False -> 0, True -> 255;
* floating point: when every finite value lies in [0, 1] the frame is taken as [0, 1] and scaled by 255
  (MinAtar renders float64 [0, 1]); otherwise it is taken as [0, 255]. Either way values are rounded
  to the nearest integer (0.5 -> 128), clipped to [0, 255], and NaN becomes 0;
* other integer types: clipped to [0, 255];
* grey ``[H, W]`` or ``[H, W, 1]`` is repeated to three channels; an alpha channel is dropped.
"""

from __future__ import annotations

import numpy as np

from ..errors import EnvError

__all__ = ["to_rgb_frame"]


def to_rgb_frame(frame) -> np.ndarray:
    """A rendered frame as contiguous uint8 ``[H, W, 3]`` RGB (see the module docstring for the rule)."""
    if frame is None:
        raise EnvError(
            "env.render() returned None. Initialize your environment with render_mode='rgb_array', "
            "e.g. gym.make(env_id, render_mode='rgb_array')."
        )
    f = np.asarray(frame)
    if f.dtype != np.uint8:
        if f.dtype == np.bool_:
            f = f.astype(np.uint8) * 255
        elif np.issubdtype(f.dtype, np.floating):
            finite = f[np.isfinite(f)]
            scale = 255.0 if finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0) else 1.0
            f = np.clip(np.rint(np.nan_to_num(f.astype(np.float64), nan=0.0) * scale), 0, 255).astype(np.uint8)
        elif np.issubdtype(f.dtype, np.integer):
            f = np.clip(f, 0, 255).astype(np.uint8)
        else:
            raise EnvError(f"env.render() returned an array of dtype {f.dtype}; expected an RGB image (uint8 or float).")
    if f.ndim == 2:
        f = f[..., None]
    if f.ndim != 3 or f.shape[-1] not in (1, 3, 4):
        raise EnvError(
            f"env.render() returned an array of shape {f.shape}; expected an RGB image [H, W, 3] "
            "(make the env with render_mode='rgb_array')."
        )
    if f.shape[-1] == 1:
        f = np.repeat(f, 3, axis=-1)
    return np.ascontiguousarray(f[..., :3])


def frame_rate(env) -> float:
    """The frames per second an episode of ``env`` plays at in real time: dm_control through Shimmy, one frame per
    control step (``1 / control_timestep()``: Shimmy's ``metadata["render_fps"]`` holds the step in milliseconds);
    else the env's ``metadata["render_fps"]`` (gymnasium's MuJoCo envs set it from their ``dt``); else ``1 / dt``
    where the env has one; else 30."""
    base = getattr(env, "unwrapped", env)
    control_timestep = getattr(getattr(base, "_env", None), "control_timestep", None)
    if type(base).__module__.startswith("shimmy.dm_control") and callable(control_timestep):
        step = float(control_timestep())
        if step > 0:
            return 1.0 / step
    fps = (getattr(env, "metadata", None) or {}).get("render_fps")
    if isinstance(fps, (int, float)) and fps > 0:
        return float(fps)
    dt = getattr(base, "dt", None)
    return 1.0 / float(dt) if isinstance(dt, (int, float)) and dt > 0 else 30.0


__all__ += ["frame_rate"]
