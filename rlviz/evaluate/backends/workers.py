"""Scale-out of rollouts: seed-contiguous shards, an exact merge, and a pool of local worker processes.

An episode's outcome depends only on (agent, env, its seed, flags): each episode has its own reset seed and
action RNG (:func:`rlviz.evaluate.rollouts.rollout.episode_seed_for`). So the episodes ``[0, N)`` split into shards
``[a, b)`` that run anywhere (``RolloutPlan(..., first_episode=a)``), and the merge (rows sorted by episode,
heatmap counts summed) is the single-process result.

:class:`WorkerPool` runs top-level functions ``fn(task, progress)`` in ``N`` spawned processes (one torch
thread each by default). A worker that dies (killed, out of memory) has its task re-run once on a fresh
process (its progress reports are not counted twice); a second death raises
:class:`~rlviz.errors.WorkerError`. The pool's workers can also share a run's episodes out one at a time as
their envs free up (:func:`claimed_indices`, ``map(..., shared_from=)``): no worker idles while another still
holds a long shard, and each keeps its envs for the whole run. Ctrl-C or any error stops every worker (asked, then SIGTERM, which runs
the worker's cleanup, then SIGKILL); no process outlives the pool, and a worker whose driver dies gets SIGTERM.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import pickle
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from typing import Any, Protocol

from ...errors import RlvizError, UsageError, WorkerError
from ..failures.heatmap import FailureHeatmap
from ..rollouts.rollout import RolloutResult

__all__ = ["Backend", "shard_ranges", "merge_rollouts", "WorkerPool", "WorkerDied", "claimed_indices", "died_twice",
           "CLAIM_WAIT_S", "KILL_HOOK", "MIN_SHARD_WAVES"]

#: Test hook: ``"<n>:<marker file>"`` makes the worker running a map's n-th rollout task (one with a
#: ``first_episode``) SIGKILL itself after its first episode, once (when the marker file does not exist yet) or,
#: with the marker ``always``, every time; ``n`` = ``*``: whichever task (the workers claim episodes from one shared
#: counter, so a loaded machine may give one worker every episode before another has started).
KILL_HOOK = "RLVIZ_TEST_KILL_SHARD"

_CLAIMS = None  # in a worker: the pool's shared counter of the next episode index (see claimed_indices)

#: Seconds a worker waits for the shared counter's lock before it stops claiming. Only a worker killed while it
#: held the lock (a window of microseconds) makes the others wait: they return what they have, and the driver's
#: re-run of the missing episodes plays the rest; the pool then gives its workers a new counter.
CLAIM_WAIT_S = 10.0


#: A shard's own cost is about one wave of its envs (building them: 0.15 s each for ALE; the last episodes'
#: padded forwards while the other envs sit idle), measured at ~1/W of a shard of W waves (MinAtar, 125 episodes on
#: 16 envs: +11%; ALE, 50 episodes: +33%). So a worker gets more than one shard only when each keeps this many waves.
MIN_SHARD_WAVES = 16


def shard_ranges(episodes: int, workers: int, num_envs: int = 16) -> list[range]:
    """Seed-contiguous shards of ``range(episodes)``, of equal size (within one episode) and a multiple of
    ``workers`` in number, so every worker gets the same share: one each, up to four each (the pool hands them
    out as workers free up: balance when episode lengths or the workers' speeds differ) while every shard keeps
    :data:`MIN_SHARD_WAVES` waves of ``num_envs`` episodes. Results do not depend on the split."""
    episodes, workers = int(episodes), max(1, int(workers))
    per_worker = max(1, min(4, episodes // max(1, workers * MIN_SHARD_WAVES * int(num_envs))))
    n = max(1, min(workers * per_worker, episodes))
    bounds = [round(i * episodes / n) for i in range(n + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def merge_rollouts(parts: list[RolloutResult], wall_s: float) -> RolloutResult:
    """One :class:`RolloutResult` from parts of the same rollout (shards, or the episodes each worker claimed:
    any split of the indices): rows by episode, heatmaps summed."""
    if not parts:
        raise UsageError("merge_rollouts() received no shards; pass at least one RolloutResult.")
    parts = sorted(parts, key=lambda r: r.episodes[0].index if r.episodes else float("inf"))
    episodes = tuple(sorted((e for p in parts for e in p.episodes), key=lambda e: e.index))
    indices = [e.index for e in episodes]
    if not indices or indices != list(range(indices[0], indices[0] + len(indices))):
        raise UsageError("merge_rollouts(): the shards overlap or leave gaps; pass each episode range once.")
    heatmaps = [p.heatmap for p in parts if p.heatmap is not None]  # the first shard's background, as one run's
    heatmap = FailureHeatmap.merged(heatmaps) if heatmaps else None
    return replace(parts[0], episodes=episodes, heatmap=heatmap, steps=sum(p.steps for p in parts), wall_s=wall_s)


@dataclass(frozen=True)
class WorkerDied:
    """In place of a task's result (``map(..., retry=False)``): its worker died; ``how``: "signal 9", "exit code 1"."""

    how: str


def died_twice(how: str, doing: str) -> WorkerError:
    """The error for work whose worker died again when re-run (``how``: "signal 9"; ``doing``: what it ran)."""
    return WorkerError(f"A worker died twice ({how}) running {doing}; no outputs were written. "
                       "Check memory (each worker holds its own envs and policy) or run with fewer --workers.")


# -- the worker side ---------------------------------------------------------------------------------------
def claimed_indices(stop: int):
    """In a pool's worker, during ``map(..., shared_from=start)``: the indices ``[start, stop)`` this worker claims,
    one at a time as it asks for the next, from a counter all the pool's workers share (each index goes to exactly
    one of them). Give it to :func:`~rlviz.evaluate.rollouts.rollout.rollout` as ``indices``: its envs claim episodes as
    they free up."""
    if _CLAIMS is None:
        raise UsageError("claimed_indices() works in a WorkerPool's worker only; use range(start, stop) elsewhere.")
    lock = _CLAIMS.get_lock()
    while True:
        if not lock.acquire(timeout=CLAIM_WAIT_S):
            return  # held by a worker that died: see CLAIM_WAIT_S
        try:
            k = _CLAIMS.value
            if k >= stop:
                return
            _CLAIMS.value = k + 1
        finally:
            lock.release()
        yield k


def _kill_hook(task, tid: int) -> Callable | None:
    """The test hook's progress wrapper for this task, or None (see :data:`KILL_HOOK`)."""
    spec = os.environ.get(KILL_HOOK)
    if not spec or getattr(task, "first_episode", None) is None:
        return None
    at, _, marker = spec.partition(":")
    if at != "*" and int(at) != int(tid):
        return None
    if marker != "always":
        if os.path.exists(marker):
            return None
        open(marker, "w").close()
    return lambda: os.kill(os.getpid(), signal.SIGKILL)


def _on_parent_death(sig: int) -> None:
    """Linux: the kernel sends ``sig`` to this process when its parent (the driver) dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pipe's EOF stops an idle worker instead
        pass


def _terminated(signum, frame):
    raise SystemExit(128 + signum)  # unwinds: temporary folders are removed, ffmpeg processes ended


def _worker_main(conn, threads: int, preload: tuple = (), claims=None) -> None:
    """A worker: run ``(fn, task)`` messages until told to stop; report progress, results and errors."""
    global _CLAIMS
    _CLAIMS = claims
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C and stops us
    signal.signal(signal.SIGTERM, _terminated)
    _on_parent_death(signal.SIGTERM)
    import torch

    torch.set_num_threads(int(threads))
    for module in preload:
        importlib.import_module(module)
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the driver is gone
            return
        if msg is None:
            return
        tid, fn, task = msg
        kill = _kill_hook(task, tid)

        def progress(ret: float, _tid=tid, _kill=kill) -> None:
            conn.send(("progress", _tid, float(ret)))
            if _kill is not None:
                _kill()

        try:
            conn.send(("done", tid, fn(task, progress)))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which raises it
            conn.send(("error", tid, _portable(exc)))


def _portable(exc: BaseException):
    """An RlvizError itself when it pickles (it keeps its class and exit code), else a one-line WorkerError."""
    if isinstance(exc, RlvizError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:
            pass
    return WorkerError(f"A worker failed: {type(exc).__name__}: {exc} (run with --workers 1 --debug for the traceback).")


# -- the driver side ---------------------------------------------------------------------------------------
@dataclass
class _Worker:
    process: mp.Process
    conn: Any  # the driver's end of the worker's Pipe
    task: int | None = None


class Backend(Protocol):
    """Where the jobs run their units: a :class:`WorkerPool` (``--workers N``) or Ray's pool (``--ray``,
    :class:`rlviz.evaluate.backends.ray_pool.RayPool`); None everywhere means this process."""

    @property
    def size(self) -> int:
        """How many units run at once (workers, or the cluster's CPUs)."""
        ...

    def map(self, fn: Callable[..., Any], tasks: list[Any], progress: Callable[[Any], None] | None = None,
            what: str = "task", meanwhile: Callable[[], None] | None = None) -> list[Any]:
        """``fn(task, progress)`` for each task, the results in order."""
        ...


class WorkerPool:
    """``workers`` spawned processes; :meth:`map` runs ``fn(task, progress)`` over tasks, results in order.

    Use as a context manager (``with WorkerPool(4) as pool``): leaving it stops every worker."""

    #: its workers can share a run's indices out (:func:`claimed_indices`); Ray's pool cannot
    shares_indices = True

    def __init__(self, workers: int, threads: int = 1, preload: tuple = (), start: str = "spawn"):
        """preload: modules each worker imports as it starts. start: "spawn" (fresh interpreters, started on
        entering the pool, so their imports overlap the caller's) or "fork" (Linux: started at the first
        :meth:`map`, at once, with everything this process has imported and loaded by then, as PyTorch's
        DataLoader workers are)."""
        if isinstance(workers, bool) or int(workers) < 1:
            raise UsageError(f"workers={workers!r}; expected a positive number of worker processes.")
        if start not in mp.get_all_start_methods():
            raise UsageError(f"start={start!r}; this platform starts processes with one of "
                             f"{', '.join(mp.get_all_start_methods())}.")
        self.size, self.threads, self.preload = int(workers), int(threads), tuple(preload)
        self._ctx: Any = mp.get_context(start)
        self._workers: list[_Worker] = []
        self._claims = self._ctx.Value("q", 0)  # the next index claimed_indices() hands out (shared_from=)
        self._sharing = self._suspect = False  # a shared map runs; a worker died in one (its lock may be held)

    def __enter__(self) -> WorkerPool:
        if self._ctx.get_start_method() == "fork":  # forked at the first map(), with what this process has by then
            return self
        try:
            while len(self._workers) < self.size:
                self._spawn()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self) -> _Worker:
        here, there = self._ctx.Pipe()
        p = self._ctx.Process(target=_worker_main, args=(there, self.threads, self.preload, self._claims), daemon=True,
                              name="rlviz-worker")
        p.start()
        there.close()
        w = _Worker(p, here)
        self._workers.append(w)
        return w

    def map(self, fn: Callable, tasks: list, progress: Callable | None = None, what: str = "task",
            meanwhile: Callable | None = None, shared_from: int | None = None, retry: bool = True) -> list:
        """Run ``fn(task, progress)`` for each task; ``progress(x)`` gets what the workers report. ``meanwhile()``
        runs once here as soon as the workers have their first tasks (work the caller needs afterwards: this
        process otherwise idles; their reports wait in the pipes). ``shared_from``: the first index the tasks'
        :func:`claimed_indices` hand out. ``retry=False``: a task whose worker dies is not re-run; its result is
        a :class:`WorkerDied` (the caller re-runs what was lost: tasks sharing indices cannot be re-run whole)."""
        tasks = list(tasks)
        self._sharing = shared_from is not None
        if self._sharing:
            if self._suspect:  # the workers hold a counter whose lock a dead worker may have kept: new ones, new counter
                self.close()
                self._claims, self._suspect = self._ctx.Value("q", 0), False
            self._claims.get_obj().value = int(shared_from or 0)  # (no worker claims between maps: no lock needed)
        results: dict[int, object] = {}
        queue, deaths = deque(range(len(tasks))), [0] * len(tasks)
        self._counted, self._reported = [0] * len(tasks), [0] * len(tasks)  # progress per task: shown, this run
        while len(self._workers) < min(self.size, len(tasks)):
            self._spawn()
        while len(results) < len(tasks):
            for w in self._workers:
                if w.task is None and queue:
                    w.task = queue.popleft()
                    self._reported[w.task] = 0
                    w.conn.send((w.task, fn, tasks[w.task]))
            if meanwhile is not None:
                meanwhile, todo = None, meanwhile
                todo()  # type: ignore[misc]  # the callable meanwhile held
            ready = wait([w.conn for w in self._workers] + [w.process.sentinel for w in self._workers], timeout=1.0)
            for w in list(self._workers):
                if w.conn in ready and self._receive(w, results, progress):
                    continue
                if w.conn in ready or w.process.sentinel in ready or not w.process.is_alive():
                    self._died(w, tasks, queue, deaths, what, None if retry else results)  # its pipe closed, or it exited
        return [results[i] for i in range(len(tasks))]

    def _receive(self, w: _Worker, results: dict, progress) -> bool:
        """Handle one message from ``w``; False when its pipe is closed (it died)."""
        try:
            kind, tid, payload = w.conn.recv()
        except (EOFError, OSError):
            return False
        if kind == "progress":
            self._reported[tid] += 1
            if self._reported[tid] > self._counted[tid]:  # a re-run reports the same episodes again: once is shown
                self._counted[tid] += 1
                if progress is not None:
                    progress(payload)
            return True
        w.task = None
        if kind == "error":
            raise payload
        results[tid] = payload
        return True

    def _died(self, w: _Worker, tasks, queue, deaths, what: str, results: dict | None = None) -> None:
        """A dead worker: replaced; its task re-run once (a second death raises), or, with ``results``, given
        a :class:`WorkerDied` result."""
        w.process.join(timeout=5)
        if w.process.is_alive():  # its pipe broke but it still runs: end it
            w.process.kill()
            w.process.join()
        self._workers.remove(w)
        w.conn.close()
        if w.task is None:
            return
        deaths[w.task] += 1
        self._suspect = self._suspect or self._sharing
        code = w.process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if results is not None:
            results[w.task] = WorkerDied(how)
            if queue:
                self._spawn()
            return
        if deaths[w.task] > 1:
            raise died_twice(how, f"{what} {tasks[w.task]}")
        queue.appendleft(w.task)
        self._spawn()

    def close(self) -> None:
        """Stop every worker: ask, then SIGTERM (the worker cleans up), then SIGKILL; join all (no orphans)."""
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 1.0
        for w in self._workers:
            w.process.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            if w.process.is_alive():
                w.process.terminate()
                w.process.join(timeout=5.0)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
        self._workers.clear()
