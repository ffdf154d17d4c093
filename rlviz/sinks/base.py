"""The :class:`Sink` interface and the helpers every sink shares.

A sink receives what rlviz produced for one evaluation: the episode video (always an H.264 MP4
file that rlviz already encoded), images (heatmaps), scalar statistics and small tables, each
at a training ``step``. Sinks that need pixels read them back from the MP4
(:func:`read_video_frames`: downscaled and subsampled in time by ffmpeg, memory bounded).
"""

from __future__ import annotations

import abc
import logging
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, VideoError

__all__ = [
    "Sink",
    "as_sinks",
    "check_video_path",
    "load_image",
    "scalar_items",
    "VideoFrames",
    "read_video_frames",
]


class Sink(abc.ABC):
    """Where logged episodes go (a folder, a W&B run, a TensorBoard log dir).

    Steps are the caller's training steps (e.g. environment steps); names use ``/`` to group
    (``"eval/episode"``). Use as a context manager, or call :meth:`close`.
    """

    @abc.abstractmethod
    def log_video(self, name: str, path: str | os.PathLike, step: int, *, fps: float, caption: str | None = None):
        """Log the H.264 MP4 at ``path`` (played back at ``fps``) under ``name`` at ``step``."""

    @abc.abstractmethod
    def log_image(self, name: str, image: np.ndarray | str | os.PathLike, step: int):
        """Log an image: ``uint8 [H, W, 3]`` RGB (or [H, W] grey) or the path of a PNG file."""

    @abc.abstractmethod
    def log_scalars(self, scalars: Mapping[str, float], step: int, prefix: str = ""):
        """Log numbers, each under ``prefix + key`` (e.g. ``prefix="eval/"``)."""

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int):
        """Log a small table (e.g. per-episode statistics). The default does nothing."""
        return None

    def log_text(self, name: str, text: str, step: int):
        """Log a short markdown text (e.g. the diagnostics). The default does nothing."""
        return None

    def flush(self) -> None:
        """Make everything logged so far durable (write buffers to disk)."""
        return None

    def close(self) -> None:
        """Flush and release what the sink opened (never what it was handed)."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


def as_sinks(sinks: Sink | Iterable[Sink] | None) -> list[Sink]:
    """None -> [], one sink -> [sink], an iterable of sinks -> a list (checked)."""
    if sinks is None:
        return []
    if isinstance(sinks, Sink):
        return [sinks]
    try:
        out = list(sinks)
    except TypeError:
        raise UsageError(
            f"sinks={sinks!r} is not a Sink or a list of sinks; use e.g. rlviz.sinks.TensorBoardSink(log_dir)."
        ) from None
    for s in out:
        if not isinstance(s, Sink):
            raise UsageError(f"sinks contains {s!r}, which is not an rlviz.sinks.Sink.")
    return out


def check_step(step) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or int(step) < 0:
        raise UsageError(f"step={step!r}; expected a non-negative integer (e.g. the number of environment steps).")
    return int(step)


def check_video_path(path: str | os.PathLike) -> Path:
    """The MP4 to log, checked to exist and be an ``.mp4`` file."""
    p = Path(path)
    if p.suffix.lower() != ".mp4":
        raise UsageError(f"Sinks log H.264 MP4 files written by rlviz; received {p} (suffix {p.suffix!r}).")
    if not p.is_file() or p.stat().st_size == 0:
        raise UsageError(f"No video at {p} (missing or empty); record the episode first.")
    return p


def load_image(image: np.ndarray | str | os.PathLike) -> np.ndarray:
    """An image as contiguous ``uint8 [H, W, 3]``: arrays are checked (grey is repeated, alpha dropped,
    floats in [0, 1] scaled), paths are read with imageio."""
    if isinstance(image, (str, os.PathLike)):
        import imageio.v3 as iio

        p = Path(image)
        if not p.is_file():
            raise UsageError(f"No image file at {p}; pass an existing PNG or a uint8 [H, W, 3] array.")
        image = iio.imread(p)
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        if np.issubdtype(arr.dtype, np.floating) and arr.size and float(np.nanmax(arr)) <= 1.0:
            arr = arr * 255.0
        if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise UsageError(f"Cannot log an image of dtype {arr.dtype}; expected uint8 [H, W, 3].")
        arr = np.clip(np.nan_to_num(arr.astype(np.float64)), 0, 255).round().astype(np.uint8)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.ndim != 3 or arr.shape[-1] not in (3, 4) or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise UsageError(f"Cannot log an image of shape {arr.shape}; expected uint8 [H, W, 3] (RGB) or [H, W].")
    return np.ascontiguousarray(arr[..., :3])


def scalar_items(scalars: Mapping[str, float], prefix: str = "") -> dict[str, float]:
    """``{prefix + key: float(value)}``, rejecting what is not a real number (NaN and inf pass)."""
    if not isinstance(scalars, Mapping):
        raise UsageError(f"log_scalars expects a dict of name -> number; received {type(scalars).__name__}.")
    out: dict[str, float] = {}
    for key, value in scalars.items():
        v = value.item() if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.size == 1) else value
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise UsageError(f"Scalar {key!r} is {value!r} ({type(value).__name__}); expected a real number.")
        out[f"{prefix}{key}"] = float(v)
    return out


@dataclass(frozen=True)
class VideoFrames:
    """Frames read back from an MP4, subsampled in time and downscaled.

    frames:     uint8 [N, h, w, 3] RGB, N <= max_frames
    stride:     every ``stride``-th source frame was kept (frame k is source frame k * stride)
    source_fps: the MP4's frame rate (0.0 when ffmpeg could not tell)
    source_size: (width, height) of the MP4
    fps:        playback rate of the kept frames, ``source_fps / stride``
    """

    frames: np.ndarray
    stride: int
    source_fps: float
    source_size: tuple[int, int]
    fps: float


class _SizeWarningFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "different from the source frame size" not in record.getMessage()


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
    import imageio_ffmpeg

    p = check_video_path(path)
    if max_frames < 1:
        raise UsageError(f"max_frames={max_frames}; expected at least 1.")
    try:
        probe = imageio_ffmpeg.read_frames(str(p))
        meta = next(probe)
        probe.close()
    except (RuntimeError, OSError, StopIteration) as exc:
        raise VideoError(f"Cannot read {p} as a video: {exc}") from exc
    src_fps = float(meta.get("fps") or fps or 0.0)
    src_size = tuple(int(s) for s in meta["size"])
    est_frames = float(meta.get("duration") or 0.0) * src_fps
    stride = 1
    if max_fps and src_fps > max_fps:
        stride = math.ceil(src_fps / max_fps - 1e-9)
    if est_frames > 0:
        stride = max(stride, math.ceil(est_frames / max_frames - 1e-9))
    w, h = _fit(src_size, max_size)
    filters = [rf"select=not(mod(n\,{stride}))"] if stride > 1 else []
    if (w, h) != src_size:
        filters.append(f"scale={w}:{h}:flags=area")
    out_params = ["-vf", ",".join(filters), "-fps_mode", "passthrough"] if filters else None
    kept: list[np.ndarray] = []
    keep_every = 1  # further decimation of what ffmpeg selected, when the duration estimate was short
    gen = imageio_ffmpeg.read_frames(str(p), output_params=out_params)
    quiet = _SizeWarningFilter()
    logging.getLogger("imageio_ffmpeg").addFilter(quiet)  # it warns that we asked for a smaller size
    try:
        rmeta = next(gen)
        rw, rh = (int(s) for s in rmeta["size"])
        for i, buf in enumerate(gen):
            if i % keep_every:
                continue
            kept.append(np.frombuffer(buf, dtype=np.uint8).reshape(rh, rw, 3))
            if len(kept) > max_frames:
                kept = kept[::2]
                keep_every *= 2
    except RuntimeError as exc:
        raise VideoError(f"ffmpeg failed while decoding {p}: {exc}") from exc
    finally:
        gen.close()
        logging.getLogger("imageio_ffmpeg").removeFilter(quiet)
    if not kept:
        raise VideoError(f"{p} holds no video frames.")
    stride *= keep_every
    frames = np.stack(kept)
    return VideoFrames(frames, stride, src_fps, src_size, src_fps / stride if src_fps else 0.0)
