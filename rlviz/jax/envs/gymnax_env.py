"""``gymnax:<id>``: gymnax's envs (classic control, MinAtar, bsuite, misc), stepped without gymnax's auto-reset
(``step_env``: the engine ends each episode itself). Frames on the host: MinAtar as the minatar package draws its
``rgb_array`` frames (its channels in the cubehelix palette, one pixel per cell, so a gymnax video looks like a
gymnasium MinAtar one), classic control by gymnasium's own renderer with its state set, grid observations (bsuite,
misc) as their grid. Heatmap objects: MinAtar Breakout's ball and paddle (``ball_x``/``ball_y``/``pos``), bsuite
Catch's ball and paddle, in the frame's cells."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ...envs.frames import to_rgb_frame
from ...envs.minatar_import import cubehelix_colors
from ...errors import UsageError
from .base import JaxEnvBase, missing_family, split_kwargs

__all__ = ["GymnaxEnv", "minatar_frames"]

_MINATAR_ACTIONS = ("NOOP", "LEFT", "UP", "RIGHT", "DOWN", "FIRE")
#: classic-control envs gymnasium draws, with the state vector gymnax keeps (gymnasium's ``env.state`` order)
_CLASSIC = {
    "CartPole-v1": ("CartPole-v1", ("x", "x_dot", "theta", "theta_dot")),
    "Acrobot-v1": ("Acrobot-v1", ("joint_angle1", "joint_angle2", "velocity_1", "velocity_2")),
    "MountainCar-v0": ("MountainCar-v0", ("position", "velocity")),
    "MountainCarContinuous-v0": ("MountainCarContinuous-v0", ("position", "velocity")),
    "Pendulum-v1": ("Pendulum-v1", ("theta", "theta_dot")),
}
_ACTION_NAMES = {"CartPole-v1": ("LEFT", "RIGHT"), "Acrobot-v1": ("-1", "0", "+1"),
                 "MountainCar-v0": ("LEFT", "NOOP", "RIGHT"), "Catch-bsuite": ("LEFT", "STAY", "RIGHT")}


class GymnaxEnv(JaxEnvBase):
    family = "gymnax"

    def __init__(self, name: str, env_kwargs: dict | None = None):
        try:
            import gymnax
        except ImportError:
            raise missing_family("gymnax", "gymnax") from None
        if name not in gymnax.registered_envs:
            from ...errors import did_you_mean

            raise UsageError(f"gymnax:{name} is not a gymnax env.{did_you_mean(name, gymnax.registered_envs)} "
                             f"Known: {', '.join(gymnax.registered_envs)}.")
        kwargs = dict(env_kwargs or {})
        env, params = gymnax.make(name)
        params, rest = split_kwargs(params, kwargs)
        if rest:
            try:
                env, _ = gymnax.make(name, **rest)
            except TypeError as exc:
                raise UsageError(f"--env-kwargs {rest} for gymnax:{name}: {exc}; expected fields of its params "
                                 f"({', '.join(getattr(params, '__dataclass_fields__', {}))}) or its "
                                 "constructor's arguments.") from None
        self.name, self.env, self.params = name, env, params
        self.env_id = f"gymnax:{name}"
        space = env.action_space(params)
        obs_space = env.observation_space(params)
        self.obs_shape = tuple(int(d) for d in obs_space.shape)
        self.discrete = hasattr(space, "n")
        if self.discrete:
            n = int(space.n)
            self.action_names = _names(name, env, n)
        else:
            shape = tuple(getattr(space, "shape", ()) or (1,))
            d = int(np.prod(shape))
            self.action_names = tuple(f"a{i}" for i in range(d)) if d > 1 else ("force",)
            self.action_low = np.broadcast_to(np.asarray(space.low, np.float32), (d,)).copy()
            self.action_high = np.broadcast_to(np.asarray(space.high, np.float32), (d,)).copy()
        self.max_steps = int(getattr(params, "max_steps_in_episode", 1000))
        self.minatar = name.endswith("-MinAtar")
        if name == "Breakout-MinAtar":
            self.object_names, self.object_grid = ("ball", "paddle"), (10, 10)
        elif name == "Catch-bsuite":
            self.object_names, self.object_grid = ("ball", "paddle"), (self.obs_shape[0], self.obs_shape[1])
        self._get_obs: Any = None
        self._gym: Any = None
        self.fps = 15.0 if self.minatar else 30.0

    # -- pure, traced by the engine -----------------------------------------------------------
    def reset(self, key: Any, params: Any) -> tuple[Any, Any]:
        return self.env.reset_env(key, params)

    def step(self, key: Any, state: Any, action: Any, params: Any) -> tuple[Any, Any, Any, Any, Any]:
        import jax.numpy as jnp

        obs, state2, reward, done, _ = self.env.step_env(key, state, action, params)
        truncated = jnp.logical_and(self.env.is_truncated(state2, params), jnp.logical_not(self._terminal(state2, done, params)))
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        return obs, state2, jnp.asarray(reward, jnp.float32), terminated, truncated

    def _terminal(self, state: Any, done: Any, params: Any) -> Any:
        """Ended by the game itself (not by the time limit): gymnax's done is either; its terminal check without the
        clock, where the env has one (``state.terminal``), else done before the limit."""
        import jax.numpy as jnp

        if hasattr(state, "terminal"):
            return jnp.asarray(state.terminal, bool)
        return jnp.logical_and(done, jnp.logical_not(self.env.is_truncated(state, params)))

    def objects(self, state: Any) -> Any:
        import jax.numpy as jnp

        if self.name == "Breakout-MinAtar":
            return jnp.stack([jnp.stack([state.ball_x, state.ball_y]),
                              jnp.stack([state.pos, jnp.asarray(9, jnp.asarray(state.pos).dtype)])]).astype(jnp.float32)
        if self.name == "Catch-bsuite":
            return jnp.stack([jnp.stack([state.ball_x, state.ball_y]),
                              jnp.stack([state.paddle_x, state.paddle_y])]).astype(jnp.float32)
        return None

    # -- on the host ----------------------------------------------------------------------------
    def observation(self, state: Any) -> np.ndarray:
        """The observation of ``state`` (numpy leaves), computed on the host's CPU."""
        import jax

        if self._get_obs is None:
            self._get_obs = jax.jit(lambda s: self.env.get_obs(s, self.params))
        return np.asarray(self._get_obs(state))

    def frame(self, state: Any) -> np.ndarray:
        if self.minatar:
            return minatar_frames(np.asarray(self.observation(state))[None])[0]  # the game's state channels
        if self.name in _CLASSIC:
            _, fields = _CLASSIC[self.name]
            return self._classic_frame(np.array([float(np.asarray(getattr(state, f))) for f in fields], np.float64))
        return _grid_frame(self.observation(state))

    def frames_from_observations(self, observations: np.ndarray) -> np.ndarray | None:
        """uint8 [L, H, W, 3] from L observations alone: MinAtar's channels (the frames :meth:`frame` draws), classic
        control's state rebuilt from the observation (gymnasium's renderer), grids (bsuite, misc) as grids."""
        obs = np.asarray(observations)
        if self.minatar:
            return minatar_frames(obs.reshape(len(obs), *self.obs_shape))
        if self.name in _CLASSIC:
            rebuild = _STATE_OF_OBS[self.name]
            return np.stack([self._classic_frame(rebuild(np.asarray(o, np.float64).reshape(-1))) for o in obs])
        return np.stack([_grid_frame(o.reshape(self.obs_shape)) for o in obs])

    def _classic_frame(self, values: np.ndarray) -> np.ndarray:
        """gymnasium's drawing of the state vector ``values`` (gymnasium's ``env.state`` order)."""
        import gymnasium as gym

        gym_id, _ = _CLASSIC[self.name]
        with _DRAWING:  # (one thread at a time: the env's state is set, then drawn, and pygame is not thread-safe)
            if self._gym is None:
                self._gym = gym.make(gym_id, render_mode="rgb_array").unwrapped
                self._gym.reset(seed=0)
            self._gym.state = np.asarray(values, np.float64)
            if self.name == "Pendulum-v1":
                self._gym.last_u = None
            return to_rgb_frame(self._gym.render())


