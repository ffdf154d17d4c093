"""An episode's video: :class:`~rlviz.draw.compose.Compositor` frames streamed to an H.264 MP4 one at a time (no
episode of frames is held in memory), and the timing rule that makes short episodes last long enough to watch."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..episode.trace import EpisodeInternals, EpisodeTrace
from ..media.video import VideoWriter
from ..progress import bar
from .compose import ComposeOptions, Compositor

__all__ = ["write_episode_video", "video_timing"]


def video_timing(num_frames: int, fps: float, min_seconds: float = 0.0) -> tuple[float, int]:
    """(frame rate, extra frames) of a video of ``num_frames`` frames (one per step) meant to last ``min_seconds``.

    A video long enough plays at ``fps``. A shorter one plays slower, at ``num_frames / min_seconds`` but no
    slower than ``fps / 4``, and holds its last frame for the rest: frame t is still step t, at the returned rate.
    """
    fps = float(fps)
    if min_seconds <= 0 or num_frames / fps >= min_seconds:
        return fps, 0
    rate = max(num_frames / float(min_seconds), fps / 4.0)
    return rate, max(0, math.ceil(min_seconds * rate - 1e-6) - int(num_frames))


def write_episode_video(
    trace: EpisodeTrace,
    internals: EpisodeInternals,
    path: str | os.PathLike,
    options: ComposeOptions | None = None,
    fps: float | None = None,
    preset: str = "veryfast",
    crf: int = 23,
) -> Path:
    """Render frames 0..T of the episode and stream them to an H.264 MP4 at ``path``. Returns the path.

    fps defaults to ``trace.fps`` (30 when unset); preset and crf go to libx264 (see VideoWriter). With
    ``options.min_seconds`` a short episode plays slower and holds its last frame (:func:`video_timing`)."""
    comp = Compositor(trace, internals, options)
    rate, held = video_timing(comp.T + 1, float(fps or trace.fps or 30.0), comp.options.min_seconds)
    buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
    with VideoWriter(path, rate, comp.size, preset=preset, crf=crf) as writer, \
            bar(comp.T + 1, "encode", unit="frame") as progress:
        for t in range(comp.T + 1):
            writer.write(comp.render(t, out=buf))
            progress.update(1)
        for _ in range(held):
            writer.write(buf)
    return Path(path)
