"""Recording: the :class:`RecordEpisode` wrapper (a ``RecordVideo`` drop-in with internals) and :func:`run_episode`."""

from __future__ import annotations

from ..episode.result import EpisodeResult
from .episode import find_recorder, run_episode
from .internals import Annotations, compute_internals, save_episode_data
from .wrapper import RecordEpisode, RenderModeError, capped_cubic_video_schedule

__all__ = ["Annotations", "find_recorder", "save_episode_data", "EpisodeResult", "RecordEpisode", "RenderModeError",
           "capped_cubic_video_schedule", "compute_internals", "run_episode"]
