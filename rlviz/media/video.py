"""Streaming H.264 MP4 writer: our own ffmpeg process, fed raw RGB frames through a pipe.

:class:`VideoWriter` pipes each frame straight to ffmpeg (libx264, yuv420p, ``+faststart``), so memory
does not grow with episode length. ffmpeg writes to the temporary name of :mod:`.atomic`
(``.<stem>.<pid>.partial.mp4``), which is renamed to the final name only when ffmpeg exited cleanly:
the final name never holds a truncated video. On any exception, KeyboardInterrupt included, ffmpeg is
killed and reaped and the temporary file removed. The decoder lives in :mod:`.decode`
(:func:`probe_video` and :func:`read_video` are importable from here too).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import UsageError, VideoError
from .atomic import AtomicFile, temp_name
from .decode import VideoInfo, probe_video, read_video
from .ffmpeg import ErrorLog, ffmpeg_exe, stop

__all__ = ["Encoding", "VideoWriter", "VideoInfo", "probe_video", "read_video", "partial_path", "PRESETS", "X264_THREADS",
           "concat_videos", "x264_threads"]

#: libx264 presets, fastest first.
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")

#: libx264's frame threads per video, fixed so that a video's pixels do not depend on the machine. Left to x264
#: ("auto": 1.5 per core), the count follows the cores, and frame threads change the encoder's decisions: the same
#: 880x480 frames decoded to other pixels when encoded with 6, 8, 16 or 24 threads (what a machine of 4 cores or more
#: picks) than with the 3 of a 2-core machine. 3 is x264's own choice on 2 cores, the one every earlier rlviz video
#: made on 2 cores was encoded with (the releases' reference outputs among them): those stay the same, pixel for pixel.
X264_THREADS = 3


def x264_threads(height: int) -> int:
    """The frame threads for a video ``height`` pixels tall: :data:`X264_THREADS`, capped as x264 caps its own choice
    (two rows of 16-pixel macroblocks per thread at least), so the count is the one x264 picks on 2 cores."""
    return max(1, min(X264_THREADS, (int(height) + 15) // 16 // 2))


def partial_path(path: str | os.PathLike) -> Path:
    """The temporary name a video is written under until complete (this process): ``.<stem>.<pid>.partial.mp4``."""
    return temp_name(path)


def _check_size(size) -> tuple[int, int]:
    try:
        width, height = (int(s) for s in size)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"VideoWriter size={size!r}; expected (width, height) as two integers.") from exc
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise UsageError(
            f"VideoWriter size=(width={width}, height={height}): H.264 in yuv420p needs positive even sizes "
            "(odd sizes give yuv444p, which browsers do not play). Pad the frames to multiples of 16."
        )
    return width, height


def _check_fps(fps) -> float:
    try:
        fps = float(fps)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"VideoWriter fps={fps!r}; expected a positive number.") from exc
    if not np.isfinite(fps) or fps <= 0:
        raise UsageError(f"VideoWriter fps={fps}; expected a positive number of frames per second.")
    return fps


def _i420(frame: np.ndarray) -> Any:
    """An RGB frame as planar YUV 4:2:0 (BT.601, limited range: what ffmpeg's rgb24 -> yuv420p gives)."""
    import cv2  # only here: the recorders' imports stay without OpenCV

    return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2YUV_I420).data


@dataclass(frozen=True)
class Encoding:
    """How a video is encoded: libx264's ``preset`` and ``crf``, and ``yuv`` (frames converted to YUV 4:2:0 before
    ffmpeg), as :class:`VideoWriter` takes them."""

    preset: str = "veryfast"
    crf: int = 23
    yuv: bool = False