#: classic control frames are drawn by one thread at a time (a recorder's thread and the loop's callback both draw:
#: pygame's surfaces and the env's state are shared)
_DRAWING = threading.Lock()
#: classic control: the state vector (gymnasium's ``env.state`` order) from gymnax's observation
_STATE_OF_OBS = {
    "CartPole-v1": lambda o: o[:4],
    "MountainCar-v0": lambda o: o[:2],
    "MountainCarContinuous-v0": lambda o: o[:2],
    "Acrobot-v1": lambda o: np.array([np.arctan2(o[1], o[0]), np.arctan2(o[3], o[2]), o[4], o[5]]),
    "Pendulum-v1": lambda o: np.array([np.arctan2(o[1], o[0]), o[2]]),
}


def minatar_frames(channels: np.ndarray) -> np.ndarray:
    """uint8 [L, 10, 10, 3] from MinAtar observations [L, 10, 10, C] (bool or 0/1): as the minatar package draws its
    ``rgb_array`` frames, each cell the colour of its last set channel in the cubehelix palette, empty cells black."""
    on = np.asarray(channels).astype(bool)
    n = on.shape[-1]
    palette = to_rgb_frame(np.array([[(0.0, 0.0, 0.0)] + cubehelix_colors(n)]))[0]  # uint8 [C + 1, 3]
    return palette[np.amax(on * np.arange(1, n + 1), axis=-1)]


def _names(name: str, env: Any, n: int) -> tuple[str, ...]:
    if name.endswith("-MinAtar"):
        action_set = np.asarray(getattr(env, "action_set", np.arange(n)))
        if len(action_set) == n:
            return tuple(_MINATAR_ACTIONS[int(a)] if 0 <= int(a) < 6 else str(int(a)) for a in action_set)
    known = _ACTION_NAMES.get(name)
    return known if known is not None and len(known) == n else tuple(str(i) for i in range(n))


def _grid_frame(obs: np.ndarray) -> np.ndarray:
    """A grid observation (bsuite, misc) as an image: one pixel per cell (channels: their max), greys by value; a
    vector as one row of cells."""
    a = np.asarray(obs, dtype=np.float64)
    if a.ndim == 3:
        a = a.max(axis=-1)
    elif a.ndim != 2:
        a = a.reshape(1, -1)
    lo, hi = float(np.min(a)), float(np.max(a))
    grey = np.zeros_like(a) if hi <= lo else (a - lo) / (hi - lo)
    return np.repeat((grey * 255).round().astype(np.uint8)[..., None], 3, axis=-1)
