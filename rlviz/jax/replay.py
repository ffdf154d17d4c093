"""One episode of the JAX engine replayed alone for its video: the rollout's scan (:mod:`rlviz.jax.scan`) with batch
1 and the episode's own key, keeping each step's env state, observation and policy output. The frames are drawn on the
host from the kept states (``env.frame``); the saliency of every step is one batched call of
:mod:`rlviz.jax.saliency` on the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["Replayed", "replay_jax_episode", "saliency_maps"]


@dataclass
class Replayed:
    """A replayed episode: ``states`` (numpy pytree, [T+1, ...]: before each step and after the last),
    ``observations`` [T+1, *obs], ``actions`` [T], ``rewards`` float32 [T], ``outputs`` (the PolicyOut's leaves as
    numpy [T+1, ...]), how it ended."""

    states: Any
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    outputs: Any
    terminated: bool
    truncated: bool

    @property
    def length(self) -> int:
        return int(len(self.actions))


def replay_jax_episode(engine: Any, seed: int) -> Replayed:
    """The episode of per-episode ``seed`` (``episodes.csv``'s seed), replayed by ``engine`` alone (batch 1)."""
    import jax

    ys, carry = engine.run_batch(np.array([seed], np.uint32), keep=True)
    alive = ys["alive"][:, 0]
    n = int(np.count_nonzero(alive))
    if n == 0:
        raise UsageError(f"Replaying the episode of seed {seed} gave no step.")
    take = lambda a: np.asarray(a)[:n, 0]  # noqa: E731
    from .scan import host_state

    last_state = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], jax.device_get(host_state(carry.state)))
    last_obs = np.asarray(jax.device_get(carry.obs))[0]
    states = jax.tree_util.tree_map(lambda a, b: np.concatenate([take(a), b[None]]), ys["state"], last_state)
    observations = np.concatenate([take(ys["obs"]), last_obs[None]]).astype(np.float32)
    policy = engine.policy
    obs = jax.numpy.asarray(last_obs, jax.numpy.float32)
    if getattr(policy, "recurrent", False):  # the memory the scan carried to the last observation
        memory = jax.tree_util.tree_map(lambda a: a[0], carry.memory)
        _, last_out = engine.jitted("apply_recurrent", policy.apply_recurrent)(policy.params, memory, obs,
                                                                               jax.numpy.asarray(False))
        last_out = jax.device_get(last_out)
    else:
        last_out = jax.device_get(engine.jitted("apply", policy.apply)(policy.params, obs))
    outputs = jax.tree_util.tree_map(lambda a, b: np.concatenate([take(a), np.asarray(b)[None]]), ys["out"], last_out)
    return Replayed(states, observations, take(ys["action"]), take(ys["reward"]).astype(np.float32), outputs,
                    bool(ys["terminated"][n - 1, 0]), bool(ys["truncated"][n - 1, 0]))


def saliency_maps(method: str, policy: Any, observations: np.ndarray) -> np.ndarray:
    """Per-step saliency of ``observations`` [T+1, *obs] by ``rlviz.jax.saliency.<method>(policy, params, obs)``
    (an array shaped like the observations), reduced to what the video draws: images [T+1, H, W] (the channels'
    largest magnitude), grids [T+1, H, W], vectors [T+1, D]; one brightness scale per episode. The batch is padded
    (the last observation repeated) to a power of two rows, so that episodes of other lengths reuse its compilation."""
    import importlib

    from ..explain.scale import normalise_episode

    try:
        module = importlib.import_module("rlviz.jax.saliency")
    except ImportError as exc:
        raise UsageError(f"--saliency {method} for a flax policy needs rlviz.jax.saliency ({exc}).") from None
    fn = getattr(module, method, None)
    if fn is None:
        raise UsageError(f"--saliency {method}: rlviz.jax.saliency has no {method!r}; expected gradient, smoothgrad or "
                         "perturbation.")
    rows = len(observations)
    padded = max(8, 1 << (rows - 1).bit_length())  # a few batch sizes: each compiled once (rlviz.jax.saliency)
    batch = np.concatenate([observations, np.repeat(observations[-1:], padded - rows, axis=0)])
    raw = np.abs(np.asarray(fn(policy, policy.params, batch), dtype=np.float32))[:rows]
    if raw.shape != observations.shape:
        raise UsageError(f"rlviz.jax.saliency.{method} returned shape {raw.shape}; expected the observations' "
                         f"{observations.shape}.")
    if raw.ndim == 4:
        raw = raw.max(axis=-1)
    elif raw.ndim > 4:
        raw = raw.reshape(raw.shape[0], -1)
    return normalise_episode(raw)
