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

import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import progress
from ..analysis.attention_plot import plot_attention_at_failure
from ..config import RenderConfig
from ..envs.jax_ids import is_jax_env_id
from ..errors import UsageError
from ..evaluate import format_table
from ..evaluate.backends.threads import torch_threads
from ..evaluate.backends.workers import Backend
from ..evaluate.failures.objects import fallback_note
from ..evaluate.statistics.stats import write_episodes_csv, write_summary_json
from ..report import REPORT_NAME, write_report
from ..report.notebook import outputs_html
from ..sinks.base import Sink
from ..sinks.log import log_run
from ..sources import LoadedAgent
from .agents_episodes import is_agents_agent
from .inputs import check_model_folders
from .render_agents import render_agents_into
from .render_jax import render_jax_into
from .rollouts import run_rollouts, write_heatmap
from .skeleton import job_setup
from .stages import ATTENTION_PNG, run_log, run_record, summarise
from .videos import record_videos, select_episodes

__all__ = ["RenderConfig", "RenderOutputs", "render", "heatmap_note"]


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
    #: with ``push_to_hub`` / ``push_dry_run``: the push's :class:`~rlviz.jobs.push.PushOutputs` (None: not pushed)
    pushed: Any = None

    def _repr_html_(self) -> str:
        """Notebooks: the statistics, the heatmap and the videos, inline."""
        return outputs_html(self.summary, self.heatmap_png, self.videos, self.report_html)

    @property
    def warnings(self) -> list[Any]:
        """The diagnostics of severity "warning" (``--strict`` exits 3 when there is any)."""
        return [f for f in self.summary.get("diagnostics", ()) if f["severity"] == "warning"]


def render(config: RenderConfig | None = None, **kwargs: Any) -> RenderOutputs:
    """Run the whole ``rlviz render`` job; ``render(checkpoint=..., episodes=...)`` works too. Progress bars show
    only with ``progress=True`` (the CLI sets it when stderr is a terminal)."""
    if config is None:
        config = RenderConfig(**kwargs)
    elif kwargs:
        raise UsageError("render() takes either a RenderConfig or keyword arguments, not both.")
    if config.push_to_hub is not None or config.push_dry_run is not None:  # the run, then its push (jobs.push_after)
        from .push_after import push_after

        return push_after(render, config, render)  # type: ignore[no-any-return]
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
