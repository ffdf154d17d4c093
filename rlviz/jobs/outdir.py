"""A job's output folder: a run writes only into a folder of its own, and appears there complete or not at all.

The run is written into a staging folder beside ``--out`` (``.<name>.<pid>.partial``, :func:`rlviz.media.atomic.temp_name`) and renamed to ``--out`` when
it is complete. An existing ``--out`` is used only when it is empty, or when it holds an earlier rlviz run (it has
``rlviz-run.json``) and ``--overwrite`` was given: the old run then stays until the new one is complete, and is
removed after the rename. A folder holding anything else is never written into or removed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import UsageError
from ..media.atomic import temp_name

__all__ = ["MARKER", "check_out_dir", "run_folder", "is_run_folder"]

#: The file that marks a folder as an rlviz run (what wrote it, with which options).
MARKER = "rlviz-run.json"


def is_run_folder(path: Path) -> bool:
    return (Path(path) / MARKER).is_file()


def check_out_dir(out: str | os.PathLike[str], overwrite: bool) -> Path:
    """Refuse an ``--out`` the run may not use (one line saying why and what to do); returns it as a Path."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; rlviz writes a run into a folder: choose a new folder name.")
    resolved = out.resolve()
    if resolved == Path.cwd().resolve() or resolved == resolved.parent:
        raise UsageError(f"--out {out} is the current (or root) folder; give the run a folder of its own, "
                         "e.g. --out rlviz-out.")
    if out.is_dir() and any(out.iterdir()):
        if not is_run_folder(out):
            raise UsageError(f"--out {out} is a folder with other files in it (not an rlviz run); rlviz writes a run "
                             "into a folder of its own: choose a new or empty folder.")
        if not overwrite:
            raise UsageError(f"--out {out} holds an earlier rlviz run; pass --overwrite to replace it (the old run "
                             "stays until the new one is complete), or choose another --out.")
    return out


@contextmanager
def run_folder(out: str | os.PathLike[str], *, overwrite: bool, job: str, options: dict[Any, Any]) -> Iterator[Path]:
    """Yield the staging folder to write the run into; on success it becomes ``out`` (see the module docstring)."""
    out = check_out_dir(out, overwrite)
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = temp_name(parent / out.name)  # the one temp-name scheme (media.atomic): pid inside
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        marker = {"rlviz_version": __version__, "job": job, "options": options}
        (staging / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True, default=str) + "\n")
        _swap(staging, out.resolve())
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap(staging: Path, out: Path) -> None:
    """Move the complete run to ``out``; an earlier run there is moved aside first and deleted afterwards."""
    old = None
    if out.exists():
        if any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        else:
            out.rmdir()
    os.replace(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
