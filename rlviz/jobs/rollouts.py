"""Stage 2 of the job skeleton (:mod:`rlviz.jobs.stages`), shared by render, compare (once per agent) and timeline
(once per checkpoint): the config's episodes of one agent, rolled out in this process or in the workers
(:func:`run_rollouts`), and the failure heatmap's files (:func:`write_heatmap`)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any, cast

from .. import progress
from ..attention.summary import attention_spec
from ..config import RenderConfig
from ..evaluate import RolloutResult, rollout
from ..evaluate.backends.workers import Backend, WorkerDied, WorkerPool, died_twice, merge_rollouts, shard_ranges
from ..evaluate.rollouts.plan import RolloutPlan, RolloutProbes
from ..sources import LoadedAgent
from .jax_stages import is_jax_agent, jax_rollouts
from .shards import ShardTask, run_shard, source_for
from .stages import background_frame

__all__ = ["run_rollouts", "write_heatmap", "import_now", "HEATMAP_IMPORTS"]


def run_rollouts(agent: LoadedAgent, config: RenderConfig, gamma: float, backend: Backend | None = None) -> RolloutResult:
    """The config's episodes of ``agent``: statistics and (with ``config.heatmap``) the failure heatmap.
    backend: None (this process) or a worker pool (:func:`rlviz.jobs.shards.open_backend`): the episodes run
    there as seed-contiguous shards, merged into the same result. A flax agent on a JAX env: the JAX engine's
    batched rollout (:func:`rlviz.jobs.jax_stages.jax_rollouts`; no workers)."""
    if is_jax_agent(agent):
        return cast(RolloutResult, jax_rollouts(agent, config, gamma))
    if backend is not None:
        return _run_sharded(backend, config, gamma)
    plan = RolloutPlan(config.episodes, seed=config.seed, num_envs=min(config.num_envs, config.episodes),
                       greedy=config.greedy, fail_on=config.fail_on, gamma=gamma, heatmap=bool(config.heatmap),
                       objects=config.objects if config.heatmap else None, progress=config.progress)
    return rollout(agent.recipe, agent.policy, plan, RolloutProbes(attention=attention_spec(config)))


def write_heatmap(result: RolloutResult, recipe: Any, out: Path, config: RenderConfig) -> tuple[Path | None, Path | None]:
    """heatmap.npz and heatmap.png in ``out`` when the rollout made a heatmap; (None, None) otherwise."""
    heatmap = result.heatmap
    if heatmap is None:
        return None, None
    if heatmap.background is None:
        heatmap.background = background_frame(recipe, config.seed)
    return heatmap.save(out / "heatmap.npz"), heatmap.plot(out / "heatmap.png", log=config.log_scale)


def _run_sharded(backend: Backend, config: RenderConfig, gamma: float) -> RolloutResult:
    source = source_for(config, backend)  # Ray: the checkpoint's bytes via the object store
    t0 = time.perf_counter()
    # this process idles while the workers run: it imports what it needs afterwards meanwhile
    meanwhile = (lambda: import_now(HEATMAP_IMPORTS)) if config.heatmap else None
    with progress.bar(config.episodes, "rollouts", unit="ep") as episodes_bar:
        report = lambda ret: episodes_bar.update(1, ret=f"{ret:.1f}")  # noqa: E731
        if getattr(backend, "shares_indices", False):
            parts = _run_shared(cast(WorkerPool, backend), source, config, gamma, report, meanwhile)
        else:
            tasks = [ShardTask(source, gamma, r.start, len(r))
                     for r in shard_ranges(config.episodes, backend.size, config.num_envs)]
            parts = backend.map(run_shard, tasks, progress=report, what="the rollout of", meanwhile=meanwhile)
    return merge_rollouts(parts, time.perf_counter() - t0)


def _run_shared(backend: WorkerPool, source: Any, config: RenderConfig, gamma: float, report: Any, meanwhile: Any) -> list[Any]:
    """The episodes shared out to the local workers one at a time as their envs free up (no worker idles while
    another holds a long shard; each builds its envs once). A dead worker's episodes (those it claimed and did
    not return) run again once, split over the workers; a second death raises WorkerError."""
    n, size = config.episodes, backend.size
    task = ShardTask(source, gamma, 0, n, shared=True, num_envs=min(config.num_envs, -(-n // size)))
    shown = [0]

    def count(ret: float) -> None:
        shown[0] += 1
        report(ret)

    parts = backend.map(run_shard, [task] * min(size, n), progress=count, what="the rollout of",
                        meanwhile=meanwhile, shared_from=0, retry=False)
    kept = [p for p in parts if not isinstance(p, WorkerDied)]
    if len(kept) == len(parts):
        return kept
    done = {e.index for p in kept for e in p.episodes}
    lost = [k for k in range(n) if k not in done]
    skip = [shown[0] - len(done)]  # the dead workers' episodes the bar has shown already

    def recount(ret: float) -> None:
        if skip[0] > 0:
            skip[0] -= 1
        else:
            report(ret)

    redo = [ShardTask(source, gamma, 0, n, indices=tuple(lost[i::size])) for i in range(min(size, len(lost)))]
    again: list[Any] = backend.map(run_shard, redo, progress=recount, what="the rollout of", retry=False)
    for t, r in zip(redo, again):
        if isinstance(r, WorkerDied):
            raise died_twice(r.how, f"the rollout of {t}")
    return kept + again


#: What :func:`write_heatmap` imports (matplotlib: ~1 s), imported while the workers roll out.
HEATMAP_IMPORTS = ("matplotlib.colors", "matplotlib.pyplot")


def import_now(names: Any) -> None:
    """Import ``names`` now; a failure is left to the import where the module is used, which reports it."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S110 - the module's user imports it again and says what is wrong
            pass

