"""``rlviz render`` on a PettingZoo env id: one shared-parameter policy (CleanRL's, or an SB3 model trained on a
SuperSuit-vectorised env) plays every agent; the outputs are per agent.

Output layout (in the run folder, beside ``rlviz-run.json``)::

    summary.json       the team's return and, under "agents", each agent's returns, lengths, terminations,
                       truncations and failures; "diagnostics" per agent
    episodes.csv       one row per episode: team return, then per agent <agent>_return, _length, _terminated,
                       _truncated, _failed
    env-recipe.json    the env and its PettingZoo/SuperSuit preprocessing (``--env run/env-recipe.json`` replays it)
    report.html        the page: team and per-agent statistics, findings per agent, the heatmap, episodes, videos
                       (:mod:`rlviz.report.agents_page`)
    heatmap.png/.npz   (--heatmap, games rlviz knows agent positions of) one panel per agent: where it was when it
                       failed (:mod:`rlviz.evaluate.rollouts.agents`)
    videos/<label>-episode-<k>.mp4 (+ .npz)   the shared frame and one panel column per agent
                       (:mod:`rlviz.draw.panels_agents`); with --saliency each agent's observation thumbnail is
                       tinted by its saliency map
    videos/<label>-episode-<k>-saliency.npz/.png   (--saliency) per agent: its mean and peak saliency over its
                       observations in that episode

Episodes run one after another in this process, or with ``--workers N`` (``--ray``) in seed-contiguous shards in the
workers, joined into the same result (an episode depends only on its seed; ``--num-envs`` does not apply: a note
says so). The videos replay the chosen episodes through
:class:`~rlviz.record.agents.pettingzoo.RecordParallelEpisode` (AEC games:
``RecordAECEpisode``), which evaluates each agent's internals with the same policy.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from .. import progress
from ..config import RenderConfig, parse_video_spec
from ..envs.recipe import RECIPE_FILE
from ..evaluate.backends.workers import Backend
from ..evaluate.rollouts.agents import AgentsRolloutResult
from ..evaluate.statistics.stats import flat_numbers
from ..media.atomic import atomic_write
from ..sinks.base import Sink
from ..sinks.log import Logged, RunLog, findings_markdown, log_run
from ..sources import LoadedAgent
from .agents_episodes import agents_rollout, agents_summary, agents_video

__all__ = ["render_agents_into", "agents_table", "agents_run_log"]


def render_agents_into(folder: Path, agent: LoadedAgent, config: RenderConfig, gamma: float,
                       select_episodes: Any, backend: Backend | None = None,
                       sinks: list[Sink] | None = None) -> dict[str, Any]:
    """The run's outputs, written into ``folder``: {"summary", "heatmap_npz", "heatmap_png", "videos", "table"}.
    ``select_episodes``: :func:`rlviz.jobs.videos.select_episodes` (the team's returns rank the episodes);
    ``backend``: the job's workers (None: this process) for the rollout; ``sinks``: where the run is logged
    (:func:`agents_run_log`)."""
    result = agents_rollout(agent, config, backend)
    summary = agents_summary(result, agent, config)
    atomic_write(folder / "summary.json", json.dumps(summary, indent=2) + "\n")
    atomic_write(folder / "episodes.csv", _episodes_csv(result))
    atomic_write(folder / RECIPE_FILE, json.dumps(agent.recipe.to_dict(), indent=2, sort_keys=True) + "\n")
    heatmap_npz = heatmap_png = None
    if result.heatmap is not None:
        with progress.phase("heatmap"):
            heatmap_npz = result.heatmap.save(folder / "heatmap.npz")
            heatmap_png = result.heatmap.plot(folder / "heatmap.png", log=config.log_scale)
    chosen = select_episodes(result.returns(), parse_video_spec(config.videos), seed=config.seed)
    videos = []
    for label, idx in chosen:
        with progress.phase(f"video of episode {idx}"):
            videos.append(agents_video(agent, idx, label, folder / "videos", config, gamma,
                                       result.episodes[idx].returns))
    if sinks:
        with progress.phase("logging to " + ", ".join(type(s).__name__.replace("Sink", "") for s in sinks)):
            log_run(sinks, agents_run_log(summary, result, videos, heatmap_png))
    from ..report.agents_page import write_agents_report  # (multi-agent runs only: not loaded by a render of one)

    write_agents_report(folder)  # report.html: read back from the files just written
    return {"summary": summary, "heatmap_npz": heatmap_npz, "heatmap_png": heatmap_png, "videos": videos,
            "table": agents_table(summary)}


def agents_table(summary: dict[str, Any]) -> str:
    """The terminal table: one line per agent."""
    lines = [f"{summary['env_id']}: {summary['episodes']} episodes, team return "
             f"{summary['team_return']['mean']:.3g} +/- {summary['team_return']['std']:.3g}",
             f"{'agent':<16} {'return':>10} {'+/-':>8} {'length':>8} {'term':>5} {'trunc':>6} {'failed':>6}"]
    for a, s in summary["agents"].items():
        lines.append(f"{a:<16} {s['return']['mean']:>10.3g} {s['return']['std']:>8.3g} {s['length']['mean']:>8.1f} "
                     f"{s['terminations']:>5} {s['truncations']:>6} {s['failures']:>6}")
    return "\n".join(lines)


def agents_run_log(summary: dict[str, Any], result: AgentsRolloutResult, videos: list[dict[str, Any]],
                   heatmap_png: Path | None, prefix: str = "rlviz/") -> RunLog:
    """What a multi-agent render logs to its sinks (at step 0, names under ``prefix``), as a single-agent render's
    (:func:`rlviz.jobs.stages.run_log`): the team's and each agent's statistics (``team_return/mean``,
    ``agents/<agent>/return/mean``, ...), the per-agent findings (text, and the count of warnings), the episode
    table (episodes.csv's columns), the videos and the failure heatmap (one panel per agent)."""
    findings = summary["diagnostics"]
    cols, rows = _episode_rows(result)
    items = [Logged.scalars(prefix, flat_numbers(summary)), Logged.text(f"{prefix}diagnostics", findings_markdown(findings)),
             Logged.scalars(prefix, {"diagnostics/warnings": sum(f["severity"] == "warning" for f in findings)})]
    if rows:
        items.append(Logged.table(f"{prefix}episodes", cols, rows))
    items += [Logged.video(f"{prefix}{Path(v['video']).stem}", v["video"], v["fps"]) for v in videos
              if v["video"] is not None]
    if heatmap_png is not None:
        items.append(Logged.image(f"{prefix}failure_heatmap", heatmap_png))
    return RunLog(0, tuple(items))


def _episode_rows(result: AgentsRolloutResult) -> tuple[list[str], list[list[Any]]]:
    """episodes.csv's columns and rows: the episode, its seed, steps and team return, then each agent's."""
    cols = ["episode", "seed", "steps", "team_return"]
    for a in result.agents:
        cols += [f"{a}_return", f"{a}_length", f"{a}_terminated", f"{a}_truncated", f"{a}_failed"]
    rows = []
    for e in result.episodes:
        row: list[Any] = [e.index, e.seed, e.steps, float(e.team_return)]
        for a in result.agents:
            row += [float(e.returns[a]), e.lengths[a], int(e.terminated[a]), int(e.truncated[a]), int(e.failed[a])]
        rows.append(row)
    return cols, rows


def _episodes_csv(result: AgentsRolloutResult) -> str:
    buf = io.StringIO()
    cols, rows = _episode_rows(result)
    buf.write(",".join(cols) + "\n")
    for row in rows:  # (floats written with repr: the file reads back to the same numbers)
        buf.write(",".join(repr(x) if isinstance(x, float) else str(x) for x in row) + "\n")
    return buf.getvalue()
