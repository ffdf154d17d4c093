"""Saliency maps from observation space to frame pixels, and the colour blend over the frame."""

from __future__ import annotations

import cv2
import numpy as np

from ..errors import UsageError

__all__ = ["saliency_to_frame", "blend", "ACTOR_COLOR", "CRITIC_COLOR"]

#: Default overlay colours (RGB): policy maps amber (it stands out on MinAtar's blues and teals and on Atari's
#: dark backgrounds), value maps red.
ACTOR_COLOR = (255, 190, 20)
CRITIC_COLOR = (255, 60, 40)


def saliency_to_frame(heat: np.ndarray, frame_hw: tuple[int, int], mode: str = "linear") -> np.ndarray:
    """heat float [h, w] (observation space) -> float32 [H, W] (frame pixels).

    mode "linear": the observation is a resized image of the whole frame (Atari 84x84 of 210x160);
    "nearest": a grid world whose cells are blocks of frame pixels (MinAtar 10x10).
    """
    if heat.ndim != 2:
        raise UsageError(f"saliency_to_frame expects a 2-D map [h, w]; received shape {heat.shape}.")
    interp = {"linear": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST}.get(mode)
    if interp is None:
        raise UsageError(f"saliency mode {mode!r} is not known; use 'linear' or 'nearest'.")
    h, w = int(frame_hw[0]), int(frame_hw[1])
    if heat.shape == (h, w):
        return heat.astype(np.float32, copy=False)
    return cv2.resize(heat.astype(np.float32, copy=False), (w, h), interpolation=interp)


def blend(frame: np.ndarray, heat: np.ndarray, color=ACTOR_COLOR, alpha: float = 0.65) -> np.ndarray:
    """Tint ``frame`` uint8 [H, W, 3] towards ``color`` where ``heat`` float [H, W] in [0, 1] is high."""
    if frame.shape[:2] != heat.shape:
        raise UsageError(f"blend: frame {frame.shape[:2]} and heat {heat.shape} must have the same height and width.")
    a = (np.clip(heat, 0.0, 1.0) * float(alpha))[..., None].astype(np.float32)
    out = frame.astype(np.float32) * (1.0 - a) + np.asarray(color, dtype=np.float32) * a
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)
