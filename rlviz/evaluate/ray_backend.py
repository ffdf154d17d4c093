"""``--ray [ADDRESS]``: the worker pool's tasks as Ray tasks, on a local Ray instance or an existing
cluster (``auto``, ``ray://host:port``, ``host:port``). ``pip install "rlviz[ray]"``.

The same interface as :class:`rlviz.evaluate.workers.WorkerPool` (``size``, ``map(fn, tasks, progress)``), so
the shards and the merge are the same code. Large values (the checkpoint's bytes) go through Ray's object
store with :meth:`RayPool.put`, so workers need no shared filesystem. A task whose worker dies is re-run
once by Ray (``max_retries=1``); workers report finished episodes to one progress queue (an actor made when the
pool starts, so its start overlaps the driver's), a batch every quarter second.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from ..choices import RAY_LOCAL as LOCAL
from ..errors import RlvizError, UsageError, WorkerError, require

__all__ = ["RayPool", "LOCAL"]


#: Seconds between a Ray worker's progress reports (finished episodes' returns, sent together).
REPORT_EVERY_S = 0.25


def _run(fn: Callable, task, threads: int, queue):
    """A Ray task: one thread policy per worker; finished episodes' returns to the driver's queue, in batches."""
    import torch

    torch.set_num_threads(int(threads))
    if queue is None:
        return fn(task, None)
    pending, last = [], [time.monotonic()]

    def progress(ret: float) -> None:
        pending.append(float(ret))
        if time.monotonic() - last[0] >= REPORT_EVERY_S:
            queue.put_nowait_batch(pending)
            pending.clear()
            last[0] = time.monotonic()

    result = fn(task, progress)
    if pending:
        queue.put_nowait_batch(pending)
    return result


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


class RayPool:
    """Run ``fn(task, progress)`` over tasks as Ray tasks; results in order. Leaves an existing Ray
    connection of the caller alone; shuts down the instance it started."""

    def __init__(self, address: str | None = LOCAL, workers: int | None = None, threads: int = 1):
        self.ray = require("ray", "ray", "--ray")
        self.threads = int(threads)
        self._own = not self.ray.is_initialized()
        if self._own:
            options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            try:
                if address in (None, LOCAL):  # the run's own instance: workers at normal priority (Ray's
                    # default, nice 15, starves them on a busy machine), as --workers processes are
                    self.ray.init(num_cpus=workers, _system_config={"worker_niceness": 0}, **options)
                else:
                    _check_reachable(address)
                    self.ray.init(address=address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UsageError(f"--ray {address}: could not connect to a Ray cluster ({exc}); use 'auto' for "
                                 "the cluster this machine belongs to, ray://HOST:PORT, or no address for a "
                                 "local instance.") from None
        #: CPUs the tasks can use (the cluster's), to size the shards
        self.size = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self._remote = self.ray.remote(num_cpus=1, max_retries=1)(_run)
        from ray.util.queue import Queue

        self._queue = Queue(actor_options={"num_cpus": 0})

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def warm(self, fn: Callable, task) -> None:
        """Run ``fn(task, None)`` once per CPU now and forget it: the workers start and load (e.g. the agent)
        while the driver does the same. A failure there is ignored; the real tasks meet it again."""
        self._warming = [self._remote.options(max_retries=0).remote(fn, task, self.threads, None)
                         for _ in range(self.size)]

    def put(self, value):
        """``value`` in the object store; the reference travels in tasks (``ray.get`` it there)."""
        return self.ray.put(value)

    def map(self, fn: Callable, tasks: list, progress: Callable | None = None, what: str = "task") -> list:
        queue = self._queue if progress is not None else None
        refs = [self._remote.remote(fn, t, self.threads, queue) for t in tasks]
        pending = list(refs)
        try:
            while pending:
                _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0.2)
                self._drain(queue, progress)
            results = [self._get(r, t, what) for r, t in zip(refs, tasks)]
            self._drain(queue, progress)
            return results
        except BaseException:
            for r in refs:
                self.ray.cancel(r, force=True)
            raise

    @staticmethod
    def _drain(queue, progress) -> None:
        if queue is None:
            return
        n = queue.qsize()
        if n:
            for ret in queue.get_nowait_batch(n):
                progress(ret)

    def _get(self, ref, task, what: str):
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, RlvizError):
                raise cause from None
            raise WorkerError(f"A Ray task failed running {what} {task}: {type(cause).__name__}: {cause}") from None
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.OutOfMemoryError) as exc:
            raise WorkerError(f"A Ray worker died twice running {what} {task} ({type(exc).__name__}); no outputs "
                              "were written. Check the cluster's memory or run with fewer workers.") from None

    def close(self) -> None:
        if self.ray.is_initialized():
            self._queue.shutdown()
        if self._own and self.ray.is_initialized():
            self.ray.shutdown()
