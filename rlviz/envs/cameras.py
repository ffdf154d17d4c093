"""Several MuJoCo cameras in one video frame: ``--camera track,0`` (render) or ``RecordOptions(camera=...)``.

A camera list is a comma list (or a sequence) of: ``default`` (the env's own ``render()``, its usual view), ``free``
(MuJoCo's free camera, id -1), a camera's id in the model (``0``) or its name (``track``). :class:`CameraTiles` makes
``render()`` return the views side by side, left to right in the order given (frames of one env share its render
size, so two cameras give a frame twice as wide). It works on gymnasium's MuJoCo envs (their ``mujoco_renderer``) and
dm_control through Shimmy (``physics.render``); an unknown camera is refused in one line listing the model's cameras.
Nothing here imports mujoco (the env has loaded it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import UsageError
from ..options import camera_list
from .mujoco_state import dm_control_physics

__all__ = ["CameraTiles", "camera_list", "model_cameras", "with_cameras"]

#: the env's own view (its ``render()``)
DEFAULT = "default"


def model_cameras(env: gym.Env) -> list[str]:
    """The model's camera names by id (``""`` for an unnamed one); raises when ``env`` is not a MuJoCo env."""
    unwrapped: Any = env.unwrapped
    if getattr(unwrapped, "mujoco_renderer", None) is not None:
        model = unwrapped.model  # (a mujoco.MjModel: its cameras by id, with no import of mujoco here)
        return [model.camera(i).name or "" for i in range(model.ncam)]
    physics = dm_control_physics(env)
    if physics is not None:
        return [physics.model.id2name(i, "camera") or "" for i in range(physics.model.ncam)]
    spec = getattr(env, "spec", None)
    name = spec.id if spec is not None else type(unwrapped).__name__
    raise UsageError(f"--camera was given for {name}, which is not a MuJoCo env; cameras are those of gymnasium's "
                     "MuJoCo envs and of dm_control through Shimmy. Leave --camera out for this env.")


def _resolve(name: str, names: list[str], env_name: str) -> str | int:
    if name == DEFAULT:
        return DEFAULT
    if name == "free":
        return -1
    if name.lstrip("-").isdigit() and -1 <= int(name) < len(names):
        return int(name)
    if name in names:
        return names.index(name)
    listed = ", ".join([f"{DEFAULT} (the env's own view)", "free (-1)"] +
                       [f"{i} ({n})" if n else str(i) for i, n in enumerate(names)])
    raise UsageError(f"--camera {name!r}: {env_name} has no such camera; its cameras: {listed}.")


class CameraTiles(gym.Wrapper):
    """``render()`` gives the views of ``cameras`` side by side (see the module docstring); all else is the env's."""

    def __init__(self, env: gym.Env, cameras: str | Sequence[str | int]):
        super().__init__(env)
        names = model_cameras(env)
        spec = getattr(env, "spec", None)
        env_name = spec.id if spec is not None else type(env.unwrapped).__name__
        wanted = camera_list(cameras)
        if not wanted:
            raise UsageError("CameraTiles received no camera; expected a comma list such as track,0.")
        if env.render_mode != "rgb_array":
            raise UsageError(f"--camera tiles rgb_array frames, but {env_name} renders {env.render_mode!r}; make it "
                             "with render_mode='rgb_array'.")
        self.cameras = wanted
        self.views: tuple[str | int, ...] = tuple(_resolve(n, names, env_name) for n in wanted)

    def render(self) -> Any:
        frames = [np.asarray(self._view(v)) for v in self.views]
        if len(frames) == 1:
            return frames[0]
        height = max(f.shape[0] for f in frames)
        frames = [f if f.shape[0] == height else np.pad(f, ((0, height - f.shape[0]), (0, 0), (0, 0)))
                  for f in frames]
        return np.concatenate(frames, axis=1)

    def _view(self, view: str | int) -> Any:
        if view == DEFAULT:
            return self.env.render()
        unwrapped = self.env.unwrapped
        renderer = getattr(unwrapped, "mujoco_renderer", None)
        if renderer is not None:
            before = renderer.camera_id
            renderer.camera_id = view
            try:
                return renderer.render("rgb_array")
            finally:
                renderer.camera_id = before
        kwargs = dict(getattr(unwrapped, "render_kwargs", None) or {})
        kwargs["camera_id"] = view
        return dm_control_physics(self.env).render(**kwargs)


def with_cameras(env: gym.Env, cameras: str | Sequence[str | int] | None) -> gym.Env:
    """``env`` whose frames tile ``cameras`` (:class:`CameraTiles`); ``env`` itself when none is asked, or only
    ``default``."""
    wanted = camera_list(cameras)
    if not wanted or wanted == (DEFAULT,):
        return env
    return CameraTiles(env, wanted)
