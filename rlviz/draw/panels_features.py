"""Saliency of flat vector observations: one horizontal bar per observation feature.

For observations that are a vector [D] (CartPole's 4 numbers, Pendulum's 3, MuJoCo's tens), saliency is one
number per feature and step (``internals.saliency`` float32 [T+1, D] in [0, 1], normalised over the whole
episode, not per frame, so bars do not flicker and a full bar means "as large as anywhere in this episode").
The panel draws one labelled bar per feature; names come from :data:`FEATURE_NAMES` for the classic-control and
MuJoCo envs whose observation layout Gymnasium documents (MuJoCo v5: qpos then qvel), else ``x0, x1, ...``.
"""

from __future__ import annotations

import cv2
import numpy as np

from .style import COLORS, put_text, short, text_width

__all__ = ["FEATURE_NAMES", "FeaturePanel", "feature_names", "feature_rows"]

def _mujoco_planar(joints: tuple[str, ...]) -> tuple[str, ...]:
    """A planar MuJoCo walker's observation names: torso z and angle, joint angles, then their velocities."""
    return ("torso z", "torso angle", *(f"{j} angle" for j in joints), "torso vel x", "torso vel z", "torso ang.vel",
            *(f"{j} ang.vel" for j in joints))


_CARTPOLE = ("cart x", "cart vel", "pole angle", "pole ang.vel")
_PENDULUM = ("cos theta", "sin theta", "ang.vel")
#: env id (without version) -> names of the observation's features, in order (Gymnasium's documented layouts).
FEATURE_NAMES: dict[str, tuple[str, ...]] = {
    "CartPole": _CARTPOLE,
    "Pendulum": _PENDULUM,
    "MountainCar": ("position", "velocity"),
    "MountainCarContinuous": ("position", "velocity"),
    "Acrobot": ("cos th1", "sin th1", "cos th2", "sin th2", "ang.vel 1", "ang.vel 2"),
    "LunarLander": ("x", "y", "vel x", "vel y", "angle", "ang.vel", "leg 1", "leg 2"),
    "LunarLanderContinuous": ("x", "y", "vel x", "vel y", "angle", "ang.vel", "leg 1", "leg 2"),
    # gymnasium's MuJoCo envs (v5's documented order, default kwargs): qpos without the root's x (z, angle, joint
    # angles), then qvel (the root's velocities, the joints' angular velocities)
    "Hopper": _mujoco_planar(("thigh", "leg", "foot")),
    "Walker2d": _mujoco_planar(("thigh", "leg", "foot", "thigh L", "leg L", "foot L")),
    "HalfCheetah": _mujoco_planar(("bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot")),
    "Swimmer": ("tip angle", "rot 1", "rot 2", "tip vel x", "tip vel y", "tip ang.vel", "rot 1 vel", "rot 2 vel"),
    "InvertedPendulum": ("cart x", "pole angle", "cart vel", "pole ang.vel"),
    "InvertedDoublePendulum": ("cart x", "sin hinge 1", "sin hinge 2", "cos hinge 1", "cos hinge 2", "cart vel",
                               "hinge 1 ang.vel", "hinge 2 ang.vel", "constraint"),
}
#: Most rows drawn with a label; more features get thin unlabelled rows.
_LABELLED = 16


def feature_names(env_id: str, d: int) -> list[str]:
    """Names of the ``d`` features of ``env_id``'s observations ("CartPole-v1" -> cart x, ...), else x0..x{d-1}."""
    base = str(env_id).split("/")[-1].split("-v")[0]
    names = FEATURE_NAMES.get(base)
    return list(names) if names is not None and len(names) == d else [f"x{i}" for i in range(d)]


def feature_rows(d: int, line_h: int) -> int:
    """Height in pixels of one feature's row: a text line for up to 16 features, then thinner (>= 2)."""
    return max(12, line_h - 2) if d <= _LABELLED else max(2, min(line_h - 2, 320 // max(d, 1)))


class FeaturePanel:
    """Draws the per-feature bars of frame t into the box (x, y, width) given by the compositor's layout.

    saliency: float32 [T+1, D] in [0, 1]; names: D labels; row_h: pixels per row (:func:`feature_rows`).
    """

    def __init__(self, saliency, names: list[str], box: tuple, row_h: int, font_scale: float):
        self.saliency, self.fs, self.row_h = saliency, font_scale, int(row_h)
        self.x, self.y, self.w = (int(v) for v in box[:3])
        self.d = int(saliency.shape[1])
        self.labels = [short(n, 12) for n in names] if self.row_h >= 12 else []
        small = font_scale * 0.85
        label_w = max((text_width(n, small) for n in self.labels), default=0) + 8
        self.bar_x0 = self.x + label_w
        self.num_w = text_width("0.00", small) + 6 if self.labels else 0
        self.bar_len = max(10, self.w - label_w - self.num_w)

    @property
    def height(self) -> int:
        return self.d * self.row_h

    def draw_static(self, img: np.ndarray) -> None:
        """Labels and empty tracks (the background, drawn once)."""
        small = self.fs * 0.85
        for i in range(self.d):
            y = self.y + i * self.row_h
            bh = max(1, self.row_h - 4) if self.labels else max(1, self.row_h - 1)
            if self.labels:
                put_text(img, self.labels[i], self.x, y + bh, "dim", small)
            cv2.rectangle(img, (self.bar_x0, y), (self.bar_x0 + self.bar_len - 1, y + bh - 1), COLORS["track"], -1)

    def draw(self, img: np.ndarray, t: int) -> None:
        """Frame t's bars: length = the feature's saliency (1 = the episode's max), the largest one highlighted."""
        row = np.clip(np.nan_to_num(np.asarray(self.saliency[t], dtype=np.float32)), 0.0, 1.0)
        top = int(np.argmax(row)) if row.size else -1
        small = self.fs * 0.85
        for i, v in enumerate(row):
            y = self.y + i * self.row_h
            bh = max(1, self.row_h - 4) if self.labels else max(1, self.row_h - 1)
            n = int(round(float(v) * self.bar_len))
            if n > 0:
                color = COLORS["chosen"] if i == top else COLORS["bar"]
                cv2.rectangle(img, (self.bar_x0, y), (self.bar_x0 + n - 1, y + bh - 1), color, -1)
            if self.labels:
                put_text(img, f"{float(v):.2f}", self.bar_x0 + self.bar_len + 4, y + bh, "text", small)
