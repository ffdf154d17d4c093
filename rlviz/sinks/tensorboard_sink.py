"""TensorBoard sink: the episode as an animated GIF image summary, heatmaps as images, statistics as scalars.

TensorBoard has no video dashboard; its Images dashboard plays animated GIFs. torch's
``SummaryWriter.add_video`` builds such a GIF through ``moviepy.editor``, which moviepy 2 removed;
this sink reads the frames back from rlviz's MP4 with ffmpeg (downscaled, subsampled in time),
encodes the GIF with Pillow and writes the ``Summary.Image`` proto itself. moviepy is never needed.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError, require
from .base import Sink, check_step, load_image, read_video_frames, scalar_items

__all__ = ["TensorBoardSink", "encode_gif"]


def encode_gif(frames: np.ndarray, fps: float) -> bytes:
    """Frames ``uint8 [N, H, W, 3]`` as a looping animated GIF (Pillow, adaptive palette per frame).

    GIF delays are whole centiseconds and browsers slow delays under 20 ms down to 100 ms, so the
    per-frame delay is ``1000 / fps`` ms rounded to 10 ms, at least 20 ms.
    """
    from PIL import Image

    arr = np.asarray(frames)
    if arr.ndim != 4 or arr.shape[-1] != 3 or arr.dtype != np.uint8 or arr.shape[0] == 0:
        raise UsageError(f"encode_gif expects uint8 [N, H, W, 3] with N >= 1; received {arr.dtype} {list(arr.shape)}.")
    if not fps or fps <= 0:
        raise UsageError(f"encode_gif fps={fps}; expected a positive number.")
    delay = max(20, int(round(100.0 / fps)) * 10)
    images = [Image.fromarray(np.ascontiguousarray(f)) for f in arr]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:], duration=delay, loop=0)
    return buf.getvalue()


def _markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v) -> str:
        return (f"{v:.6g}" if isinstance(v, float) else str(v)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


class TensorBoardSink(Sink):
    """Write to a TensorBoard log dir (event files).

    Args:
        log_dir: where the event file goes (ignored when ``writer`` is given).
        writer: an existing ``torch.utils.tensorboard.SummaryWriter`` (e.g. the one your training loop
            or SB3's logger already writes to), so videos appear in the same run. It is flushed, not
            closed, by :meth:`close`.
        max_size: longest side of the GIF frames in pixels (None keeps the video's size).
        max_frames: most frames in one GIF; longer episodes are subsampled in time.
        max_fps: highest GIF frame rate; faster videos keep every k-th frame.

    Event files stay small: a 320-pixel GIF of at most ``max_frames`` frames per logged episode.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike | None = None,
        *,
        writer=None,
        max_size: int | None = 320,
        max_frames: int = 200,
        max_fps: float | None = 15.0,
    ):
        require("tensorboard", "tensorboard", "the TensorBoard sink")
        tb = require("torch.utils.tensorboard", "tensorboard", "the TensorBoard sink")
        if writer is None and log_dir is None:
            raise UsageError("TensorBoardSink needs log_dir=<folder> or writer=<SummaryWriter>; received neither.")
        if max_size is not None and int(max_size) < 16:
            raise UsageError(f"max_size={max_size}; expected at least 16 pixels (or None to keep the video size).")
        if int(max_frames) < 2:
            raise UsageError(f"max_frames={max_frames}; expected at least 2 for an animation.")
        if max_fps is not None and not float(max_fps) > 0:
            raise UsageError(f"max_fps={max_fps}; expected a positive number or None.")
        self._owns_writer = writer is None
        self.writer = writer if writer is not None else tb.SummaryWriter(log_dir=str(log_dir))
        self.log_dir = Path(self.writer.get_logdir())
        self.max_size = None if max_size is None else int(max_size)
        self.max_frames = int(max_frames)
        self.max_fps = None if max_fps is None else float(max_fps)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"This TensorBoardSink ({self.log_dir}) is closed; make a new one to log more.")

    def log_video(self, name: str, path, step: int, *, fps: float, caption: str | None = None) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._check_open()
        step = check_step(step)
        clip = read_video_frames(
            path, max_size=self.max_size, max_frames=self.max_frames, max_fps=self.max_fps, fps=fps
        )
        gif_fps = clip.fps if clip.fps > 0 else float(fps) / clip.stride
        n, h, w, c = clip.frames.shape
        image = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=encode_gif(clip.frames, gif_fps))
        self.writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=name, image=image)]), step)
        if caption:
            self.writer.add_text(f"{name}/caption", caption, step)

    def log_image(self, name: str, image, step: int) -> None:
        self._check_open()
        self.writer.add_image(name, load_image(image), check_step(step), dataformats="HWC")

    def log_scalars(self, scalars: Mapping[str, float], step: int, prefix: str = "") -> None:
        self._check_open()
        step = check_step(step)
        for key, value in scalar_items(scalars, prefix).items():
            self.writer.add_scalar(key, value, step)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int) -> None:
        """A markdown table in the Text dashboard (TensorBoard has no table view)."""
        self._check_open()
        self.writer.add_text(name, _markdown_table(columns, rows), check_step(step))

    def log_text(self, name: str, text: str, step: int) -> None:
        """Markdown in the Text dashboard."""
        self._check_open()
        self.writer.add_text(name, str(text), check_step(step))

    def flush(self) -> None:
        if not self._closed:
            self.writer.flush()

    def close(self) -> None:
        if self._closed:
            return
        self.writer.flush()
        if self._owns_writer:
            self.writer.close()
        self._closed = True
