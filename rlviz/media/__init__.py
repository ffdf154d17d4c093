"""Media files: the H.264 writer and decoder (our own ffmpeg process), and the one atomic-write helper."""

from __future__ import annotations

from .atomic import atomic_path
from .video import VideoInfo, VideoWriter, probe_video, read_video

__all__ = ["VideoInfo", "VideoWriter", "atomic_path", "probe_video", "read_video"]
