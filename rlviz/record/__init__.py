"""Recording: the :class:`RecordEpisode` wrapper and :func:`run_episode`."""

from __future__ import annotations

from .wrapper import EpisodeResult, RecordEpisode, compute_internals, run_episode

__all__ = ["EpisodeResult", "RecordEpisode", "compute_internals", "run_episode"]
