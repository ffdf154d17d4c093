"""Recording: the :class:`RecordEpisode` wrapper (a ``RecordVideo`` drop-in with internals), :func:`run_episode`,
and the torch-free core both recorders build on (:mod:`.frames`: :class:`EpisodeVideo`, :class:`RecordOptions`).
Importing it loads no torch, matplotlib or ffmpeg."""

from __future__ import annotations

from ..episode.result import EpisodeResult
from .episode import find_recorder, play_actions, run_episode
from .frames import EpisodeVideo, RecordOptions, VideoLabels
from .internals import Annotations, compute_internals, save_episode_data
from .wrapper import RecordEpisode, RenderModeError, capped_cubic_video_schedule

__all__ = ["Annotations", "EpisodeVideo", "RecordOptions", "VideoLabels", "find_recorder", "save_episode_data", "EpisodeResult",
           "RecordEpisode", "RenderModeError", "capped_cubic_video_schedule", "compute_internals", "run_episode",
           "play_actions"]
