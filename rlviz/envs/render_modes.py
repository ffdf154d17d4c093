"""Whether an env can give the frames rlviz draws: the render modes it declares, checked before it is made (a
registered id's env class) or once it is (an env object). Light on purpose: the recorders import it, not the recipes."""

from __future__ import annotations

import gymnasium as gym

from ..errors import EnvError

__all__ = ["check_render_mode"]


def _render_modes(env_or_id) -> list | None:
    """The render modes an env (or, before making it, a registered id's env class) declares; None if unknown."""
    if isinstance(env_or_id, str):
        try:
            entry = gym.spec(env_or_id).entry_point
            creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        except (gym.error.Error, ImportError, AttributeError, ValueError):
            return None  # gym.make says what is wrong
        metadata = getattr(creator, "metadata", None)
    else:
        metadata = getattr(env_or_id, "metadata", None)
    return list(metadata.get("render_modes") or []) if isinstance(metadata, dict) else None


def check_render_mode(env_or_id, render_mode: str | None = "rgb_array") -> None:
    """Refuse an env (or a registered env id, before making it) that does not list ``render_mode`` in its
    ``metadata["render_modes"]``: gymnasium's ``make`` only warns, then the env fails in ``__init__`` or on its
    first ``render()`` with an AssertionError."""
    modes = None if render_mode is None else _render_modes(env_or_id)
    if modes is not None and render_mode not in modes:
        spec = None if isinstance(env_or_id, str) else getattr(env_or_id, "spec", None)
        name = env_or_id if isinstance(env_or_id, str) else (
            spec.id if spec is not None else type(getattr(env_or_id, "unwrapped", env_or_id)).__name__)
        raise EnvError(
            f"Env {name!r} cannot render frames: its render modes are {modes}, and rlviz draws videos and heatmaps "
            f"from render_mode={render_mode!r} frames. Use an env that supports render_mode={render_mode!r}."
        )
