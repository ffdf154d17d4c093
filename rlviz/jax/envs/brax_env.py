"""``brax:<name>``: Brax's own envs (``ant``, ``halfcheetah``, ``hopper``, ``inverted_pendulum``, ``reacher``...) on the
backend ``--env-kwargs '{"backend": ...}'`` names, by default ``mjx`` (MuJoCo XLA: the physics MuJoCo itself computes,
the one Brax's authors maintain; ``generalized`` is Brax's own and takes longer to compile here; ``positional`` and
``spring`` are the fast approximations). MuJoCo Playground is left out: it is not on PyPI's resolver path of the jax
extra here, and Brax's envs carry the same MJX physics.

Frames: the env's MuJoCo model drawn by mujoco's renderer (headless: ``MUJOCO_GL=egl``, else osmesa), the positions
of the kept state set as the model's ``qpos``; where no GL works, a top-down drawing of the bodies. Heatmap: the torso's
(the first body's) x/y, on a 64 x 64 grid over [-10 m, 10 m]."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UsageError
from .base import JaxEnvBase, missing_family

__all__ = ["BraxEnv"]

#: the heatmap's plane: metres from the origin each side, and its pixels
_EXTENT, _GRID = 10.0, 64


class BraxEnv(JaxEnvBase):
    family = "brax"
    discrete = False

    def __init__(self, name: str, env_kwargs: dict | None = None):
        from ...envs.headless import choose_gl

        choose_gl(f"brax:{name}")  # before mujoco is imported
        try:
            import warnings

            from brax import envs
        except ImportError:
            raise missing_family("brax", "brax") from None
        kwargs = {"backend": "mjx", **dict(env_kwargs or {})}
        if name not in envs._envs:  # noqa: SLF001 - brax's registry (get_environment says no more)
            raise UsageError(f"brax:{name} is not a Brax env; expected one of {', '.join(sorted(envs._envs))}.")  # noqa: SLF001
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "Brax System ... not actively maintained"
                self.env = envs.get_environment(name, **kwargs)
        except TypeError as exc:
            raise UsageError(f"--env-kwargs {kwargs} for brax:{name}: {exc}.") from None
        self.name, self.env_id, self.params = name, f"brax:{name}", None
        # (Brax's ``observation_size`` runs ``reset`` op by op: ~570 one-op compiles, 25 s for MJX's inverted
        # pendulum; its shape alone needs no computation)
        import jax

        self.obs_shape = (int(jax.eval_shape(self.env.unwrapped.reset, jax.random.PRNGKey(0)).obs.shape[-1]),)
        d = int(self.env.action_size)
        model = getattr(self.env.sys, "mj_model", None)
        names = []
        if model is not None:
            import mujoco  # type: ignore[import-untyped,unused-ignore]

            names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or f"a{i}" for i in range(d)]
        self.action_names = tuple(names) if len(names) == d else tuple(f"a{i}" for i in range(d))
        self.action_low, self.action_high = np.full(d, -1.0, np.float32), np.full(d, 1.0, np.float32)
        self.max_steps = int(kwargs.get("episode_length", 1000))
        self.object_names, self.object_grid = ("torso",), (_GRID, _GRID)
        self.fps = float(round(1.0 / float(self.env.dt))) if float(self.env.dt) > 0 else 30.0
        self._renderer: Any = None
        self._data: Any = None

    def reset(self, key: Any, params: Any) -> tuple[Any, Any]:
        state = self.env.reset(key)
        return state.obs, state

    def step(self, key: Any, state: Any, action: Any, params: Any) -> tuple[Any, Any, Any, Any, Any]:
        import jax.numpy as jnp

        state2 = self.env.step(state, action)
        return state2.obs, state2, jnp.asarray(state2.reward, jnp.float32), state2.done > 0.5, jnp.asarray(False)

    def objects(self, state: Any) -> Any:
        import jax.numpy as jnp

        xy = state.pipeline_state.x.pos[0, :2]
        scale = _GRID / (2 * _EXTENT)
        col, row = (xy[0] + _EXTENT) * scale, (_EXTENT - xy[1]) * scale
        return jnp.stack([jnp.stack([col, row])]).astype(jnp.float32)

    def frame(self, state: Any) -> np.ndarray:
        q = np.asarray(state.pipeline_state.q, np.float64)
        model = getattr(self.env.sys, "mj_model", None)
        if model is not None and self._renderer is not False:
            try:
                import mujoco  # type: ignore[import-untyped,unused-ignore]

                if self._renderer is None:
                    self._renderer, self._data = mujoco.Renderer(model, 240, 320), mujoco.MjData(model)
                self._data.qpos[:] = q
                mujoco.mj_forward(model, self._data)
                self._renderer.update_scene(self._data)
                return np.asarray(self._renderer.render(), np.uint8).copy()
            except Exception:  # noqa: BLE001 - no GL here: the drawing below
                self._renderer = False
        return self._top_down(np.asarray(state.pipeline_state.x.pos, np.float64))

    def _top_down(self, pos: np.ndarray) -> np.ndarray:
        """The bodies' x/y seen from above (each a small square; the torso red), centred on the torso."""
        img = np.full((240, 320, 3), 235, np.uint8)
        centre = pos[0, :2]
        for i, (x, y) in enumerate(pos[:, :2] - centre):
            c, r = int(160 + x * 60), int(120 - y * 60)
            if 2 <= r < 238 and 2 <= c < 318:
                img[r - 2 : r + 3, c - 2 : c + 3] = (200, 40, 40) if i == 0 else (40, 40, 40)
        return img

    def heatmap_background(self, state: Any) -> np.ndarray:
        """The floor from above: a light grid, a line every metre, the axes darker."""
        img = np.full((_GRID, _GRID, 3), 235, np.uint8)
        step = _GRID / (2 * _EXTENT)
        for k in range(int(2 * _EXTENT) + 1):
            i = min(int(round(k * step)), _GRID - 1)
            shade = 150 if k == int(_EXTENT) else 210
            img[i, :], img[:, i] = shade, shade
        return img