class VideoWriter:
    """Write RGB frames to an H.264 MP4 as they come.

    Args:
        path: the final ``.mp4`` name (its folder is created when missing).
        fps: playback rate, frames per second (> 0).
        size: (width, height) in pixels, both even (multiples of 16 play everywhere: pad to 16).
        preset: libx264 speed/size trade-off, one of :data:`PRESETS`.
        crf: libx264 constant rate factor 0..51 (lower = better, 23 = default).
        yuv: convert each frame to YUV 4:2:0 here (OpenCV's BT.601 conversion) and give ffmpeg that: its own
            rgb24 conversion is about half of the encoder's time at ``ultrafast``; colours agree with it within a
            level on average (chroma edges differ by more). For many short videos (the disagreement branches).

    Use as a context manager; :meth:`write` takes ``uint8 [height, width, 3]`` RGB. On leaving the
    ``with`` normally the video is finished and renamed to ``path``; on an exception (also
    KeyboardInterrupt) ffmpeg is killed and the temporary file removed. If ffmpeg fails, the
    :class:`~rlviz.errors.VideoError` quotes ffmpeg's own error text.
    """

    def __init__(self, path: str | os.PathLike, fps: float, size: tuple[int, int], preset: str = "veryfast",
                 crf: int = 23, yuv: bool = False):
        self.path = Path(path)
        self.yuv = bool(yuv)
        self.size = _check_size(size)
        self.fps = _check_fps(fps)
        if preset not in PRESETS:
            raise UsageError(f"VideoWriter preset={preset!r} is not a libx264 preset; use one of {', '.join(PRESETS)}.")
        if isinstance(crf, bool) or not (isinstance(crf, (int, np.integer)) and 0 <= int(crf) <= 51):
            raise UsageError(f"VideoWriter crf={crf!r}; expected an integer 0..51 (23 is libx264's default).")
        self.preset = preset
        self.crf = int(crf)
        self._out = AtomicFile(self.path)
        self.partial = self._out.tmp
        self.frames_written = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: ErrorLog | None = None
        self._closed = False

    def ffmpeg_args(self) -> list[str]:
        """ffmpeg's command line after the binary: raw rgb24 frames on stdin -> H.264 MP4 at :attr:`partial`."""
        w, h = self.size
        rate = Fraction(self.fps).limit_denominator(100_000)
        return [
            "-hide_banner", "-loglevel", "error", "-y",
            "-f", "rawvideo", "-pix_fmt", "yuv420p" if self.yuv else "rgb24", "-s", f"{w}x{h}", "-r", str(rate), "-i", "-",
            "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", self.preset, "-crf", str(self.crf),
            "-threads", str(x264_threads(h)), "-movflags", "+faststart", "-f", "mp4", str(self.partial),
        ]  # fmt: skip

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> VideoWriter:
        """Start ffmpeg (done by ``with`` or the first :meth:`write`)."""
        if self._proc is not None and not self._closed:
            return self
        if self._closed:
            raise UsageError(f"VideoWriter for {self.path} is already closed; make a new one to write another video.")
        try:
            self._out.start()
        except OSError as exc:
            self._closed = True
            raise VideoError(
                f"Cannot create the folder {self.path.parent} for the video {self.path.name} ({exc}); "
                "choose an output folder that can be written."
            ) from exc
        self._log = ErrorLog()
        try:
            self._proc = subprocess.Popen(
                [ffmpeg_exe(), *self.ffmpeg_args()],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log.file,
            )  # fmt: skip
        except OSError as exc:
            self.abort()
            raise VideoError(f"Could not start ffmpeg to write {self.path}: {exc}") from exc
        return self

    @property
    def pid(self) -> int | None:
        """ffmpeg's process id once started (None before)."""
        return self._proc.pid if self._proc is not None else None

    def write(self, frame: np.ndarray) -> None:
        """Send one ``uint8 [height, width, 3]`` RGB frame to the encoder."""
        w, h = self.size
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.shape != (h, w, 3):
            got = f"{frame.dtype} {list(frame.shape)}" if isinstance(frame, np.ndarray) else type(frame).__name__
            raise UsageError(
                f"VideoWriter(size=({w}, {h})) expects frames uint8 [{h}, {w}, 3] RGB; received {got}. "
                "Convert with np.asarray(frame, dtype=np.uint8) and pad or resize to the writer's size."
            )
        self.open()
        try:
            self._proc.stdin.write(_i420(frame) if self.yuv else np.ascontiguousarray(frame).data)  # type: ignore[union-attr]  # open() set both
        except (OSError, ValueError) as exc:  # BrokenPipeError: ffmpeg exited
            self._fail(f"ffmpeg stopped while writing frame {self.frames_written} of {self.path}", exc)
        self.frames_written += 1

    def close(self) -> Path:
        """Finish the video and move it to its final name. Returns the final path."""
        if self._closed:
            return self.path
        if self._proc is None or self.frames_written == 0:
            self.abort()
            raise VideoError(f"No frames were written to {self.path}; an MP4 needs at least one frame.")
        try:
            self._proc.stdin.close()  # type: ignore[union-attr]  # end of input: ffmpeg finishes the file and exits
            rc = self._proc.wait()
        except OSError as exc:
            self._fail(f"ffmpeg stopped before finishing {self.path}", exc)
        except BaseException:  # KeyboardInterrupt while ffmpeg finishes: nothing is left behind
            self.abort()
            raise
        if rc != 0 or not self.partial.is_file() or self.partial.stat().st_size == 0:
            self._fail(f"ffmpeg failed to write {self.path} (exit status {rc})")
        self._closed = True
        self._log.close()  # type: ignore[union-attr]
        return self._out.commit()

    def abort(self) -> None:
        """Kill ffmpeg (if running) and delete the temporary file; the final name is left untouched."""
        self._closed = True
        stop(self._proc)
        self._out.discard()
        if self._log is not None:
            self._log.close()

    def _fail(self, what: str, exc: BaseException | None = None):
        """Stop ffmpeg, clean up and raise a VideoError quoting ffmpeg's own error text."""
        stop(self._proc)
        detail = self._log.summary() if self._log is not None else "no error output"
        self.abort()
        raise VideoError(
            f"{what}: ffmpeg said: {detail.rstrip('.')}. No video was written; check the disk, the path and the options."
        ) from exc

    def __enter__(self) -> VideoWriter:
        return self.open()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def __del__(self):  # pragma: no cover - best effort when a writer is dropped unfinished
        try:
            if not self._closed and self._proc is not None:
                self.abort()
        except Exception:
            pass


