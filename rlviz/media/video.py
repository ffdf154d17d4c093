"""Streaming H.264 MP4 writer and a small decoder (both through imageio-ffmpeg's bundled ffmpeg).

:class:`VideoWriter` pipes each frame straight to ffmpeg (libx264, yuv420p, ``+faststart``), so memory
does not grow with episode length. It writes to a temporary name in the destination folder
(``.<stem>.partial.mp4``) and renames it to the final name only when the encoder finished cleanly:
the final name never holds a truncated video. :func:`probe_video` and :func:`read_video` decode an
MP4 back (used by the tests to check what was written).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError, VideoError

__all__ = ["VideoWriter", "VideoInfo", "probe_video", "read_video", "partial_path", "PRESETS"]

#: libx264 presets, fastest first.
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")


class _Abort(BaseException):
    """Thrown into imageio-ffmpeg's writer generator: a BaseException makes it kill ffmpeg at once."""


def partial_path(path: str | os.PathLike) -> Path:
    """The temporary name a video is written under until it is complete: ``<dir>/.<stem>.partial.mp4``."""
    p = Path(path)
    return p.with_name(f".{p.stem}.partial.mp4")


def _ffmpeg():
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise VideoError(f"imageio-ffmpeg is not installed ({exc}); pip install imageio-ffmpeg.") from exc
    return imageio_ffmpeg


