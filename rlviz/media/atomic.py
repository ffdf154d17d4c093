"""Outputs appear complete or not at all: write to a temporary name beside the target, then rename.

This is the one temp-then-rename scheme of rlviz (files, videos, checkpoints, statistics). The
temporary name is ``.<stem>.<pid>.partial<suffix>`` in the target's folder: hidden, with the same
suffix (writers that add extensions keep it), and with the process id, so two processes writing the
same output never share a temporary file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["AtomicFile", "atomic_path", "atomic_write", "temp_name"]


def temp_name(path: str | os.PathLike) -> Path:
    """Where ``path`` is written until complete: ``<dir>/.<stem>.<pid>.partial<suffix>``."""
    p = Path(path)
    return p.with_name(f".{p.stem}.{os.getpid()}.partial{p.suffix}")


class AtomicFile:
    """A pending output: write :attr:`tmp`, then :meth:`commit` (rename to :attr:`path`) or :meth:`discard`.

    For writers whose lifetime spans several calls (e.g. a video encoder); in a block use :func:`atomic_path`.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = temp_name(self.path)

    def start(self) -> Path:
        """Create the target's folder when missing; returns the temporary path to write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.tmp

    def commit(self) -> Path:
        """Rename the finished temporary file to the final name (atomic within a file system)."""
        os.replace(self.tmp, self.path)
        return self.path

    def discard(self) -> None:
        """Delete the temporary file if it is there (never a folder); the final name is left untouched."""
        try:
            self.tmp.unlink()
        except (FileNotFoundError, IsADirectoryError):
            pass


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder (see :func:`temp_name`); it is renamed to ``path``
    when the block completes and deleted if the block raises (KeyboardInterrupt included)."""
    pending = AtomicFile(path)
    try:
        yield pending.start()
        pending.commit()
    finally:
        pending.discard()


def atomic_write(path: str | os.PathLike, data: bytes | str, *, fsync: bool = True) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` through a temporary file; with ``fsync``
    the bytes reach the disk before the rename (readers never see half a file, even after a power
    loss). Returns ``path``."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(raw)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)
