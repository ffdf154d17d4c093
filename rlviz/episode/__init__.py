"""What passes between the stages about one episode: :class:`EpisodeTrace` (what happened, disk-backed),
:class:`EpisodeInternals` (what the agent thought), and the one return-to-go computation."""

from __future__ import annotations

from .result import EpisodeResult
from .trace import EpisodeInternals, EpisodeTrace, Spool, SpoolArray, returns_to_go

__all__ = ["EpisodeResult", "EpisodeInternals", "EpisodeTrace", "Spool", "SpoolArray", "returns_to_go"]
