"""``rlviz.render``: the whole job the CLI runs, as one library call.

The job skeleton's stages (:mod:`rlviz.jobs.stages`, shared with compare and timeline): resolve the agent ->
roll out N episodes (statistics, failure heatmap) -> summarise and diagnose -> replay chosen episodes through
:class:`~rlviz.record.RecordEpisode` (videos with panels and saliency) -> write outputs -> sinks -> the report page
from the run in memory.

Output layout (``out``: a folder of the run's own, written complete or not at all; see :mod:`rlviz.jobs.outdir`)::

    rlviz-run.json     what wrote the run, with which options
    summary.json       statistics over all episodes
    episodes.csv       one row per episode (seed, return, length, failures...)
    heatmap.png/.npz   failure heatmap (with --heatmap)
    videos/<label>-episode-<k>.mp4 (+ .npz per-step numbers)
    report.html        the page to look at: all of the above, each video beside its per-step trace (rlviz.report)
"""

from __future__ import annotations

import importlib
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from .. import progress
from ..attention.plot import plot_attention_at_failure
from ..attention.summary import attention_spec
from ..config import RenderConfig, parse_video_spec
from ..envs.jax_ids import is_jax_env_id
from ..episode import EpisodeResult
from ..errors import UsageError
from ..evaluate import RolloutResult, format_table, rollout
from ..evaluate.backends.threads import torch_threads
from ..evaluate.backends.workers import Backend, WorkerDied, WorkerPool, died_twice, merge_rollouts, shard_ranges
from ..evaluate.failures.objects import fallback_note
from ..evaluate.rollouts.plan import RolloutPlan, RolloutProbes
from ..evaluate.statistics.stats import write_episodes_csv, write_summary_json
from ..report import REPORT_NAME, write_report
from ..report.notebook import outputs_html
from ..sinks.base import Sink
from ..sinks.log import log_run
from ..sources import LoadedAgent
from .inputs import check_model_folders
from .render_agents import is_agents_agent, render_agents_into
from .render_jax import render_jax_into
from .shards import ShardTask, run_shard, source_for
from .skeleton import job_setup
from .stages import ATTENTION_PNG, background_frame, run_log, run_record, summarise
from .videos import MIN_VIDEO_SECONDS, VideoTask, record_episode, record_video_task, write_video_files

__all__ = ["RenderConfig", "RenderOutputs", "render", "parse_video_spec", "select_episodes", "run_rollouts",
           "write_heatmap", "record_videos", "import_now", "heatmap_note"]


@dataclass(frozen=True)
class RenderOutputs:
    """What :func:`render` wrote. ``summary`` is the dict in summary.json; ``table`` the terminal table."""

    out_dir: Path
    summary: dict[Any, Any]
    table: str
    summary_json: Path
    episodes_csv: Path
    heatmap_png: Path | None = None
    heatmap_npz: Path | None = None
    videos: tuple[Any, ...] = field(default_factory=tuple)
    report_html: Path | None = None

    def _repr_html_(self) -> str:
        """Notebooks: the statistics, the heatmap and the videos, inline."""
        return outputs_html(self.summary, self.heatmap_png, self.videos, self.report_html)

    @property
    def warnings(self) -> list[Any]:
        """The diagnostics of severity "warning" (``--strict`` exits 3 when there is any)."""
        return [f for f in self.summary.get("diagnostics", ()) if f["severity"] == "warning"]


def select_episodes(returns: np.ndarray, spec: list[tuple[str, Any]], seed: int = 0,
                    heatmap: Any = None) -> list[tuple[str, int]]:
    """Pick episode indices for each item of ``spec`` (:func:`parse_video_spec`); an episode is listed once, first
    label wins. ``episode`` items name an episode; ``failed-at`` items ((x, y), labelled "failed") select the
    episodes whose failures put an object on that pixel of ``heatmap`` (a FailureHeatmap with its per-episode
    contributions: :meth:`~rlviz.evaluate.failures.heatmap.FailureHeatmap.episodes_at`)."""
    returns = np.asarray(returns, dtype=np.float64)
    n = returns.shape[0]
    order = np.argsort(returns, kind="stable")  # ascending return; ties by episode index
    rng = np.random.default_rng(seed)
    chosen: list[tuple[str, int]] = []
    seen: set[int] = set()
    for kind, k in spec:
        if kind == "episode":
            if not 0 <= k < n:
                raise UsageError(f"--videos episode:{k}: the run has {n} episodes (0-{n - 1}); name one of them.")
            idx, kind = [k], "episode"
        elif kind == "failed-at":
            if heatmap is None:
                raise UsageError(f"--videos failed-at:{k[0]},{k[1]} selects by the failure heatmap; add --heatmap.")
            idx, kind = heatmap.episodes_at(k[1], k[0]), "failed"
        else:
            idx = _ranked(kind, min(k, n), n, order, rng)
        for i in idx:
            if int(i) not in seen:
                seen.add(int(i))
                chosen.append((kind, int(i)))
    return chosen


