"""A recorder's writing, off the training loop's thread: one worker thread runs the jobs it is given in order
(frames piped to ffmpeg, videos finished, panels drawn), so ``env.step()`` hands a frame over and returns.

What may wait: memory is bounded: frames waiting to be written are held up to :data:`MAX_PENDING_BYTES` and
finished videos waiting to be drawn up to :data:`MAX_PENDING_VIDEOS` (their frames are on disk); beyond that
``submit`` blocks until the thread catches up. A job that raised makes the next ``submit`` or ``wait`` raise it
(in the loop's thread), so no failure is lost; the jobs after it still run. ``wait()`` returns once every job submitted so far has run.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["BackgroundWriter", "MAX_PENDING_BYTES", "MAX_PENDING_VIDEOS", "lower_thread_priority"]

#: bytes of frames that may wait for the writer thread before ``submit`` blocks (~22 CartPole or ~160 Atari frames)
MAX_PENDING_BYTES = 16 << 20
#: finished videos that may wait to be drawn and encoded before ``submit`` blocks
MAX_PENDING_VIDEOS = 4


def lower_thread_priority(by: int = 10) -> None:
    """Run the calling thread (and the processes it starts afterwards, e.g. ffmpeg, which inherit it) ``by`` nice
    levels below the process (at most 19): a recorder's drawing and encoding take the CPU the training loop leaves.
    Linux sets the niceness per thread; elsewhere (or when refused) nothing changes."""
    try:
        tid = threading.get_native_id()
        want = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + int(by))
        if sys.platform.startswith("linux") and os.getpriority(os.PRIO_PROCESS, tid) < want:
            os.setpriority(os.PRIO_PROCESS, tid, want)
    except (AttributeError, OSError):  # (no getpriority: Windows; refused: a sandbox)
        pass


class BackgroundWriter:
    """Runs submitted jobs in submission order on one daemon thread (started by the first job)."""

    def __init__(self, name: str = "rlviz-recorder") -> None:
        self.name = name
        self._jobs: deque[tuple[Callable[..., Any], tuple[Any, ...], int, bool]] = deque()
        self._cond = threading.Condition()
        self._bytes = self._videos = 0
        self._running = False  # a job is being run
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._worker: Any = None  # its drawing process (rlviz.record.agents.draw_worker.DrawWorker), made by worker()

    def submit(self, fn: Callable[..., Any], *args: Any, nbytes: int = 0, video: bool = False) -> None:
        """Run ``fn(*args)`` after the jobs before it. ``nbytes``: memory the job holds until it runs; ``video``:
        it finishes a video (both only bound how much may wait). While the interpreter is finalizing (a recorder
        collected at exit) no thread can start: the job runs here, now."""
        if sys.is_finalizing():
            fn(*args)
            return
        with self._cond:
            self._raise()
            while self._jobs and ((nbytes and self._bytes + nbytes > MAX_PENDING_BYTES)
                                  or (video and self._videos >= MAX_PENDING_VIDEOS)):
                self._cond.wait()
                self._raise()
            self._jobs.append((fn, args, nbytes, video))
            self._bytes += nbytes
            self._videos += video
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait(self) -> None:
        """Block until every job submitted so far has run; raise the first error a job raised."""
        with self._cond:
            while self._jobs or self._running:
                self._cond.wait()
            self._raise()

    def worker(self) -> Any:
        """This writer's drawing process (a :class:`~rlviz.record.agents.draw_worker.DrawWorker`; its process starts with its
        first job), for jobs that draw out of the loop's interpreter."""
        if self._worker is None:
            from .agents.draw_worker import DrawWorker

            self._worker = DrawWorker()
        return self._worker

    def stop_worker(self) -> None:
        """End the drawing process, if one was started (after the job it holds; a later job starts another)."""
        worker = self._worker
        if worker is not None:
            worker.close()

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._jobs and not self._running

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    if not self._cond.wait(timeout=5.0) and not self._jobs:
                        self._thread = None  # idle: let the thread end; the next submit starts another
                        return
                fn, args, nbytes, video = self._jobs.popleft()
                self._running = True
            try:
                fn(*args)
            except BaseException as exc:  # handed to the loop's thread (the first one; later jobs still run)
                with self._cond:
                    self._error = self._error or exc
            finally:
                with self._cond:
                    self._running = False
                    self._bytes -= nbytes
                    self._videos -= video
                    self._cond.notify_all()
