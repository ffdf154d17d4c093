"""Decoding videos back: our own ffmpeg process writing raw rgb24 frames to a pipe, read one at a time.

:func:`probe_video` tells what a file holds (codec, pixel format, size, exact frame count, fps),
:func:`read_video` streams every frame, and :func:`read_video_frames` returns a clip subsampled in
time and downscaled by ffmpeg itself (select/scale filters), with memory bounded whatever the length
(the TensorBoard sink makes GIFs from it).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError, VideoError
from .ffmpeg import ErrorLog, ffmpeg_exe, stop

__all__ = ["VideoInfo", "probe_video", "read_video", "VideoFrames", "read_video_frames"]


@dataclass(frozen=True)
class VideoInfo:
    """What a video file holds.

    codec:  e.g. "h264";  pix_fmt: e.g. "yuv420p";  width, height: pixels;
    num_frames: decoded frame count (-1 when not counted);  fps: frames per second (0.0 when unknown);
    duration: seconds the container states (0.0 when unknown).
    """

    codec: str
    pix_fmt: str
    width: int
    height: int
    num_frames: int
    fps: float
    duration: float = 0.0


def _existing(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"No video file at {p}; expected an MP4 file (e.g. one rlviz wrote). Check the path.")
    return p


def _split_fields(text: str) -> list[str]:
    """Split ffmpeg's stream description at commas outside parentheses."""
    fields, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            fields.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*fields, cur.strip()]


def _parse_header(p: Path, stderr: str, num_frames: int) -> VideoInfo:
    """The first video stream of ffmpeg's input description (``Stream #0:0...: Video: h264 (High), yuv420p(...),
    64x48, ..., 25 fps, ...``) and the container's ``Duration``."""
    m = re.search(r"^\s*Stream #0:\d+\S*: Video: (.*)$", stderr, re.M)
    if m is None:
        last = stderr.strip().splitlines()[-1:] or ["no output"]
        raise VideoError(f"Cannot read {p} as a video: ffmpeg found no video stream ({last[0].strip()}).")
    fields = _split_fields(m.group(1))
    size = next((re.match(r"(\d+)x(\d+)", f) for f in fields if re.match(r"\d+x\d+", f)), None)
    fps = next((re.match(r"([\d.]+)(k?) (?:fps|tbr)", f) for f in fields if re.match(r"[\d.]+k? (?:fps|tbr)", f)), None)
    dur = re.search(r"Duration: (\d+):(\d+):([\d.]+)", stderr)
    if size is None:
        raise VideoError(f"Cannot read {p} as a video: no frame size in ffmpeg's description {m.group(1)!r}.")
    return VideoInfo(
        codec=fields[0].split()[0],
        pix_fmt=re.split(r"[(\s]", fields[1], maxsplit=1)[0] if len(fields) > 1 else "",
        width=int(size.group(1)),
        height=int(size.group(2)),
        num_frames=num_frames,
        fps=float(fps.group(1)) * (1000 if fps.group(2) else 1) if fps else 0.0,
        duration=int(dur.group(1)) * 3600 + int(dur.group(2)) * 60 + float(dur.group(3)) if dur else 0.0,
    )


def probe_video(path: str | os.PathLike, *, count: bool = True) -> VideoInfo:
    """Codec, pixel format, size, exact frame count (decodes the stream; ``count=False`` skips it and
    gives -1) and fps of a video file."""
    p = _existing(path)
    cmd = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(p)]
    if count:
        cmd += ["-map", "0:v:0", "-f", "null", "-progress", "pipe:1", "-nostats", "-"]
    run = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    if count and run.returncode != 0:
        tail = " | ".join(run.stderr.strip().splitlines()[-3:])
        raise VideoError(f"Cannot count the frames of {p}: ffmpeg said: {tail}")
    frames = [int(n) for n in re.findall(r"^frame=(\d+)$", run.stdout, re.M)]
    return _parse_header(p, run.stderr, frames[-1] if frames else (0 if count else -1))


