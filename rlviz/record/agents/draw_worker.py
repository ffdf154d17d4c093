"""A recorder's drawing process: a multi-agent recorder's panel videos are drawn and encoded in a separate Python
process (``python -m rlviz.record.agents.draw_worker``), not on a thread of the training loop's interpreter.

Why: drawing a frame of panels is ~0.8 ms of Python that holds the interpreter's lock; on the recorder's writer thread
it takes that time from the loop, whose ``env.step()`` waits for the lock. In a process of its own the drawing runs
beside the loop; the writer thread only waits for the reply (waiting releases the lock).

:class:`DrawWorker` (one per recorder, owned by its :class:`~rlviz.record.writer.BackgroundWriter`):
``start(preload)`` starts the process ahead of its first job (importing ``preload``'s modules while the loop plays);
``run(fn, *args)`` starts it if it is not running, hands it ``fn`` (a module-level function, sent by name) and its
arguments (pickled: arrays, and spools by path: :class:`~rlviz.episode.trace.SpoolArray`), waits for the result and
returns it, or raises the exception ``fn`` raised there. ``close()`` ends the process: its input closed, it finishes
the job it holds and exits. A worker whose process cannot start, dies mid-job, or cannot be sent the arguments raises
:class:`WorkerGone` (the caller then draws on its own thread); the next ``run`` starts a fresh process.

Ctrl-C and kills. The process runs in a session (and process group) of its own and ignores SIGINT: a Ctrl-C at the terminal reaches
the loop only, which finishes (or drops) its videos as it does without this process. The loop killed outright
(SIGKILL): the process reads the end of its input, finishes the job it holds (an ended episode's video is written
whole, under its final name) and exits; nothing waits for it. The process killed: its partial file is deleted by the
caller's retry or, at the latest, by the next recorder (:mod:`rlviz.record.leftovers`: it is named for its pid).

Protocol (stdin / stdout of the process): each message the mark ``RLVZ`` and an 8-byte little-endian length, then a
pickle (anything else read is taken as the other side gone): to the process
``(module, qualname, args)`` (an empty message: end); back ``(True, result)`` or ``(False, exception)``. A process
forked from the loop closes its copies of the pipes, so they never keep a drawing process waiting. Once it runs, the process's fd 1 is
its stderr and fd 0 ``/dev/null``: prints, ffmpeg and their children cannot garble the replies or read the jobs.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from typing import IO, Any

__all__ = ["DrawWorker", "WorkerGone", "main"]

_HEADER = struct.Struct("<4sQ")  # a mark and the pickle's length
_MARK = b"RLVZ"
#: the longest message either side accepts (a job holds numbers and spool paths, never frames)
MAX_MESSAGE = 1 << 30
#: how much lower the drawing process's priority is than the loop's (``nice``; its ffmpeg inherits it)
NICE = 10


class WorkerGone(Exception):
    """The drawing process could not take the job (it could not start, it ended before replying, or the job's
    arguments cannot be pickled): draw on this side instead."""


def _send(fh: IO[bytes], data: bytes) -> None:
    fh.write(_HEADER.pack(_MARK, len(data)))
    fh.write(data)
    fh.flush()


def _recv(fh: IO[bytes]) -> bytes | None:
    """One message's bytes; None at the end of the input, a message cut short by it, or what is not a message
    (something else wrote on the pipe: the other side is then treated as gone)."""
    header = fh.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    mark, size = _HEADER.unpack(header)
    if mark != _MARK or size > MAX_MESSAGE:
        return None
    data = fh.read(size)
    return data if len(data) == size else None


def _how(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


#: every DrawWorker of this process (a forked child lets go of their pipes: :func:`_forget_in_child`)
_WORKERS: weakref.WeakSet[DrawWorker] = weakref.WeakSet()


class DrawWorker:
    """One drawing process, started by the first :meth:`run` (see the module docstring)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        _WORKERS.add(self)

    @property
    def pid(self) -> int | None:
        """The running process's pid (None before the first job and after :meth:`close`)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the drawing process; its result, or the exception it raised there."""
        name = getattr(fn, "__qualname__", "")
        if "<" in name or not getattr(fn, "__module__", None):
            raise WorkerGone(f"{fn!r} is not a module-level function; the drawing process imports what it runs by name.")
        try:
            job = pickle.dumps((fn.__module__, name, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an argument of the caller's making: drawn on its side instead
            raise WorkerGone(f"the job's arguments cannot be sent to the drawing process ({type(exc).__name__}: {exc})") from None
        with self._lock:
            proc = self._start(())
            try:
                _send(proc.stdin, job)  # type: ignore[arg-type]  # (a pipe)
                reply = _recv(proc.stdout)  # type: ignore[arg-type]
            except OSError:  # (a broken pipe: the process is gone)
                reply = None
            if reply is None:
                self._proc = None
                code = _stop(proc, kill=True)
                raise WorkerGone(f"rlviz's drawing process (pid {proc.pid}) ended before it finished its job ({_how(code)})")
        try:
            ok, value = pickle.loads(reply)
        except Exception as exc:  # noqa: BLE001 - an exception of the job that does not unpickle here
            from ...errors import VideoError

            raise VideoError(f"rlviz's drawing process failed and its error could not be read back ({exc}).") from None
        if ok:
            return value
        raise value

    def close(self, timeout: float = 120.0) -> None:
        """End the process: it finishes the job it holds (a job in flight on another thread is waited for)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc, timeout=timeout)

    def start(self, preload: tuple[str, ...] = ()) -> None:
        """Start the process now if it is not running; it imports the ``preload`` modules before reading a job. Never
        waits for a job in flight (the process is running then)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._start(preload)
        finally:
            self._lock.release()

    def _start(self, preload: tuple[str, ...]) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        if proc is not None:
            _stop(proc)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the folder above rlviz/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        if not sys.executable:
            raise WorkerGone("this Python has no sys.executable to start the drawing process with")
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "rlviz.record.agents.draw_worker", *preload], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, env=env, start_new_session=True)
        except OSError as exc:
            raise WorkerGone(f"rlviz's drawing process could not start ({exc})") from None
        return self._proc

    def __del__(self) -> None:  # pragma: no cover - best effort: the process ends at the end of its input
        proc = self._proc
        if proc is not None:
            for fh in (proc.stdin, proc.stdout):
                try:
                    if fh is not None:
                        fh.close()
                except Exception:  # noqa: S110
                    pass


