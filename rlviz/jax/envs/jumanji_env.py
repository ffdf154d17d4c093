"""``jumanji:<id>``: Jumanji's envs with a single discrete action (``Snake-v1``, ``Game2048-v1``, ``Maze-v0``,
``Sokoban-v0``...). The policy sees the observation's ``grid`` when it has one (Snake, Sokoban...), else its numeric
fields flattened into one vector. Episodes end at Jumanji's last timestep: terminated when its discount is 0,
truncated otherwise (Jumanji's convention). Frames: the env's own matplotlib viewer, asked for its ``rgb_array`` output
(on the host). Heatmap: Snake's head (``head_position``) and Maze's agent (``agent_position``) on the grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UsageError
from .base import JaxEnvBase, missing_family

__all__ = ["JumanjiEnv"]

_POSITIONS = {"Snake-v1": ("head", "head_position"), "Maze-v0": ("agent", "agent_position")}
_MOVES = ("UP", "RIGHT", "DOWN", "LEFT")


class JumanjiEnv(JaxEnvBase):
    family = "jumanji"

    def __init__(self, name: str, env_kwargs: dict | None = None):
        try:
            import jumanji
        except ImportError:
            raise missing_family("jumanji", "jumanji") from None
        known = sorted(jumanji.registered_environments())
        if name not in known:
            raise UsageError(f"jumanji:{name} is not a Jumanji env; expected one of {', '.join(known)}.")
        try:
            self.env = jumanji.make(name, **dict(env_kwargs or {}))
        except TypeError as exc:
            raise UsageError(f"--env-kwargs {env_kwargs} for jumanji:{name}: {exc}.") from None
        spec = self.env.action_spec
        if not hasattr(spec, "num_values") or np.ndim(spec.num_values) != 0:
            raise UsageError(f"jumanji:{name} takes {type(spec).__name__} actions; rlviz's JAX engine takes one discrete "
                             "action (Snake-v1, Game2048-v1, Maze-v0, Sokoban-v0...).")
        self.name, self.env_id, self.params = name, f"jumanji:{name}", None
        n = int(spec.num_values)
        self.action_names = _MOVES if n == 4 and name in ("Snake-v1", "Maze-v0", "Game2048-v1") else tuple(
            str(i) for i in range(n))
        obs_spec = self.env.observation_spec
        self._grid = hasattr(obs_spec, "grid")
        import jax

        _, ts = jax.eval_shape(self.env.reset, jax.random.key(0))
        self.obs_shape = tuple(int(d) for d in jax.eval_shape(self._obs, ts.observation).shape)
        self.max_steps = int(getattr(self.env, "time_limit", 0) or getattr(self.env, "max_steps", 0) or 1000)
        if name in _POSITIONS:
            self.object_names = (_POSITIONS[name][0],)
            grid = getattr(obs_spec, "grid", None) or getattr(obs_spec, "walls", None)
            self.object_grid = (int(grid.shape[0]), int(grid.shape[1])) if grid is not None else None
            if self.object_grid is None:
                self.object_names = ()
        self.fps = 8.0
        self._viewer_ready = False

    def _obs(self, observation: Any) -> Any:
        import jax
        import jax.numpy as jnp

        if self._grid:
            return jnp.asarray(observation.grid, jnp.float32)
        leaves = [jnp.asarray(x, jnp.float32).reshape(-1) for x in jax.tree_util.tree_leaves(observation)]
        return jnp.concatenate(leaves)

    def reset(self, key: Any, params: Any) -> tuple[Any, Any]:
        state, ts = self.env.reset(key)
        return self._obs(ts.observation), state

    def step(self, key: Any, state: Any, action: Any, params: Any) -> tuple[Any, Any, Any, Any, Any]:
        import jax.numpy as jnp

        state2, ts = self.env.step(state, action)
        last = ts.last()
        terminated = jnp.logical_and(last, ts.discount == 0)
        return (self._obs(ts.observation), state2, jnp.asarray(ts.reward, jnp.float32).reshape(()), terminated,
                jnp.logical_and(last, ~terminated))

    def objects(self, state: Any) -> Any:
        import jax.numpy as jnp

        if not self.object_names:
            return None
        pos = getattr(state, _POSITIONS[self.name][1])
        row, col = (pos.row, pos.col) if hasattr(pos, "row") else (pos[0], pos[1])
        return jnp.stack([jnp.stack([col, row])]).astype(jnp.float32)

    def frame(self, state: Any) -> np.ndarray:
        viewer = getattr(self.env, "_viewer", None) or getattr(self.env, "viewer", None)
        if viewer is not None and hasattr(viewer, "_display_rgb_array"):
            if not self._viewer_ready:
                viewer._display = viewer._display_rgb_array  # noqa: SLF001 - the viewer's own rgb_array mode
                viewer.figure_size = (4.0, 4.0)
                self._viewer_ready = True
            out = viewer.render(state)
            if out is not None:
                return np.ascontiguousarray(np.asarray(out)[..., :3], dtype=np.uint8)
        raise UsageError(f"{self.env_id}'s viewer gives no rgb_array frames; render it with --videos none.")
