"""Failure heatmaps for bodies and grid worlds, read from the env's state (no frame rendered).

* :class:`BodyExtractor` (``--objects body:<name>``, e.g. ``body:torso``): where a MuJoCo body was when the episode
  failed, in the body's own world coordinates (``data.body(name).xpos``): the x-z plane for the planar walkers
  (Hopper, Walker2d, HalfCheetah, Swimmer: where the torso fell, and how high it was), the x-y plane for bodies that
  move on the floor (Ant, Humanoid: where it flipped). dm_control's bodies through Shimmy alike (their physics' own
  ``MjData``): cheetah, walker and hopper in x-z, humanoid, quadruped, dog, fish and swimmer in x-y. The heatmap's grid is the plane at :data:`PIXELS_PER_METRE`,
  drawn over a background of one-metre grid lines (the ground at z = 0 in white), not over a camera frame (MuJoCo's
  tracking cameras move with the body: a pixel there is no place).
* :class:`GridAgentExtractor` (MiniGrid and BabyAI, the default for their ids): the agent's cell, the tile at
  ``agent_pos`` of the full render (``tile_size`` pixels a cell).
"""

from __future__ import annotations

import numpy as np

from ...envs.families import family_of
from ...envs.families.dm_control import DM_TORSO_DOMAINS
from ...envs.mujoco_state import mujoco_data, mujoco_model
from ...errors import UsageError
from .extractor import Extractor

__all__ = ["BodyExtractor", "GridAgentExtractor", "PIXELS_PER_METRE", "BODY_PLANES", "body_extractor",
           "default_body_extractor", "TORSO_ENVS", "DM_TORSO_DOMAINS"]

PIXELS_PER_METRE = 40
#: plane -> ((first axis, its metres shown), (second axis, its metres shown)); axes 0 x, 1 y, 2 z
BODY_PLANES = {"xz": ((0, (-1.0, 11.0)), (2, (0.0, 2.0))), "xy": ((0, (-10.0, 10.0)), (1, (-10.0, 10.0)))}
_FLOOR_BODIES = ("Ant", "Humanoid", "HumanoidStandup", "Quadruped")


def _plane_for(env) -> str:
    name = type(getattr(env, "unwrapped", env)).__name__
    spec = getattr(env, "spec", None)
    env_id = str(getattr(spec, "id", "") or "")
    family = family_of(env_id)
    if family is not None and family.body_plane is not None:  # dm_control's: by its domain
        return family.body_plane(env_id)
    return "xy" if any(name.startswith(b) for b in _FLOOR_BODIES) else "xz"


