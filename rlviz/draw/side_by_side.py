"""Two episode videos in one, side by side and frame-locked (``rlviz compare --videos``; from frames in memory,
:func:`compose_side_by_side`, for the disagreement branches).

Both videos are decoded as streams and composed frame by frame: memory holds one frame of each, whatever the
episodes' lengths. When one episode ends first, its last frame is held, dimmed and marked "ended", until the
other ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from ..errors import VideoError
from ..media.video import Encoding, VideoWriter, read_video
from .style import COLORS
from .style import ceil16 as _ceil16

__all__ = ["side_by_side", "compose_side_by_side", "Encoding", "HEADER", "GAP"]

#: Height of the label strip above the two videos, and the gap between them (pixels).
HEADER = 24
GAP = 16


def _text(img: np.ndarray, s: str, x: int, y: int, color, scale: float = 0.5) -> None:
    s = s.encode("ascii", "replace").decode()  # Hershey fonts draw ASCII only
    cv2.putText(img, s, (int(x), int(y)), cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)


class _Canvas:
    """The output frame: a label strip over two slots; the frames are pasted in, held ones dimmed."""

    def __init__(self, first_a: np.ndarray, first_b: np.ndarray, labels: tuple[str, str]):
        (ha, wa), (hb, wb) = first_a.shape[:2], first_b.shape[:2]
        self.width, self.height = _ceil16(wa + GAP + wb), _ceil16(HEADER + max(ha, hb))
        self.x = (0, wa + GAP)
        self.background = np.empty((self.height, self.width, 3), np.uint8)
        self.background[:] = COLORS["background"]
        for x, label in zip(self.x, labels):
            _text(self.background, label, x + 6, HEADER - 7, COLORS["text"])

    def compose(self, frames, ended) -> np.ndarray:
        img = self.background.copy()
        for x, frame, done in zip(self.x, frames, ended):
            h, w = frame.shape[:2]
            if x + w > self.width or HEADER + h > self.height:
                raise VideoError(f"A frame of {w}x{h} does not fit the side-by-side slot; the two videos must keep "
                                 "their frame size from the first frame on.")
            slot = img[HEADER : HEADER + h, x : x + w]
            slot[:] = frame
            if done:
                slot[:] = (slot.astype(np.uint16) * 2 // 5).astype(np.uint8)
                _text(img, "ended", x + w // 2 - 34, HEADER + h // 2 + 8, COLORS["chosen"], scale=0.9)
        return img


def side_by_side(path_a: str | os.PathLike, path_b: str | os.PathLike, out: str | os.PathLike, fps: float,
                 labels: tuple[str, str] = ("A", "B"), min_frames: int = 0, preset: str = "veryfast") -> tuple[Path, int]:
    """Write ``out``: the video at ``path_a`` left of the one at ``path_b``, frame ``t`` beside frame ``t``,
    each labelled; the shorter one's last frame held (marked "ended"), and the last pair held until the video has
    ``min_frames`` frames (short episodes stay watchable); ``preset``: libx264's (:class:`~rlviz.media.VideoWriter`).
    Returns (path, frames written)."""
    streams = [read_video(path_a), read_video(path_b)]
    try:
        return compose_side_by_side(streams[0], streams[1], out, fps, labels, min_frames,
                                    names=(str(path_a), str(path_b)), encoding=Encoding(preset=preset))
    finally:
        for s in streams:
            s.close()  # type: ignore[attr-defined]  # read_video's generators


def compose_side_by_side(frames_a: Iterator[np.ndarray], frames_b: Iterator[np.ndarray], out: str | os.PathLike,
                         fps: float, labels: tuple[str, str] = ("A", "B"), min_frames: int = 0,
                         names: tuple[str, str] = ("A's frames", "B's frames"),
                         encoding: Encoding = Encoding()) -> tuple[Path, int]:
    """:func:`side_by_side` of two streams of frames (uint8 [H, W, 3] RGB, one size per stream; a stream may hand
    back the same buffer each time, filled anew): encoded once, nothing decoded. ``names``: the streams in errors;
    ``encoding``: the encoder's settings (:class:`Encoding`)."""
    current = [next(frames_a, None), next(frames_b, None)]
    if any(f is None for f in current):
        empty = names[0] if current[0] is None else names[1]
        raise VideoError(f"{empty} has no frames; expected a recorded episode's frames.")
    canvas = _Canvas(current[0], current[1], labels)  # type: ignore[arg-type]  # neither is None (above)
    streams, ended, frames = (frames_a, frames_b), [False, False], 0
    with VideoWriter(out, fps, (canvas.width, canvas.height), preset=encoding.preset, crf=encoding.crf,
                     yuv=encoding.yuv) as writer:
        while True:
            writer.write(canvas.compose(current, ended))
            frames += 1
            nxt = [None if done else next(s, None) for s, done in zip(streams, ended)]
            ended = [done or f is None for f, done in zip(nxt, ended)]
            if all(ended):
                held = canvas.compose(current, ended)  # hold the end: a short video lasts long enough
                for _ in range(frames, int(min_frames)):
                    writer.write(held)
                    frames += 1
                break
            current = [c if f is None else f for c, f in zip(current, nxt)]
    return Path(out), frames
