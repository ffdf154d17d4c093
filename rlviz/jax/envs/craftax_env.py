"""``craftax:<id>``: Craftax and Craftax-Classic (``Craftax-Symbolic-v1``, ``Craftax-Pixels-v1``,
``Craftax-Classic-Symbolic-v1``, ``Craftax-Classic-Pixels-v1``), stepped without auto-reset. Frames: Craftax's own
pixel renderer (pure JAX, jit-compiled once on the host's CPU, 16-pixel blocks: the player's view and inventory, as
the Pixels envs' observations look). Heatmap: the player's position on the map (``state.player_position``: row,
column), drawn over the level's map in a palette of its block types."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UsageError
from .base import JaxEnvBase, missing_family, split_kwargs

__all__ = ["CraftaxEnv"]

_IDS = ("Craftax-Symbolic-v1", "Craftax-Pixels-v1", "Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1")


class CraftaxEnv(JaxEnvBase):
    family = "craftax"

    def __init__(self, name: str, env_kwargs: dict | None = None):
        try:
            from craftax.craftax_env import make_craftax_env_from_name
        except ImportError:
            raise missing_family("craftax", "craftax") from None
        if name not in _IDS:
            raise UsageError(f"craftax:{name} is not a Craftax env; expected one of {', '.join(_IDS)}.")
        self.name, self.classic = name, "Classic" in name
        self.env = make_craftax_env_from_name(name, auto_reset=False)
        self.params, rest = split_kwargs(self.env.default_params, dict(env_kwargs or {}))
        if rest:
            raise UsageError(f"--env-kwargs {sorted(rest)} are not fields of craftax:{name}'s params "
                             f"({', '.join(self.params.__dataclass_fields__)}).")
        self.env_id = f"craftax:{name}"
        self.obs_shape = tuple(int(d) for d in self.env.observation_space(self.params).shape)
        n = int(self.env.action_space(self.params).n)
        if self.classic:
            from craftax.craftax_classic.constants import Action
        else:
            from craftax.craftax.constants import Action
        names = [a.name for a in sorted(Action, key=lambda a: a.value)]
        self.action_names = tuple(names[:n]) if len(names) >= n else tuple(str(i) for i in range(n))
        self.max_steps = int(getattr(self.params, "max_timesteps", 10000))
        self.object_names = ("player",)
        self._renderer: Any = None
        self.fps = 10.0

    def reset(self, key: Any, params: Any) -> tuple[Any, Any]:
        return self.env.reset_env(key, params)

    def step(self, key: Any, state: Any, action: Any, params: Any) -> tuple[Any, Any, Any, Any, Any]:
        import jax.numpy as jnp

        obs, state2, reward, done, _ = self.env.step_env(key, state, action, params)
        truncated = jnp.logical_and(done, state2.timestep >= params.max_timesteps)
        return obs, state2, jnp.asarray(reward, jnp.float32), jnp.logical_and(done, ~truncated), truncated

    def objects(self, state: Any) -> Any:
        import jax.numpy as jnp

        row, col = state.player_position[0], state.player_position[1]
        return jnp.stack([jnp.stack([col, row])]).astype(jnp.float32)

    @property
    def object_grid(self) -> tuple[int, int]:  # type: ignore[override]
        size = getattr(self.env.static_env_params, "map_size", None) if hasattr(self.env, "static_env_params") else None
        return (int(size[0]), int(size[1])) if size is not None else (64, 64)

    def frame(self, state: Any) -> np.ndarray:
        import jax

        if self._renderer is None:
            if self.classic:
                from craftax.craftax_classic.constants import BLOCK_PIXEL_SIZE_IMG
                from craftax.craftax_classic.renderer import make_craftax_pixel_renderer
            else:
                from craftax.craftax.constants import BLOCK_PIXEL_SIZE_IMG
                from craftax.craftax.renderer import make_craftax_pixel_renderer
            self._renderer = jax.jit(make_craftax_pixel_renderer(BLOCK_PIXEL_SIZE_IMG))
        cpu = jax.local_devices(backend="cpu")[0]  # (one frame: not worth a trip to an accelerator)
        pixels = np.asarray(self._renderer(jax.device_put(state, cpu)), dtype=np.float32)
        if pixels.max(initial=0.0) <= 1.0:
            pixels = pixels * 255.0
        return np.clip(pixels, 0, 255).round().astype(np.uint8)

    def heatmap_background(self, state: Any) -> np.ndarray:
        """The level's map (the player's level in Craftax), one pixel per block, in a fixed palette of block types."""
        blocks = np.asarray(state.map)
        if blocks.ndim == 3:
            blocks = blocks[int(np.asarray(getattr(state, "player_level", 0)))]
        palette = (np.random.default_rng(7).integers(40, 230, (int(blocks.max()) + 1, 3))).astype(np.uint8)
        return palette[blocks.astype(np.int64)]