def _ranked(kind: str, k: int, n: int, order: np.ndarray, rng: np.random.Generator) -> list[Any]:
    """The ``k`` episodes a KIND:COUNT item selects (``order``: the episodes by ascending return)."""
    if kind == "first":
        return list(range(k))
    if kind == "worst":
        return list(order[:k])
    if kind == "best":
        return list(order[::-1][:k])
    if kind == "median":
        start = max(0, (n - k) // 2)
        return list(order[start : start + k])
    return list(rng.choice(n, size=k, replace=False))



def render(config: RenderConfig | None = None, **kwargs: Any) -> RenderOutputs:
    """Run the whole ``rlviz render`` job; ``render(checkpoint=..., episodes=...)`` works too. Progress bars show
    only with ``progress=True`` (the CLI sets it when stderr is a terminal)."""
    if config is None:
        config = RenderConfig(**kwargs)
    elif kwargs:
        raise UsageError("render() takes either a RenderConfig or keyword arguments, not both.")
    check_model_folders(config)  # a folder with no model: said first, not an --out conflict
    with job_setup(config) as job:  # --out claimed, progress, the workers (Ray / spawned ones start now)
        if is_jax_env_id(config.env):  # a flax agent on a JAX env: the JAX engine (rlviz.jobs.render_jax)
            with job.staging("render", config) as (tmp, sinks):
                written_jax = render_jax_into(tmp, config, sinks, select_episodes)
            return _agents_outputs(Path(config.out), tmp, written_jax)
        agent, config, gamma = job.agent(config)  # hf://: the config names the commit the workers load
        config = job.check(agent, config)  # now, not after the long rollout
        if is_agents_agent(agent):  # a PettingZoo env id: every agent played by the one policy (jobs.render_agents)
            with job.staging("render", config) as (tmp, sinks), torch_threads(config.threads):
                written_agents = render_agents_into(tmp, agent, config, gamma, select_episodes, job.backend, sinks)
            return _agents_outputs(Path(config.out), tmp, written_agents)
        note = heatmap_note(agent, config)
        if note:  # a heatmap of moving pixels, not the game's objects: said now
            warnings.warn(note, UserWarning, stacklevel=2)
        with job.staging("render", config) as (tmp, sinks):  # the sinks first: a missing extra fails before the long work
            written = _render_into(tmp, agent, config, gamma, sinks, job.backend)
    out = Path(config.out)
    summary, heatmap_npz, heatmap_png, videos = written

    def final(path: Path | None) -> Path | None:  # where a file written in the staging folder now is
        return None if path is None else out / Path(path).relative_to(tmp)

    return RenderOutputs(
        out_dir=out,
        summary=summary.to_dict(),
        table=format_table(summary),
        summary_json=out / "summary.json",
        episodes_csv=out / "episodes.csv",
        heatmap_png=final(heatmap_png),
        heatmap_npz=final(heatmap_npz),
        videos=tuple(final(v.video_path) for v in videos),
        report_html=out / REPORT_NAME,
    )


def _agents_outputs(out: Path, tmp: Path, written: dict[str, Any]) -> RenderOutputs:
    def final(path: Any) -> Path | None:
        return None if path is None else out / Path(path).relative_to(tmp)

    return RenderOutputs(out_dir=out, summary=written["summary"], table=written["table"],
                         summary_json=out / "summary.json", episodes_csv=out / "episodes.csv",
                         heatmap_png=final(written["heatmap_png"]), heatmap_npz=final(written["heatmap_npz"]),
                         videos=tuple(final(v["video"]) for v in written["videos"]), report_html=out / REPORT_NAME)


def heatmap_note(agent: LoadedAgent, config: RenderConfig) -> str | None:
    """summary.json's ``heatmap_note``: the heatmap on (no ``--objects``) of a game rlviz knows no objects of."""
    return fallback_note(agent.recipe.env_id) if config.heatmap and not config.objects else None


def _render_into(folder: Path, agent: LoadedAgent, config: RenderConfig, gamma: float, sinks: list[Sink],
                 backend: Backend | None = None) -> tuple[Any, ...]:
    """The run's outputs, written into ``folder``: (summary, heatmap npz, heatmap png, video results)."""
    with torch_threads(config.threads):
        result = run_rollouts(agent, config, gamma, backend)
        summary = replace(summarise(result, agent.policy.kind), hub=agent.metadata.get("hub"),  # hf://: repo, commit
                          heatmap_note=heatmap_note(agent, config))
        write_summary_json(summary, folder / "summary.json")
        write_episodes_csv(result, folder / "episodes.csv")
        with progress.phase("heatmap") if result.heatmap is not None else nullcontext():
            heatmap_npz, heatmap_png = write_heatmap(result, agent.recipe, folder, config)
            plot_attention_at_failure(result, result.heatmap, folder / ATTENTION_PNG)
        videos, fps = record_videos(agent, result, folder / "videos", config, gamma, backend)
    if sinks:
        with progress.phase("logging to " + ", ".join(type(s).__name__.replace("Sink", "") for s in sinks)):
            log_run(sinks, run_log(summary, result, videos, heatmap_png, fps))
    write_report(folder / REPORT_NAME, [run_record(folder, summary.to_dict(), result, heatmap_png,
                                                   [v.video_path for v in videos if v.video_path is not None])])
    return summary, heatmap_npz, heatmap_png, videos


def run_rollouts(agent: LoadedAgent, config: RenderConfig, gamma: float, backend: Backend | None = None) -> RolloutResult:
    """The config's episodes of ``agent``: statistics and (with ``config.heatmap``) the failure heatmap.
    backend: None (this process) or a worker pool (:func:`rlviz.jobs.shards.open_backend`): the episodes run
    there as seed-contiguous shards, merged into the same result."""
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
    meanwhile = (lambda: import_now(_HEATMAP_IMPORTS)) if config.heatmap else None
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
_HEATMAP_IMPORTS = ("matplotlib.colors", "matplotlib.pyplot")


def import_now(names: Any) -> None:
    """Import ``names`` now; a failure is left to the import where the module is used, which reports it."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S110 - the module's user imports it again and says what is wrong
            pass


def record_videos(agent: LoadedAgent, result: RolloutResult, folder: Path, config: RenderConfig,
                  gamma: float, backend: Backend | None = None, chosen: list[tuple[str, int]] | None = None,
                  min_seconds: float = MIN_VIDEO_SECONDS) -> tuple[list[EpisodeResult], float]:
    """Replay the episodes ``chosen`` ((label, episode) pairs; default: those ``config.videos`` selects) through
    :class:`RecordEpisode` as ``<label>-<episode>``: their results (with ``video_path``) and the videos' frame
    rate. A replay whose return differs from the rollout's gets a warning. With a ``backend`` the replays run in
    its workers and the files come back as bytes. ``min_seconds``: as :func:`record_episode`'s."""
    if chosen is None:
        chosen = select_episodes(result.returns, parse_video_spec(config.videos), seed=config.seed,
                                 heatmap=result.heatmap)
    if backend is not None and chosen:
        source = source_for(config, backend)
        tasks = [VideoTask(source, gamma, f"{label}-{idx}", result.episodes[idx], min_seconds)
                 for label, idx in chosen]
        with progress.phase(f"{len(tasks)} video(s) in the workers"):
            done = backend.map(record_video_task, tasks, what="the replay of")
        videos = []
        for replayed, _, files, messages in done:
            paths = write_video_files(files, folder)
            videos.append(replace(replayed, video_path=paths.get(replayed.video_path)))
            for message in messages:
                warnings.warn(message, stacklevel=2)
        return videos, done[-1][1]
    videos, fps = [], 30.0
    for label, idx in chosen:
        replayed, fps = record_episode(agent, result.episodes[idx], folder, f"{label}-{idx}", config, gamma,
                                       min_seconds)
        videos.append(replayed)
    return videos, fps