def _forget_in_child() -> None:
    """In a process forked from the loop (a ``fork`` process pool, a vector env's workers): the drawing processes
    are the parent's; the child closes its copies of their pipes (so only the parent's close ends them) and would
    start its own."""
    for worker in list(_WORKERS):
        proc, worker._proc, worker._lock = worker._proc, None, threading.Lock()
        for fh in (proc.stdin, proc.stdout) if proc is not None else ():
            try:
                if fh is not None:
                    fh.close()
            except OSError:
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _stop(proc: subprocess.Popen[bytes], kill: bool = False, timeout: float = 120.0) -> int | None:
    """Tell ``proc`` to end (an empty message), close its pipes and wait for it (``kill``: at once); its exit status."""
    if kill and proc.poll() is None:
        proc.kill()
    elif proc.stdin is not None:
        try:
            _send(proc.stdin, b"")
        except OSError:
            pass
    for fh in (proc.stdin, proc.stdout):
        try:
            if fh is not None:
                fh.close()
        except OSError:
            pass
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _call(job: bytes) -> tuple[bool, Any]:
    try:
        module, name, args = pickle.loads(job)
        fn: Any = importlib.import_module(module)
        for part in name.split("."):
            fn = getattr(fn, part)
        return True, fn(*args)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the recorder
        if hasattr(exc, "add_note"):  # where it was raised, shown with the recorder's traceback (Python 3.11+)
            exc.add_note(f"(raised in rlviz's drawing process, pid {os.getpid()}:\n"
                         + "".join(traceback.format_tb(exc.__traceback__)[-3:]).rstrip() + ")")
        return False, exc


def main(preload: list[str] | None = None) -> int:
    """The drawing process: import ``preload`` (default: the command line's module names), then run the jobs read
    from stdin until its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the loop's: it decides what is finished
    try:
        os.nice(NICE)  # the loop first: this process (and its ffmpeg) takes the CPU the loop leaves
    except (OSError, AttributeError):  # (a platform without nice)
        pass
    jobs, replies = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    for module in sys.argv[1:] if preload is None else preload:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: S112, BLE001 - a job that needs it raises the error, back to the recorder
            continue
    while True:
        job = _recv(jobs)
        if not job:
            return 0  # the recorder closed it (an empty message), or the loop is gone (the end of the input)
        reply = _call(job)
        del job
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a result or an exception that does not pickle: its words go back
            value = reply[1]
            data = pickle.dumps((False, RuntimeError(f"{type(value).__name__}: {value}")))
        del reply
        try:
            _send(replies, data)
        except OSError:  # the loop is gone (killed): the job it handed over is done; nothing waits for more
            return 0


if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)  # every job's files are complete and its ffmpeg waited for: no teardown to wait through
