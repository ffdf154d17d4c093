"""Media files: the H.264 writer and decoder (our own ffmpeg processes), and the one atomic-write helper."""

from __future__ import annotations

from .atomic import AtomicFile, atomic_path, atomic_write, temp_name
from .decode import VideoFrames, VideoInfo, probe_video, read_video, read_video_frames
from .video import Encoding, VideoWriter, concat_videos

__all__ = [
    "AtomicFile", "Encoding", "VideoFrames", "VideoInfo", "VideoWriter", "atomic_path", "atomic_write", "concat_videos", "probe_video",
    "read_video", "read_video_frames", "temp_name",
]  # fmt: skip