def _decode(p: Path, size: tuple[int, int], filters: list[str]) -> Iterator[np.ndarray]:
    """Yield ``uint8 [h, w, 3]`` frames of ``p`` after the ``-vf`` ``filters`` (output ``size`` = (w, h))."""
    w, h = size
    vf = ["-vf", ",".join(filters), "-fps_mode", "passthrough"] if filters else []
    cmd = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-i", str(p), "-map", "0:v:0", *vf,
           "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    log = ErrorLog()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log.file)
    nbytes = w * h * 3
    try:
        while True:
            buf = proc.stdout.read(nbytes)  # type: ignore[union-attr]  # stdout=PIPE: never None
            if len(buf) < nbytes:
                break
            yield np.frombuffer(buf, dtype=np.uint8).reshape(h, w, 3)
        rc = proc.wait()
        if rc != 0 or buf:
            raise VideoError(f"ffmpeg failed while decoding {p} (exit status {rc}): {log.summary()}")
    finally:  # also when the caller stops early (generator closed) or is interrupted
        stop(proc)
        log.close()


def read_video(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Decode a video: yields ``uint8 [height, width, 3]`` RGB frames, one at a time."""
    p = _existing(path)
    info = probe_video(p, count=False)
    yield from _decode(p, (info.width, info.height), [])


@dataclass(frozen=True)
class VideoFrames:
    """Frames read back from a video, subsampled in time and downscaled.

    frames:     uint8 [N, h, w, 3] RGB, N <= max_frames
    stride:     every ``stride``-th source frame was kept (frame k is source frame k * stride)
    source_fps: the video's frame rate (0.0 when ffmpeg could not tell)
    source_size: (width, height) of the video
    fps:        playback rate of the kept frames, ``source_fps / stride``
    """

    frames: np.ndarray
    stride: int
    source_fps: float
    source_size: tuple[int, int]
    fps: float


def _fit(size: tuple[int, int], max_size: int | None) -> tuple[int, int]:
    w, h = size
    if not max_size or max(w, h) <= max_size:
        return w, h
    scale = max_size / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def read_video_frames(
    path: str | os.PathLike,
    *,
    max_size: int | None = 320,
    max_frames: int = 200,
    max_fps: float | None = 15.0,
    fps: float | None = None,
) -> VideoFrames:
    """Decode ``path`` keeping every ``stride``-th frame, downscaled so the longest side is ``max_size``.

    The stride is chosen so the kept frames play at most ``max_fps`` and number at most
    ``max_frames`` (from the container's duration; if that estimate is short, kept frames are
    halved on the fly, so memory stays bounded whatever the episode length). ffmpeg does the
    selection and scaling, so long full-size videos are never piped whole. ``fps`` overrides a
    frame rate the container does not state.
    """
    p = _existing(path)
    if max_frames < 1:
        raise UsageError(f"max_frames={max_frames}; expected at least 1.")
    info = probe_video(p, count=False)
    src_fps = info.fps or float(fps or 0.0)
    src_size = (info.width, info.height)
    stride = 1
    if max_fps and src_fps > max_fps:
        stride = math.ceil(src_fps / max_fps - 1e-9)
    est_frames = info.duration * src_fps
    if est_frames > 0:
        stride = max(stride, math.ceil(est_frames / max_frames - 1e-9))
    out_size = _fit(src_size, max_size)
    filters = [rf"select=not(mod(n\,{stride}))"] if stride > 1 else []
    if out_size != src_size:
        filters.append(f"scale={out_size[0]}:{out_size[1]}:flags=area")
    kept: list[np.ndarray] = []
    keep_every = 1  # further decimation of what ffmpeg selected, when the duration estimate was short
    for i, frame in enumerate(_decode(p, out_size, filters)):
        if i % keep_every:
            continue
        kept.append(frame)
        if len(kept) > max_frames:
            kept = kept[::2]
            keep_every *= 2
    if not kept:
        raise VideoError(f"{p} holds no video frames.")
    stride *= keep_every
    return VideoFrames(np.stack(kept), stride, src_fps, src_size, src_fps / stride if src_fps else 0.0)
