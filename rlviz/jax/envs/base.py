"""What every JAX env family's wrapper shares: the :class:`~rlviz.jax.contract.JaxEnv` attributes, the heatmap's
plane (``object_names``, ``object_grid``: the objects' (x, y) are pixels of an ``H x W`` image, ``heatmap_background``
draws it) and the host-side helpers (a state's numpy leaves, one step of a stacked state)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UsageError

__all__ = ["JaxEnvBase", "missing_family", "state_at", "split_kwargs"]


def missing_family(family: str, package: str) -> UsageError:
    """The one line a missing family package gets."""
    return UsageError(f"{family}: env ids need the {package!r} package, which is not installed; "
                      f'pip install "rlviz[jax]" (or pip install {package}).')


def state_at(states: Any, t: int) -> Any:
    """Step ``t`` of a state pytree stacked over steps (numpy leaves [T, ...] -> [...])."""
    import jax

    return jax.tree_util.tree_map(lambda a: a[t], states)


def split_kwargs(params: Any, kwargs: dict) -> tuple[Any, dict]:
    """``--env-kwargs`` shared out: the keys that are fields of the env's params dataclass replace them; the rest go to
    the env's constructor."""
    fields = set(getattr(params, "__dataclass_fields__", {}) or {})
    given = {k: v for k, v in kwargs.items() if k in fields}
    rest = {k: v for k, v in kwargs.items() if k not in fields}
    return (params.replace(**given) if given else params), rest


class JaxEnvBase:
    """Attributes of :class:`~rlviz.jax.contract.JaxEnv` plus the heatmap plane and the video's frame rate.

    object_names: the heatmap's objects (empty: the family has no positions); object_grid: (H, W) of the plane their
    (x, y) are pixels of; fps: the videos' frame rate; squash_actions: Box actions are clipped to [low, high]."""

    env_id: str = ""
    family: str = ""
    params: Any = None
    obs_shape: tuple[int, ...] = ()
    obs_dtype: Any = np.float32
    action_names: tuple[str, ...] = ()
    discrete: bool = True
    max_steps: int = 1000
    object_names: tuple[str, ...] = ()
    object_grid: tuple[int, int] | None = None
    fps: float = 30.0
    action_low: Any = None
    action_high: Any = None

    def objects(self, state: Any) -> Any:
        """float32 [K, 2] (x, y) in the :attr:`object_grid`'s pixels; None: no heatmap for this env."""
        return None

    def frame(self, state: Any) -> np.ndarray:  # pragma: no cover - each family draws its own
        raise NotImplementedError

    def frames_from_observations(self, observations: np.ndarray) -> np.ndarray | None:
        """uint8 [L, H, W, 3]: the frames of L observations alone (no env state: a training loop's batch), or None
        when the family cannot draw them from its observations. Here: pixel observations ([L, H, W, 3], uint8 or
        floats in [0, 1]); a family with other drawable observations overrides this."""
        obs = np.asarray(observations)
        if obs.ndim == 4 and obs.shape[-1] == 3:
            from ...envs.frames import to_rgb_frame

            return np.stack([to_rgb_frame(o) for o in obs])
        return None

    def heatmap_background(self, state: Any) -> np.ndarray:
        """uint8 [H, W, 3] of :attr:`object_grid`'s size to draw the heatmap over: the frame, resized by nearest
        pixels when its size differs."""
        frame = np.asarray(self.frame(state))
        h, w = self.object_grid or frame.shape[:2]
        if frame.shape[:2] == (h, w):
            return frame
        rows = (np.arange(h) * frame.shape[0] // h).clip(0, frame.shape[0] - 1)
        cols = (np.arange(w) * frame.shape[1] // w).clip(0, frame.shape[1] - 1)
        return np.ascontiguousarray(frame[rows][:, cols])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.env_id}>"