class VideoWriter:
    """Write RGB frames to an H.264 MP4 as they come.

    Args:
        path: the final ``.mp4`` name (its folder is created when missing).
        fps: playback rate, frames per second (> 0).
        size: (width, height) in pixels, both even (multiples of 16 play everywhere: pad to 16).
        preset: libx264 speed/size trade-off, one of :data:`PRESETS`.
        crf: libx264 constant rate factor 0..51 (lower = better, 23 = default).

    Use as a context manager; :meth:`write` takes ``uint8 [height, width, 3]`` RGB. On leaving the
    ``with`` normally the video is finished and renamed to ``path``; on an exception (also
    KeyboardInterrupt) ffmpeg is killed and the temporary file removed.
    """

    def __init__(self, path: str | os.PathLike, fps: float, size: tuple[int, int], preset: str = "veryfast",
                 crf: int = 23):
        self.path = Path(path)
        try:
            width, height = (int(s) for s in size)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"VideoWriter size={size!r}; expected (width, height) as two integers.") from exc
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise UsageError(
                f"VideoWriter size=(width={width}, height={height}): H.264 in yuv420p needs positive even sizes "
                "(odd sizes give yuv444p, which browsers do not play). Pad the frames to multiples of 16."
            )
        try:
            fps = float(fps)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"VideoWriter fps={fps!r}; expected a positive number.") from exc
        if not np.isfinite(fps) or fps <= 0:
            raise UsageError(f"VideoWriter fps={fps}; expected a positive number of frames per second.")
        if preset not in PRESETS:
            raise UsageError(f"VideoWriter preset={preset!r} is not a libx264 preset; use one of {', '.join(PRESETS)}.")
        if not (isinstance(crf, (int, np.integer)) and 0 <= int(crf) <= 51):
            raise UsageError(f"VideoWriter crf={crf!r}; expected an integer 0..51 (23 is libx264's default).")
        self.fps = fps
        self.size = (width, height)
        self.preset = preset
        self.crf = int(crf)
        self.partial = partial_path(self.path)
        self.frames_written = 0
        self._gen = None
        self._proc: subprocess.Popen | None = None
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> VideoWriter:
        """Start ffmpeg (done by ``with`` or the first :meth:`write`)."""
        if self._gen is not None:
            return self
        if self._closed:
            raise UsageError(f"VideoWriter for {self.path} is already closed; make a new one to write another video.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ff = _ffmpeg()
        gen = ff.write_frames(
            str(self.partial),
            self.size,
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            fps=self.fps,
            quality=None,  # rate control through -crf below
            codec="libx264",
            macro_block_size=1,  # never let imageio-ffmpeg rescale; sizes are checked to be even above
            ffmpeg_log_level="error",
            output_params=["-preset", self.preset, "-crf", str(self.crf), "-movflags", "+faststart", "-f", "mp4"],
        )
        try:
            gen.send(None)  # starts ffmpeg
        except Exception as exc:
            raise VideoError(f"Could not start ffmpeg to write {self.path}: {exc}") from exc
        self._gen = gen
        # Best effort: the Popen lets us reap a killed ffmpeg and read its exit status.
        frame = getattr(gen, "gi_frame", None)
        proc = frame.f_locals.get("p") if frame is not None else None
        self._proc = proc if isinstance(proc, subprocess.Popen) else None
        return self

    @property
    def pid(self) -> int | None:
        """ffmpeg's process id while it runs (None when unknown or not started)."""
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
        if self._gen is None:
            self.open()
        try:
            self._gen.send(np.ascontiguousarray(frame))
        except Exception as exc:
            self.abort()
            raise VideoError(f"ffmpeg stopped while writing frame {self.frames_written} of {self.path}: {exc}") from exc
        self.frames_written += 1

    def close(self) -> Path:
        """Finish the video and move it to its final name. Returns the final path."""
        if self._closed:
            return self.path
        if self._gen is None or self.frames_written == 0:
            self.abort()
            raise VideoError(f"No frames were written to {self.path}; an MP4 needs at least one frame.")
        gen, self._gen = self._gen, None
        try:
            gen.close()  # closes ffmpeg's stdin and waits for it to finish the file
        except BaseException:
            self._kill(gen)
            self._cleanup()
            raise
        self._closed = True
        rc = self._proc.returncode if self._proc is not None else 0
        if rc not in (0, None) or not self.partial.exists() or self.partial.stat().st_size == 0:
            self._cleanup()
            raise VideoError(f"ffmpeg failed to write {self.path} (exit status {rc}); no video was produced.")
        os.replace(self.partial, self.path)
        return self.path

    def abort(self) -> None:
        """Kill ffmpeg (if running) and delete the temporary file; the final name is left untouched."""
        gen, self._gen = self._gen, None
        if gen is not None:
            self._kill(gen)
        self._closed = True
        self._cleanup()

    def _kill(self, gen) -> None:
        try:
            gen.throw(_Abort())
        except (_Abort, StopIteration, ValueError, RuntimeError):
            pass
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass

    def _cleanup(self) -> None:
        try:
            self.partial.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> VideoWriter:
        return self.open()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def __del__(self):  # pragma: no cover - best effort when a writer is dropped unfinished
        try:
            if self._gen is not None:
                self.abort()
        except Exception:
            pass


@dataclass(frozen=True)
class VideoInfo:
    """What a video file holds.

    codec:  e.g. "h264";  pix_fmt: e.g. "yuv420p";  width, height: pixels;
    num_frames: decoded frame count;  fps: frames per second (0.0 when unknown).
    """

    codec: str
    pix_fmt: str
    width: int
    height: int
    num_frames: int
    fps: float


def _open_reader(path: str | os.PathLike):
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"No video file at {p}; check the path.")
    gen = _ffmpeg().read_frames(str(p))
    try:
        meta = next(gen)
    except Exception as exc:
        gen.close()
        raise VideoError(f"Cannot read {p} as a video: {exc}") from exc
    return gen, meta


def probe_video(path: str | os.PathLike) -> VideoInfo:
    """Codec, pixel format, size, exact frame count (decodes the stream) and fps of a video file."""
    gen, meta = _open_reader(path)
    gen.close()
    try:
        nframes, _ = _ffmpeg().count_frames_and_secs(str(path))
    except RuntimeError as exc:
        raise VideoError(f"Cannot count the frames of {path}: {exc}") from exc
    pix_fmt = re.split(r"[(,\s]", str(meta.get("pix_fmt", "")), maxsplit=1)[0]
    width, height = meta["size"]
    return VideoInfo(str(meta.get("codec", "")), pix_fmt, int(width), int(height), int(nframes or 0),
                     float(meta.get("fps") or 0.0))


def read_video(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Decode a video: yields ``uint8 [height, width, 3]`` RGB frames, one at a time."""
    gen, meta = _open_reader(path)
    width, height = meta["size"]
    try:
        for buf in gen:
            yield np.frombuffer(buf, dtype=np.uint8).reshape(height, width, 3)
    finally:
        gen.close()
