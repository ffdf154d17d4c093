"""``--ray [ADDRESS]``: the worker pool's tasks on Ray, on a local Ray instance or an existing cluster
(``auto``, ``ray://host:port``, ``host:port``). ``pip install "rlviz[ray]"``.

The same interface as :class:`rlviz.evaluate.backends.workers.WorkerPool` (``size``, ``map(fn, tasks, progress)``), so
the shards and the merge are the same code, and the same design: one long-lived worker per CPU (a Ray actor)
runs the tasks one at a time, so what a task loads (the agent, kept by :mod:`rlviz.jobs.shards`) stays loaded
for the next. (Stateless Ray tasks measured 2.6-3.7x ``--workers``' wall time on 1000 MinAtar episodes: Ray
started and ended worker processes as it saw fit, up to 5 for 2 CPUs, and each new one imported torch and
loaded the agent again.) Large values (the checkpoint's bytes) go through Ray's object
store with :meth:`RayPool.put`, so workers need no shared filesystem.

Start-up overlaps the caller's: Ray starts (``ray.init``, the actors, :meth:`~RayPool.put`,
:meth:`~RayPool.warm`) on a thread of the pool while the caller loads its agent; the first :meth:`RayPool.size`
or :meth:`RayPool.map` waits for it. The thread lives as long as the pool: Ray's processes die with the thread
that started them (Linux's parent-death signal is per thread).

A task whose worker dies (killed, out of memory, its node lost) runs again once on a new actor (its progress
reports are not counted twice); a second death raises :class:`~rlviz.errors.WorkerError`. Workers report
progress (finished episodes' returns) as they go; the driver collects them every quarter second.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ...choices import RAY_LOCAL as LOCAL
from ...errors import RlvizError, UsageError, WorkerError, require

__all__ = ["RayPool", "LOCAL"]


#: Seconds between the driver's collections of the workers' progress reports.
REPORT_EVERY_S = 0.25
#: The actors' concurrency group of :meth:`_Runner.poll`, so it answers while a task runs.
_POLL_GROUP = "progress"


class _Runner:
    """A Ray actor: runs ``fn(task, progress)`` calls one at a time (so a loaded agent stays for the next) and
    keeps their progress reports until :meth:`poll` (another thread) or the end of the call collects them."""

    def __init__(self, threads: int):
        import torch

        torch.set_num_threads(int(threads))
        self._lock = threading.Lock()
        self._reports: list = []

    def run(self, fn: Callable, task, report: bool) -> tuple:
        """(``fn(task, progress)``, the progress reports :meth:`poll` has not collected)."""
        self.poll()
        result = fn(task, self._report if report else _ignore)
        return result, self.poll()

    def _report(self, value) -> None:
        with self._lock:
            self._reports.append(float(value))

    def poll(self) -> list:
        with self._lock:
            reports, self._reports = self._reports, []
        return reports


def _ignore(value) -> None:
    """The progress callback of a task whose reports nobody reads (a callable, as WorkerPool's workers pass)."""


class _Later:
    """An object-store reference still being made by the pool's start-up thread: the caller holds it like the
    reference, and it pickles (into a task's arguments) as the reference itself."""

    def __init__(self, future: Future):
        self._future = future

    def __reduce__(self):
        return _itself, (self._future.result(),)


def _itself(value):
    return value


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes (Ray retries an unreachable cluster for long), when ``[ray://]HOST:PORT``
    does not accept a connection."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and other forms: Ray resolves them
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"nothing accepts connections at {host}:{port}: {exc}") from None


def _connect_error(address: str | None, exc: BaseException) -> UsageError:
    return UsageError(f"--ray {address}: could not connect to a Ray cluster ({exc}); use 'auto' for the cluster "
                      "this machine belongs to, ray://HOST:PORT, or no address for a local instance.")


class RayPool:
    """Run ``fn(task, progress)`` over tasks on one Ray actor per CPU; results in order. Leaves an existing Ray
    connection of the caller alone (only its own actors end with the pool); shuts down the instance it started.

    Use as a context manager (``with RayPool() as pool``): leaving it ends the actors."""

    def __init__(self, address: str | None = LOCAL, workers: int | None = None, threads: int = 1):
        self.ray = require("ray", "ray", "--ray")
        self.threads = int(threads)
        self._own = not self.ray.is_initialized()
        self._actors: list = []
        self._size = 1
        if self._own and address not in (None, LOCAL):
            try:
                _check_reachable(address)
            except ConnectionError as exc:
                raise _connect_error(address, exc) from None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="rlviz-ray")  # runs its jobs in order
        self._started = self._thread.submit(self._start, address, workers)

    def _start(self, address: str | None, workers: int | None) -> None:
        ray = self.ray
        if self._own:
            options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            quiet = logging.getLogger("ray")  # its start-up notes (no SIGTERM handler off the main thread, auth)
            level = quiet.level
            quiet.setLevel(logging.ERROR)
            try:
                if address in (None, LOCAL):  # the run's own instance: workers at normal priority (Ray's
                    # default, nice 15, starves them on a busy machine), as --workers processes are
                    ray.init(num_cpus=workers, _system_config={"worker_niceness": 0}, **options)
                else:
                    ray.init(address=address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise _connect_error(address, exc) from None
            finally:
                quiet.setLevel(level)
        #: CPUs the tasks can use (the cluster's), to size the shards
        self._size = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._runner = ray.remote(num_cpus=1, concurrency_groups={_POLL_GROUP: 1})(_Runner)
        self._fill()

    def _fill(self) -> None:
        """One actor per CPU (they start now: their imports overlap the caller's work)."""
        while len(self._actors) < self._size:
            self._actors.append(self._runner.remote(self.threads))

    def _ready(self) -> None:
        self._started.result()  # raises what the start raised

    @property
    def size(self) -> int:
        self._ready()
        return self._size

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def put(self, value) -> _Later:
        """``value`` in the object store (once Ray is up); the reference travels in tasks (``ray.get`` it
        there)."""
        return _Later(self._thread.submit(self._put, value))

    def _put(self, value):
        self._ready()
        return self.ray.put(value)

    def warm(self, fn: Callable, task) -> None:
        """Run ``fn(task, None)`` once on every actor as soon as Ray is up, and forget it: the workers load (e.g.
        the agent) while the caller does the same. A failure there is ignored; the real tasks meet it again."""
        self._thread.submit(self._warm, fn, task)

    def _warm(self, fn: Callable, task) -> None:
        self._ready()
        for actor in self._actors:
            actor.run.remote(fn, task, False)

    def map(self, fn: Callable, tasks: list, progress: Callable | None = None, what: str = "task",
            meanwhile: Callable | None = None) -> list:
        """Run ``fn(task, progress)`` for each task; ``progress(x)`` gets what the workers report; ``meanwhile()``
        runs once here when the first tasks are sent (as :meth:`rlviz.evaluate.backends.workers.WorkerPool.map`)."""
        self._ready()
        self._fill()
        tasks = list(tasks)
        results: dict[int, object] = {}
        queue, idle, running = deque(range(len(tasks))), deque(self._actors), {}  # running: ref -> (actor, task)
        self._deaths, self._shown, self._told = [0] * len(tasks), [0] * len(tasks), [0] * len(tasks)
        try:
            while len(results) < len(tasks):
                while idle and queue:
                    actor, i = idle.popleft(), queue.popleft()
                    self._told[i] = 0
                    running[actor.run.remote(fn, tasks[i], progress is not None)] = (actor, i)
                if meanwhile is not None:
                    meanwhile, todo = None, meanwhile
                    todo()  # type: ignore[misc]  # the callable meanwhile held
                ready, _ = self.ray.wait(list(running), num_returns=1, timeout=REPORT_EVERY_S)
                if progress is not None:
                    self._collect(running, progress)
                for ref in ready:
                    actor, i = running.pop(ref)
                    done = self._result(ref, i, tasks[i], what)
                    if done is None:  # the actor died: a new one runs the task again
                        actor = self._replace(actor)
                        queue.appendleft(i)
                    else:
                        results[i] = done[0]
                        self._show(i, done[1], progress)
                    idle.append(actor)
            return [results[i] for i in range(len(tasks))]
        except BaseException:
            for actor, _ in running.values():  # stop what still runs; the next map makes new actors
                self.ray.kill(actor)
                self._actors.remove(actor)
            raise

    def _collect(self, running: dict, progress: Callable) -> None:
        """The running tasks' progress reports so far."""
        polls = [(i, actor.poll.options(concurrency_group=_POLL_GROUP).remote()) for actor, i in running.values()]
        for i, ref in polls:
            try:
                self._show(i, self.ray.get(ref, timeout=10.0), progress)
            except (self.ray.exceptions.RayActorError, self.ray.exceptions.GetTimeoutError):
                pass  # died (its task's result says so) or unreachable (the bar misses its reports, not the results)

    def _show(self, i: int, reports: list, progress: Callable | None) -> None:
        """Pass on task ``i``'s reports, but not again those an earlier (died) run of it passed on."""
        for value in reports:
            self._told[i] += 1
            if self._told[i] > self._shown[i]:
                self._shown[i] += 1
                if progress is not None:
                    progress(value)

    def _result(self, ref, i: int, task, what: str) -> tuple | None:
        """(result, its last progress reports), or None when the actor died the first time running task ``i``."""
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, RlvizError):
                raise cause from None
            raise WorkerError(f"A Ray task failed running {what} {task}: {type(cause).__name__}: {cause}") from None
        except (exceptions.RayActorError, exceptions.WorkerCrashedError, exceptions.NodeDiedError,
                exceptions.OutOfMemoryError) as exc:
            self._deaths[i] += 1
            if self._deaths[i] > 1:
                raise WorkerError(f"A Ray worker died twice running {what} {task} ({type(exc).__name__}); no outputs "
                                  "were written. Check the cluster's memory or run with fewer workers.") from None
            return None

    def _replace(self, actor):
        self.ray.kill(actor)
        new = self._runner.remote(self.threads)
        self._actors[self._actors.index(actor)] = new
        return new

    def close(self) -> None:
        """End the actors; shut down the Ray instance the pool started; end the start-up thread (last: Ray's
        processes die with it)."""
        try:
            self._ready()
        except BaseException:  # noqa: BLE001 - a failed start: nothing of it to end
            pass
        try:
            if self.ray.is_initialized():
                for actor in self._actors:
                    self.ray.kill(actor)
                if self._own:
                    _end_monitor(self.ray)
                    self.ray.shutdown()
        finally:
            self._actors.clear()
            self._thread.shutdown()


def _end_monitor(ray) -> None:
    """Kill the local instance's autoscaler monitor at once: ``ray.shutdown()`` otherwise gives it a second to
    exit (it ignores SIGTERM), a second of every run. (Ray's private node object; skipped if it changes.)"""
    node = getattr(getattr(ray, "_private", None), "worker", None)
    processes = getattr(getattr(node, "_global_node", None), "all_processes", None) or {}
    for info in processes.get("monitor", ()):
        process = getattr(info, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=5)
