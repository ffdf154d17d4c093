"""The recorders' drawing processes (``python -m rlviz.record.agents.draw_worker``) still running, found by what a test
gave its loop: the TMPDIR in their environment."""

from __future__ import annotations

import os
import time


def drawing_processes(tmpdir: os.PathLike[str] | str) -> list[int]:
    """Pids of the drawing processes running now whose TMPDIR is ``tmpdir`` (zombies count as ended)."""
    wanted = f"TMPDIR={os.fspath(tmpdir)}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"rlviz.record.agents.draw_worker" not in fh.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if wanted not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(pid))
    return found


def wait_no_drawing_process(tmpdir: os.PathLike[str] | str, timeout: float = 30.0) -> list[int]:
    """Wait until no drawing process of ``tmpdir`` runs; those still running after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := drawing_processes(tmpdir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
