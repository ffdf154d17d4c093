"""Frames straight to the encoder, for recordings with nothing to compute per episode (no policy, no
annotations): each frame is padded to multiples of 16 (black) and sent to libx264 at once, so nothing is
kept in memory. An optional thin strip under the game shows the step, the reward and the return so far."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..media.video import VideoWriter

__all__ = ["FrameStream", "STRIP_HEIGHT"]

#: Height in pixels of the reward/return strip (before padding to 16).
STRIP_HEIGHT = 20
_TEXT = (225, 228, 235)
_BG = (22, 24, 30)


def _ceil16(n: int) -> int:
    return -(-int(n) // 16) * 16


class FrameStream:
    """An MP4 fed one game frame at a time. The writer starts on the first frame (its size sets the video's)."""

    def __init__(self, path: str | os.PathLike[str], fps: float, preset: str = "veryfast", crf: int = 23,
                 strip: bool = False):
        self.path = Path(path)
        self.fps, self.preset, self.crf, self.strip = float(fps), preset, int(crf), bool(strip)
        self.frames = 0
        self._writer: VideoWriter | None = None
        self._buf: np.ndarray = np.zeros((0, 0, 3), np.uint8)  # set with the writer, by the first frame
        self._hw: tuple[int, int] = (0, 0)

    def write(self, frame: np.ndarray, step: int = 0, reward: float = 0.0, ret: float = 0.0) -> None:
        """Append uint8 [H, W, 3] ``frame``; with the strip, ``step``, ``reward`` and ``ret`` are printed under it."""
        h, w = frame.shape[:2]
        if self._writer is None:
            self._hw = (h, w)
            extra = STRIP_HEIGHT if self.strip else 0
            size = (_ceil16(w), _ceil16(h + extra))
            self._buf = np.zeros((size[1], size[0], 3), np.uint8)
            self._writer = VideoWriter(self.path, self.fps, size, preset=self.preset, crf=self.crf).open()
        buf = self._buf
        if (h, w) != self._hw:  # a frame of another size: fit it in (top-left), as gymnasium's recorder cannot
            buf[:] = 0
            h, w = min(h, self._hw[0]), min(w, self._hw[1])
        buf[:h, :w] = frame[:h, :w]
        if self.strip:
            y0 = self._hw[0]
            buf[y0 : y0 + STRIP_HEIGHT] = _BG
            text = f"step {step}   reward {reward:+.3g}   return {ret:.5g}"
            import cv2  # only for the strip: cv2 costs an import a training process may never need

            cv2.putText(buf, text, (4, y0 + STRIP_HEIGHT - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.4, _TEXT, 1, cv2.LINE_AA)
        self._writer.write(buf)
        self.frames += 1

    def close(self) -> Path | None:
        """Finish the video; returns its path, or None when no frame was written (no file then)."""
        if self._writer is None:
            return None
        writer, self._writer = self._writer, None
        return writer.close()

    def abort(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.abort()
