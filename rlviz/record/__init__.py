"""Recording: the :class:`RecordEpisode` wrapper and :func:`run_episode`."""

from __future__ import annotations

from ..episode.result import EpisodeResult
from .episode import find_recorder, run_episode
from .wrapper import RecordEpisode, compute_internals, save_episode_data

__all__ = ["find_recorder", "save_episode_data", "EpisodeResult", "RecordEpisode", "compute_internals", "run_episode"]
