"""What a recording process leaves on disk while it runs, named for that process, and the cleaning of what a process
that is gone (killed: SIGKILL, a power cut, ``os._exit``) left behind.

* an episode's spools: a folder ``rlviz-rec-<pid>-*`` in ``RecordOptions.spool_dir`` or the temporary folder
  (:func:`spool_folder`);
* a video being encoded: ``.<stem>.<pid>.partial.mp4`` beside the final name (:func:`rlviz.media.atomic.temp_name`;
  likewise the ``.npz``).

:func:`clean_stale` (run by every recorder when it is made) deletes those whose owner process is gone: the pid is
not running, or the process now running under it started after the file was made (the pid was reused).
:func:`clean_own` deletes this process's own (at exit, once every recorder's writer has finished).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..episode.trace import SPOOL_PREFIX  # (every spool folder's: episode spools and Spool's own)
from ..errors import StorageError

__all__ = ["SPOOL_PREFIX", "spool_folder", "owner_gone", "clean_stale", "clean_own"]

_SPOOL = re.compile(re.escape(SPOOL_PREFIX) + r"(\d+)-")
_PARTIAL = re.compile(r"^\..+\.(\d+)\.partial(\.[A-Za-z0-9]+)?$")


def spool_folder(spool_dir: Any = None) -> str:
    """A new folder for one episode's spools, named for this process, in ``spool_dir`` (default: the temp folder)."""
    try:
        return tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=spool_dir)
    except OSError as exc:
        where = spool_dir or tempfile.gettempdir()
        raise StorageError(f"Cannot make a spool folder in {where} ({exc.strerror}); free space there or point rlviz "
                           "at a writable folder: set TMPDIR, or pass RecordOptions(spool_dir=...).") from None


def _started(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from /proc (Linux); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith(b"btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def owner_gone(pid: int, made: float) -> bool:
    """Whether the process that made a file at ``made`` (its mtime) under ``pid`` is gone: no such process, or one
    that started after the file was made (the pid reused)."""
    if pid == os.getpid() or os.name == "nt":  # (Windows: os.kill(pid, 0) would end the process, not probe it)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):  # alive, another user's
        pass
    started = _started(pid)
    return started is not None and started > made + 2.0  # (clock ticks: a margin for rounding)


def _entries(folder: Path, pattern: re.Pattern[str], own: bool) -> list[Path]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        m = pattern.match(name)
        if m is None:
            continue
        pid, path = int(m.group(1)), folder / name
        if own:
            if pid == os.getpid():
                out.append(path)
            continue
        try:
            made = path.lstat().st_mtime
        except OSError:
            continue
        if owner_gone(pid, made):
            out.append(path)
    return out


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        pass


def clean_stale(video_folder: Any, spool_dir: Any = None) -> list[Path]:
    """Delete the spool folders (in ``spool_dir`` or the temp folder) and partial videos (in ``video_folder``) of
    recording processes that are gone; returns what was deleted."""
    gone = _entries(Path(spool_dir or tempfile.gettempdir()), _SPOOL, own=False)
    gone += _entries(Path(video_folder), _PARTIAL, own=False)
    for path in gone:
        _remove(path)
    return gone


def clean_own(video_folders: Any, spool_dirs: Any) -> None:
    """Delete this process's spool folders and partial files (at exit, once nothing of it is writing any more)."""
    for folder in {Path(d or tempfile.gettempdir()) for d in spool_dirs}:
        for path in _entries(folder, _SPOOL, own=True):
            _remove(path)
    for folder in {Path(f) for f in video_folders}:
        for path in _entries(folder, _PARTIAL, own=True):
            _remove(path)
