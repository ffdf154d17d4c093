"""The CLI's start-up without Python's cyclic garbage collector.

A job's start (importing torch, gymnasium and rlviz, loading the agent) allocates a great many objects and frees few,
and the collector, triggered by allocation counts, runs full collections over everything imported so far: measured
on a one-episode MinAtar render, 5 full collections, 0.55 of its 3.7 CPU seconds. :func:`pause` (called by the
``rlviz`` command as its process starts, :mod:`rlviz.__main__`) turns collection off; :func:`resume` turns it back on
with everything that exists by then frozen (:func:`gc.freeze`: the imported modules and the loaded agent are never
scanned again), when the rollouts begin (:func:`rlviz.evaluate.rollouts.lockstep.run_lockstep`) or, whatever the job does, after
:data:`PAUSE_S` seconds. Only a pause begun here is resumed: a process that turned collection off itself keeps it off.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["pause", "resume", "PAUSE_S"]

#: The longest the collector stays off (a job that runs no rollout, or runs them only in worker processes).
PAUSE_S = 20.0

_paused = threading.Event()


def pause(seconds: float = PAUSE_S) -> None:
    """Turn collection off (when it is on) until :func:`resume`, at most ``seconds``."""
    if not gc.isenabled() or _paused.is_set():
        return
    gc.disable()
    _paused.set()
    timer = threading.Timer(seconds, resume)
    timer.daemon = True
    timer.start()


def resume() -> None:
    """Turn collection back on after :func:`pause` (the objects alive now frozen); nothing otherwise."""
    if _paused.is_set():
        _paused.clear()
        gc.freeze()
        gc.enable()