def concat_videos(paths, path: str | os.PathLike) -> Path:
    """Join MP4s written by :class:`VideoWriter` with the same size and frame rate into one at ``path``, without
    re-encoding (ffmpeg's concat demuxer, stream copy); written under a temporary name, renamed when complete."""
    paths = [Path(p).resolve() for p in paths]
    if not paths:
        raise UsageError(f"concat_videos({path}) received no videos; expected at least one MP4 to join.")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise UsageError(f"concat_videos: {', '.join(missing)} not found; expected MP4s written by VideoWriter.")
    out = AtomicFile(path)
    tmp = out.start()
    listing = tmp.with_suffix(".txt")
    listing.write_text("".join("file '" + str(p).replace("'", "'\\''") + "'\n" for p in paths), encoding="utf-8")
    log = ErrorLog()
    try:
        rc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "concat", "-safe", "0",
                             "-i", str(listing), "-c", "copy", "-movflags", "+faststart", "-f", "mp4", str(tmp)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.file).returncode
        if rc != 0 or not tmp.is_file():
            raise VideoError(f"ffmpeg could not join {len(paths)} video(s) into {path} (exit status {rc}): ffmpeg "
                             f"said: {log.summary()}. Check that they share size, frame rate and codec.")
        return out.commit()
    finally:
        log.close()
        listing.unlink(missing_ok=True)
        out.discard()
