"""Training-time hooks: :func:`log_episode` for hand-written loops, ``RlvizCallback`` for Stable-Baselines3.

``RlvizCallback`` and ``VecRecordEpisode`` (``rlviz.integrations.sb3``) need ``pip install "rlviz[sb3]"`` and are imported only when used.
"""

from __future__ import annotations

from .loop import LogOptions, episode_scalars, log_episode

__all__ = ["log_episode", "LogOptions", "episode_scalars", "RlvizCallback", "VecRecordEpisode"]


def __getattr__(name: str):
    if name in ("RlvizCallback", "VecRecordEpisode"):
        import importlib

        return getattr(importlib.import_module(".sb3", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
