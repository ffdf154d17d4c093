"""A job's output folder: a run writes only into a folder of its own, and appears there complete or not at all.

The run is written into a staging folder beside ``--out`` (``.<name>.<pid>.partial``, :func:`rlviz.media.atomic.temp_name`) and renamed to ``--out`` when
it is complete. An existing ``--out`` is used only when it is empty, or when it holds an earlier rlviz run (it has
``rlviz-run.json``) and ``--overwrite`` was given: the old run then stays until the new one is complete, and is
removed after the rename. A folder holding anything else is never written into or removed.

One ``--out``, one run at a time: a run holds a lock on ``.<name>.lock`` beside ``--out`` (an exclusive ``flock``
on a file holding the run's pid) from its first check of the folder until the rename (:func:`claim_out_dir`). A
second run into the same folder refuses at once with one line naming the holder's pid, rather than waiting:
waiting would spend a whole run only to refuse at the end (the folder then holds the first run) or, with
``--overwrite``, to replace the first run moments after its user was told it was there. The kernel releases the
lock when its holder dies, so the lock file of a dead process is stale and the next run takes it over.

Inputs are never outputs: every job names its inputs (:func:`job_inputs`: model files, run folders, the Hub cache
folder of an ``hf://`` repo, VecNormalize files), and an ``--out`` that is an input folder, lies inside one, or holds
an input is refused with one line naming both. ``--overwrite`` removes only what rlviz wrote: the marker lists every
file of the run (``"files"``, paths relative to ``--out``), and a folder holding anything else (or whose marker lists
no files, as 0.3's did not) is refused instead of replaced.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._version import __version__
from ..choices import RUN_CACHE_DIR, RUN_MARKER
from ..errors import StorageError, UsageError
from ..media.atomic import temp_name
from .inputs import check_not_input, job_inputs, listed_files, marker_dict, remove_listed, written_files

__all__ = ["MARKER", "CACHE_DIR", "check_out_dir", "claim_out_dir", "run_folder", "is_run_folder", "lock_path", "job_inputs",
           "foreign_files", "remove_run", "remove_stale_staging", "write_marker"]

#: The file that marks a folder as an rlviz run (what wrote it, with which options).
MARKER = RUN_MARKER
#: The run's cache area (``rlviz explore``'s episodes rendered on demand): rlviz's, removed with the run.
CACHE_DIR = RUN_CACHE_DIR


def is_run_folder(path: Path) -> bool:
    return (Path(path) / MARKER).is_file()


def foreign_files(out: Path) -> list[str]:
    """The files (and links) under ``out`` that its marker does not list as rlviz's: what ``--overwrite`` must never
    remove. All of them when the marker lists no files (0.3's markers, or a marker rlviz did not write)."""
    listed = set(listed_files(out) or ())
    return [f for f in written_files(out) if f != MARKER and f not in listed
            and not (f.startswith(CACHE_DIR + "/") and not os.path.islink(Path(out, CACHE_DIR)))]


def check_out_dir(out: str | os.PathLike[str], overwrite: bool, inputs: Sequence[Path] = ()) -> Path:
    """Refuse an ``--out`` the run may not use (one line saying why and what to do); returns it as a Path.
    ``inputs``: the job's inputs (:func:`job_inputs`), which ``--out`` may not be, hold or lie inside."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; rlviz writes a run into a folder: choose a new folder name.")
    resolved = out.resolve()
    if resolved == Path.cwd().resolve() or resolved == resolved.parent:
        raise UsageError(f"--out {out} is the current (or root) folder; give the run a folder of its own, "
                         "e.g. --out rlviz-out.")
    check_not_input(out, inputs)
    if out.is_dir() and any(out.iterdir()):
        if not is_run_folder(out):
            raise UsageError(f"--out {out} is a folder with other files in it (not an rlviz run); rlviz writes a run "
                             "into a folder of its own: choose a new or empty folder.")
        if not overwrite:
            raise UsageError(f"--out {out} holds an earlier rlviz run; pass --overwrite to replace it (the old run "
                             "stays until the new one is complete), or choose another --out.")
        foreign = foreign_files(out)
        if foreign:
            why = "lists no files (written by rlviz 0.3 or edited)" if listed_files(out) is None else \
                "does not list it"
            raise UsageError(f"--out {out} holds {len(foreign)} file(s) rlviz did not write there (e.g. {foreign[0]}; "
                             f"its {MARKER} {why}); --overwrite removes only what rlviz wrote: move them away, delete "
                             "the folder yourself, or choose another --out.")
    return out


def write_marker(folder: Path, job: str, options: dict[str, Any], files: Sequence[str]) -> None:
    """``folder/rlviz-run.json``: what wrote the run, with which options, and every file it wrote (relative)."""
    from ..media.atomic import atomic_write

    atomic_write(folder / MARKER, json.dumps(marker_dict(__version__, job, options, files), indent=2,
                                             sort_keys=True, default=str) + "\n", fsync=False)


def remove_run(out: Path) -> None:
    """Remove what the marker of ``out`` lists (and the marker, and the folders left empty); nothing else."""
    cache = Path(out, CACHE_DIR)
    if cache.is_dir() and not cache.is_symlink():
        shutil.rmtree(cache, ignore_errors=True)  # (rmtree never follows links inside it)
    remove_listed(out, listed_files(out) or [], MARKER)


_HELD: dict[Path, list[int]] = {}  # resolved --out -> [lock file descriptor, nesting depth] (this process's claims)
_HELD_LOCK = threading.Lock()


def lock_path(out: str | os.PathLike[str]) -> Path:
    """The lock file of an ``--out`` folder: ``.<name>.lock`` beside it."""
    resolved = Path(out).resolve()
    return resolved.parent / f".{resolved.name}.lock"


def _lock(path: Path, out: Path) -> int:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): _swap's check still refuses a second success
        return -1
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"--out {out}: cannot create its lock file {path} ({exc.strerror or exc}); choose "
                               "an --out in a folder you can write to.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise UsageError(f"--out {out} is being written by another rlviz run (pid {holder}; lock {path}); wait "
                             "for it to finish, or choose another --out.") from None
        try:  # the file we locked is still the lock (a holder deletes it on release, after we opened it)
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


@contextmanager
def claim_out_dir(out: str | os.PathLike[str], overwrite: bool, inputs: Sequence[Path] = ()) -> Iterator[Path]:
    """Hold ``out``'s lock (see the module docstring) and :func:`check_out_dir` it under the lock; re-entrant
    within a process. A second process claiming it meanwhile gets a one-line :class:`UsageError`."""
    check_out_dir(out, overwrite, inputs)  # the plain refusals first (no lock file is made for them)
    key = Path(out).resolve()
    with _HELD_LOCK:
        if key in _HELD:
            _HELD[key][1] += 1
        else:
            key.parent.mkdir(parents=True, exist_ok=True)
            _HELD[key] = [_lock(lock_path(out), Path(out)), 1]
    try:
        yield check_out_dir(out, overwrite, inputs)  # again: another run may have finished into it meanwhile
    finally:
        with _HELD_LOCK:
            _HELD[key][1] -= 1
            if _HELD[key][1] == 0:
                fd = _HELD.pop(key)[0]
                if fd >= 0:
                    try:
                        os.unlink(lock_path(out))  # while still holding it (see _lock)
                    except FileNotFoundError:
                        pass
                    os.close(fd)


@contextmanager
def run_folder(out: str | os.PathLike[str], *, overwrite: bool, job: str, options: dict[Any, Any],
               inputs: Sequence[Path] | None = None) -> Iterator[Path]:
    """Yield the staging folder to write the run into; on success it becomes ``out`` (see the module docstring).
    ``inputs``: the job's inputs; by default those its ``options`` name (:func:`job_inputs`)."""
    inputs = job_inputs(options) if inputs is None else inputs
    with claim_out_dir(out, overwrite, inputs) as out:
        yield from _staged(out, overwrite, job, options, inputs)


def _staged(out: Path, overwrite: bool, job: str, options: dict[str, Any], inputs: Sequence[Path]) -> Iterator[Path]:
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = temp_name(parent / out.name)  # the one temp-name scheme (media.atomic): pid inside
    remove_stale_staging(parent, out.name)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        write_marker(staging, job, options, written_files(staging))
        _swap(staging, out.resolve(), overwrite, inputs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # (a private folder this process made: all of it is ours)


def remove_stale_staging(parent: Path, name: str) -> list[Path]:
    """Remove the staging (``.<name>.<pid>.partial``) and set-aside (``.<name>.old-<pid>``) folders of ``--out``
    ``name`` left by runs that were killed (SIGKILL, a power cut): their process is gone
    (:func:`rlviz.record.leftovers.owner_gone`). Called under ``--out``'s lock, so no live run of it is touched, and
    another process's folder is never removed while it runs. The folders removed."""
    from ..record.leftovers import owner_gone

    pattern = re.compile(re.escape(f".{name}.") + r"(?:(\d+)\.partial|old-(\d+))$")
    removed = []
    for entry in parent.iterdir() if parent.is_dir() else ():
        m = pattern.match(entry.name)
        if m is None or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            gone = owner_gone(int(m.group(1) or m.group(2)), entry.lstat().st_mtime)
        except OSError:
            continue
        if gone:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _swap(staging: Path, out: Path, overwrite: bool, inputs: Sequence[Path]) -> None:
    """Move the complete run to ``out``; an earlier run there is moved aside first, and what its marker lists is
    deleted afterwards (anything else stays: see :func:`remove_run`)."""
    old = None
    check_out_dir(out, overwrite, inputs)  # (the lock keeps other rlviz runs out; this keeps anything else's files safe)
    if out.exists():
        if any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        else:
            out.rmdir()
    os.replace(staging, out)
    if old is not None:
        remove_run(old)
