"""What passes between the stages about one episode: :class:`EpisodeTrace` (what happened, disk-backed),
:class:`EpisodeInternals` (what the agent thought), and the one return-to-go computation."""

from __future__ import annotations

from .trace import EpisodeInternals, EpisodeTrace, Spool, SpoolArray, returns_to_go

__all__ = ["EpisodeInternals", "EpisodeTrace", "Spool", "SpoolArray", "returns_to_go"]
