"""Running the ffmpeg binary that imageio-ffmpeg ships: finding it, keeping its error text, stopping it.

The writer (:mod:`.video`) and the decoder (:mod:`.decode`) start their own ``subprocess.Popen``;
this module holds what both need. ffmpeg stays in our process group, so a Ctrl-C at a terminal
reaches it too, and the owner kills and reaps it on any exception (:func:`stop`).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from typing import IO

from ..errors import VideoError

__all__ = ["ffmpeg_exe", "ErrorLog", "stop"]

#: how much of ffmpeg's error output is read for an error message
HEAD_BYTES = 4096


def ffmpeg_exe() -> str:
    """The path of the ffmpeg binary bundled with imageio-ffmpeg (a core dependency)."""
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise VideoError(f"imageio-ffmpeg is not installed ({exc}); pip install imageio-ffmpeg.") from exc
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as exc:  # pragma: no cover - broken installation
        raise VideoError(f"imageio-ffmpeg found no ffmpeg binary ({exc}); reinstall imageio-ffmpeg.") from exc


class ErrorLog:
    """ffmpeg's stderr, kept in an anonymous temporary file (never a pipe that could fill up and block
    ffmpeg); :meth:`summary` gives its first lines (the cause comes first) for an error message."""

    def __init__(self):
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="rlviz-ffmpeg-")

    def summary(self, max_lines: int = 3) -> str:
        """ffmpeg's first distinct error lines on one line, without object addresses."""
        if self.file.closed:
            return "no error output"
        self.file.flush()
        self.file.seek(0)
        text = self.file.read(HEAD_BYTES).decode("utf-8", "replace")
        lines: list[str] = []
        for line in text.splitlines():
            line = re.sub(r" @ 0x[0-9a-f]+", "", line).strip()
            if line and line not in lines:
                lines.append(line)
        return " | ".join(lines[:max_lines]) or "no error output"

    def close(self) -> None:
        self.file.close()


def stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """Kill ``proc`` if it still runs and wait for it (no zombie is left); closes its pipes."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:  # a broken pipe's buffered bytes cannot be flushed; they are not wanted
                pass
