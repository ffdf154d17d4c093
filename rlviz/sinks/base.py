"""The :class:`Sink` interface and the helpers every sink shares.

A sink receives what rlviz produced for one evaluation: the episode video (always an H.264 MP4
file that rlviz already encoded), images (heatmaps), scalar statistics and small tables, each
at a training ``step``. Sinks that need pixels read them back from the MP4 with
:func:`rlviz.media.read_video_frames` (downscaled and subsampled in time by ffmpeg, memory bounded;
re-exported here).
"""

from __future__ import annotations

import abc
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..media.decode import VideoFrames, read_video_frames

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
