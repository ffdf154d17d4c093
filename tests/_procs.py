"""Looking at processes from outside (Linux /proc): is a pid alive, which ffmpeg processes are running."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ffmpeg_pids(*, parent: int | None = None, mentioning: str | None = None) -> list[int]:
    """Live ffmpeg processes, optionally only children of ``parent`` or those whose command line
    contains ``mentioning`` (e.g. the folder they write into)."""
    found = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if b"ffmpeg" not in os.path.basename(argv[0]) or not alive(int(d)):
            continue
        if (parent is None or ppid == parent) and (mentioning is None or mentioning.encode() in b" ".join(argv)):
            found.append(int(d))
    return found
