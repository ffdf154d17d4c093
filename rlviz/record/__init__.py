"""Recording, by what is recorded: one env (:class:`RecordEpisode`, a ``RecordVideo`` drop-in with internals, in
:mod:`.record_episode`; :func:`run_episode`), a vector env (:class:`RecordVectorEpisode`, :mod:`.vector`), many agents
(:mod:`.agents`: PettingZoo's :class:`RecordParallelEpisode` and :class:`RecordAECEpisode`, SuperSuit's
:class:`RecordSuperSuitGame`), and the torch-free core they build on (:mod:`.episode_video`: :class:`EpisodeVideo`,
:class:`RecordOptions`). Every recorder is importable from here; the vector and multi-agent ones load on first use
(PettingZoo only with them). Importing it loads no torch, matplotlib or ffmpeg."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ..episode.result import EpisodeResult
from .episode import find_recorder, play_actions, run_episode
from .episode_video import EpisodeVideo, RecordOptions, VideoLabels
from .internals import Annotations, compute_internals, save_episode_data
from .record_episode import RecordEpisode, RenderModeError, capped_cubic_video_schedule

#: the recorders loaded on first use -> their module
_EXPORTS = {"RecordVectorEpisode": "vector", "RecordParallelEpisode": "agents.pettingzoo",
            "RecordAECEpisode": "agents.pettingzoo", "RecordSuperSuitGame": "agents.supersuit",
            "AgentsOptions": "agents.video", "play_agents": "agents.play"}

__all__ = ["Annotations", "EpisodeVideo", "RecordOptions", "VideoLabels", "find_recorder", "save_episode_data", "EpisodeResult",
           "RecordEpisode", "RenderModeError", "capped_cubic_video_schedule", "compute_internals", "run_episode",
           "play_actions", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .agents.pettingzoo import RecordAECEpisode as RecordAECEpisode
    from .agents.pettingzoo import RecordParallelEpisode as RecordParallelEpisode
    from .agents.play import play_agents as play_agents
    from .agents.supersuit import RecordSuperSuitGame as RecordSuperSuitGame
    from .agents.video import AgentsOptions as AgentsOptions
    from .vector import RecordVectorEpisode as RecordVectorEpisode