class BodyExtractor(Extractor):
    """One object, the body ``name`` (a MuJoCo body of the env's model), as a disc of ``radius`` pixels at its
    position in ``plane`` ("xz" or "xy"; None: "xy" for Ant and Humanoid, "xz" otherwise, read from the first
    env). A position beyond the plane's window is drawn at its edge (the failure still counts)."""

    needs_frame = False

    def __init__(self, name: str, plane: str | None = None, radius: int = 4):
        if plane is not None and plane not in BODY_PLANES:
            raise UsageError(f"body plane {plane!r}; expected one of {sorted(BODY_PLANES)}.")
        self.body, self.plane, self.radius = str(name), plane, int(radius)
        self.names = (self.body,)
        self.frame_shape: tuple[int, int] | None = None

    def _data(self, env):
        data = mujoco_data(env)  # gymnasium's MuJoCo envs and dm_control's through Shimmy
        if data is None:
            raise UsageError(f"--objects body:{self.body} needs a MuJoCo env (gymnasium's MuJoCo envs, dm_control "
                             f"through Shimmy); {type(getattr(env, 'unwrapped', env)).__name__} has none.")
        return data

    def begin_episode(self, env) -> None:
        if self.plane is None:
            self.plane = _plane_for(env)

    def capture(self, frame, env):
        if self.plane is None:
            self.plane = _plane_for(env)
        try:
            return np.array(self._data(env).body(self.body).xpos, dtype=np.float64)
        except KeyError:
            model = mujoco_model(env)
            names = [model.body(i).name for i in range(model.nbody)] if model is not None else []
            raise UsageError(f"--objects body:{self.body}: the model has no body {self.body!r}; its bodies: "
                             f"{', '.join(n for n in names if n)}.") from None

    def shape(self) -> tuple[int, int]:
        (_, (c0, c1)), (_, (r0, r1)) = BODY_PLANES[self.plane or "xz"]
        return round((r1 - r0) * PIXELS_PER_METRE), round((c1 - c0) * PIXELS_PER_METRE)

    def pixel(self, xpos) -> tuple[int, int]:
        """(row, column) of a world position in the plane's grid (rows grow downwards: z up is row 0's side)."""
        (ca, (c0, _)), (ra, (_, r1)) = BODY_PLANES[self.plane or "xz"]
        h, w = self.shape()
        row = int(np.clip(np.floor((r1 - xpos[ra]) * PIXELS_PER_METRE), 0, h - 1))
        col = int(np.clip(np.floor((xpos[ca] - c0) * PIXELS_PER_METRE), 0, w - 1))
        return row, col

    def masks(self, captured):
        h, w = self.shape()
        out = np.zeros((h, w), bool)
        if captured is None:
            return {self.body: out}
        r, c = self.pixel(captured)
        rr, cc = np.ogrid[:h, :w]
        out[(rr - r) ** 2 + (cc - c) ** 2 <= self.radius**2] = True
        return {self.body: out}

    def background_image(self) -> np.ndarray:
        """uint8 [H, W, 3]: one-metre grid lines on dark grey, the ground (z = 0, or the axes of "xy") in white."""
        h, w = self.shape()
        img = np.full((h, w, 3), 40, np.uint8)
        (ca, (c0, c1)), (ra, (r0, r1)) = BODY_PLANES[self.plane or "xz"]
        for metre in range(int(np.ceil(c0)), int(np.floor(c1)) + 1):
            col = self.pixel(_at(ca, metre, ra, r0))[1]
            img[:, col] = 255 if metre == 0 and self.plane == "xy" else 90
        for metre in range(int(np.ceil(r0)), int(np.floor(r1)) + 1):
            row = self.pixel(_at(ca, c0, ra, metre))[0]
            img[row] = 255 if metre == 0 else 90
        return img


def _at(ca: int, a: float, ra: int, b: float) -> np.ndarray:
    p = np.zeros(3)
    p[ca], p[ra] = a, b
    return p


#: gymnasium's MuJoCo bodies whose root body is named "torso": their heatmap is the torso's by default
TORSO_ENVS = ("Hopper", "Walker2d", "HalfCheetah", "Ant", "Humanoid", "HumanoidStandup", "Swimmer")


def default_body_extractor(env_id: str) -> BodyExtractor | None:
    """``body:torso`` for gymnasium's MuJoCo walkers (any version) and the body its family names (:attr:`Family.objects
    <rlviz.envs.families.family.Family>`: dm_control's torso), else None."""
    env_id = str(env_id)
    family = family_of(env_id)
    if family is not None and family.objects is not None:
        spec = family.objects(env_id)
        return body_extractor(spec) if spec is not None and spec.startswith("body:") else None
    name = env_id.rsplit("/", 1)[-1].rsplit("-v", 1)[0]
    return BodyExtractor("torso") if name in TORSO_ENVS else None


def body_extractor(spec: str) -> BodyExtractor:
    """``"body:<name>"`` or ``"body:<name>:<plane>"`` -> a :class:`BodyExtractor`."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or parts[0] != "body" or not parts[1]:
        raise UsageError(f"--objects {spec!r}: expected body:<name> or body:<name>:xz|xy, e.g. body:torso.")
    return BodyExtractor(parts[1], parts[2] if len(parts) == 3 else None)


class GridAgentExtractor(Extractor):
    """MiniGrid / BabyAI: the agent's cell in the full render (``agent_pos`` (x, y), ``tile_size`` pixels a cell)."""

    needs_frame = False
    names = ("agent",)

    def __init__(self):
        self.frame_shape: tuple[int, int] | None = None

    def capture(self, frame, env):
        u = getattr(env, "unwrapped", env)
        x, y = (int(v) for v in u.agent_pos)
        return x, y, int(getattr(u, "tile_size", 32)), int(u.width), int(u.height)

    def masks(self, captured):
        x, y, ts, gw, gh = captured
        shape = self.frame_shape or (gh * ts, gw * ts)
        out = np.zeros(shape[:2], bool)
        fy, fx = shape[0] / (gh * ts), shape[1] / (gw * ts)
        out[round(y * ts * fy) : round((y + 1) * ts * fy), round(x * ts * fx) : round((x + 1) * ts * fx)] = True
        return {"agent": out}
