"""``rlviz compare A B`` on a PettingZoo env id: two shared-parameter policies, each playing every agent, on the
same seeded episodes; the statistics are per agent (dispatched from :func:`rlviz.jobs.compare.compare`).

Both rollouts are :func:`~rlviz.evaluate.rollouts.agents.rollout_agents` with the same arguments ``rlviz render``
uses, so episode ``k`` of A and of B start from ``episode_seed_for(seed, k)`` and each side's numbers are the
ones its own ``rlviz render`` run writes. Output layout (beside ``rlviz-run.json``)::

    comparison.json    the single-agent compare's shape over the team return (sum of every agent's return):
                       "return_diff", "prob_improvement", "iqm", "bootstrap"
                       (:func:`~rlviz.evaluate.statistics.paired.paired_comparison`), then "agents": per agent id
                       the same paired statistics of its return B - A, its length difference (mean and ci95) and
                       its failures in A and B; "a" and "b": each side's render summary (per agent)
    episodes.csv       per seed: A's columns (a_steps, a_team_return, a_<agent>_return, _length, _terminated,
                       _truncated, _failed), B's, then team_return_diff and <agent>_return_diff
    heatmap_diff.npz/.png  (--heatmap, games rlviz knows agent positions of) per agent: where it failed under A
                       and under B, and the per-failure difference
    videos/a, videos/b/<label>-episode-<k>.mp4   each side's video of episode k (a panel column per agent)
    videos/<label>-<k>.mp4   the two side by side (episodes chosen by the team return B - A)
    disagreements/<agent>/disagreements.json/.csv   (--disagreements K) per agent id, the single-agent files over
                       its own states (:mod:`rlviz.disagree.agents`); comparison.json's "disagreements": per agent id
                       the measure, summary and branch counts
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..config import CompareConfig, parse_video_spec
from ..draw.side_by_side import side_by_side
from ..errors import UsageError
from ..evaluate.backends.workers import Backend
from ..evaluate.failures.heatmap import HeatmapDiff
from ..evaluate.rollouts.agents import AgentsRolloutResult
from ..evaluate.statistics.paired import bootstrap_ci, bootstrap_indices, paired_comparison
from ..evaluate.statistics.stats import fmt_number
from ..media import probe_video
from ..media.atomic import atomic_write
from ..sources import LoadedAgent
from .agents_episodes import agents_rollout, agents_summary, agents_video

__all__ = ["check_agents_compare", "compare_agents_into", "agents_comparison", "agents_paired_csv",
           "format_agents_comparison"]


def check_agents_compare(agents: list[LoadedAgent], config: CompareConfig) -> None:
    """A usage error now, not after the rollouts: with --disagreements, each policy must read the other's inputs."""
    if config.disagreements:
        from ..disagree.probe import check_probe_policies

        check_probe_policies(agents[0].policy, agents[1].policy)


def compare_agents_into(folder: Path, agents: list[LoadedAgent], config: CompareConfig, gammas: list[float],
                        select_episodes: Any, backend: Backend | None = None) -> dict[str, Any]:
    """The run's outputs, written into ``folder``: {"comparison", "table", "heatmap_npz", "heatmap_png",
    "videos"}. ``select_episodes``: :func:`rlviz.jobs.videos.select_episodes` (ranking by the team return B - A);
    ``backend``: the job's workers (None: this process) for both rollouts. Also "fps": the videos' frame rate."""
    probes = _probes(agents, config)  # --disagreements: each policy asked on the other's states, in this process
    results = [agents_rollout(agent, config.render_config(side), None if probe else backend, probe)
               for agent, side, probe in zip(agents, "ab", probes)]
    summaries = [agents_summary(r, agent, config.render_config(side))
                 for r, agent, side in zip(results, agents, "ab")]
    comparison = agents_comparison(results, summaries, config)
    if config.disagreements:
        comparison["disagreements"] = _disagreements(folder, agents, probes, results, config)
    atomic_write(folder / "comparison.json", json.dumps(comparison, indent=2) + "\n")
    atomic_write(folder / "episodes.csv", agents_paired_csv(results))
    heatmap_npz = heatmap_png = None
    ha, hb = (r.heatmap for r in results)
    if ha is not None and hb is not None:
        with progress.phase("heatmap difference"):
            diff = HeatmapDiff(ha, hb)
            heatmap_npz = diff.save(folder / "heatmap_diff.npz")
            heatmap_png = diff.plot(folder / "heatmap_diff.png", labels=("A", "B"))
    chosen = select_episodes(results[1].returns() - results[0].returns(), parse_video_spec(config.videos),
                             seed=config.seed)
    labels = (f"A: {Path(config.a).name}", f"B: {Path(config.b).name}")
    videos, fps = [], 15.0  # (the videos' rate: the env's)
    for label, idx in chosen:
        with progress.phase(f"videos of episode {idx}"):
            singles = [agents_video(agent, idx, label, folder / "videos" / side, config.render_config(side), gamma,
                                    r.episodes[idx].returns)
                       for agent, r, side, gamma in zip(agents, results, "ab", gammas)]
            fps = probe_video(singles[0]["video"], count=False).fps
            path, _ = side_by_side(singles[0]["video"], singles[1]["video"], folder / "videos" / f"{label}-{idx}.mp4",
                                   fps=fps, labels=labels)
        videos.append(path)
    return {"comparison": comparison, "table": format_agents_comparison(comparison, labels), "heatmap_npz": heatmap_npz,
            "heatmap_png": heatmap_png, "videos": videos, "fps": fps}


def _probes(agents: list[LoadedAgent], config: CompareConfig) -> list[Any]:
    if not config.disagreements:
        return [None, None]
    from ..disagree.agents import AgentsProbe

    return [AgentsProbe(agents[1 - i].policy, side) for i, side in enumerate("ab")]


def _disagreements(folder: Path, agents: list[LoadedAgent], probes: list[Any], results: list[AgentsRolloutResult],
                   config: CompareConfig) -> dict[str, Any]:
    """Each agent id's disagreement analysis written into ``disagreements/<agent>/`` (a note: a warning naming the
    agent); comparison.json's part: per agent id the measure, the summary and the branch counts."""
    from ..disagree.agents import analyse_agents
    from ..disagree.outputs import write_disagreements

    out = {}
    with progress.phase("disagreements per agent"):
        found = analyse_agents(agents, probes, results, config)
    for agent_id, d in found.items():
        (folder / "disagreements" / agent_id).mkdir(parents=True, exist_ok=True)
        data = write_disagreements(d, config, folder / "disagreements" / agent_id)
        out[agent_id] = {"measure": d.measure, **data["summary"], "branches": data["branches"]}
        if d.note:
            warnings.warn(f"--disagreements {config.disagreements}, {agent_id}: {d.note}", UserWarning, stacklevel=2)
    return out


def agents_comparison(results: list[AgentsRolloutResult], summaries: list[dict[str, Any]],
                      config: CompareConfig) -> dict[str, Any]:
    """comparison.json: the team return's paired statistics at the top (the single-agent compare's keys), per
    agent id its own under "agents", each side's render summary under "a" and "b"."""
    ra, rb = results
    if [e.seed for e in ra.episodes] != [e.seed for e in rb.episodes] or ra.agents != rb.agents:
        raise UsageError("The rollouts of A and B have different episode seeds or agents; compare needs the same "
                         "episodes.")
    idx = bootstrap_indices(len(ra.episodes))
    per_agent = {}
    for a in ra.agents:
        la, lb = (np.array([e.lengths[a] for e in r.episodes], dtype=np.float64) for r in results)
        fa, fb = (int(sum(e.failed[a] for e in r.episodes)) for r in results)
        per_agent[a] = {**paired_comparison(ra.returns(a), rb.returns(a)),
                        "length_diff": {"mean": float((lb - la).mean()), "ci95": bootstrap_ci(lb - la, np.mean, idx)},
                        "failures": {"a": fa, "b": fb, "diff": fb - fa}}
    return {
        "a_checkpoint": str(config.a), "b_checkpoint": str(config.b), "env_id": ra.env_id, "multi_agent": True,
        "agents_list": list(ra.agents), "episodes": len(ra.episodes), "seed": int(config.seed),
        **paired_comparison(ra.returns(), rb.returns()),
        "agents": per_agent,
        "a": summaries[0],
        "b": summaries[1],
    }


def agents_paired_csv(results: list[AgentsRolloutResult]) -> str:
    """episodes.csv: episode, seed, A's columns, B's, then the team's and every agent's return difference."""
    ra, rb = results
    cols = ["episode", "seed"]
    for side in "ab":
        cols += [f"{side}_steps", f"{side}_team_return"]
        for a in ra.agents:
            cols += [f"{side}_{a}_{k}" for k in ("return", "length", "terminated", "truncated", "failed")]
    cols += ["team_return_diff"] + [f"{a}_return_diff" for a in ra.agents]
    buf = io.StringIO()
    buf.write(",".join(cols) + "\n")
    for ea, eb in zip(ra.episodes, rb.episodes):
        row: list[Any] = [ea.index, ea.seed]
        for e in (ea, eb):
            row += [e.steps, repr(e.team_return)]
            for a in ra.agents:
                row += [repr(float(e.returns[a])), e.lengths[a], int(e.terminated[a]), int(e.truncated[a]),
                        int(e.failed[a])]
        row += [repr(eb.team_return - ea.team_return)]
        row += [repr(float(eb.returns[a]) - float(ea.returns[a])) for a in ra.agents]
        buf.write(",".join(map(str, row)) + "\n")
    return buf.getvalue()


def _ci(v: Any) -> str:
    return f"[{fmt_number(float(v[0]))}, {fmt_number(float(v[1]))}]"


def format_agents_comparison(c: dict[str, Any], labels: Any = ("A", "B")) -> str:
    """The terminal table: the team return, then one line per agent (return means, B - A and its 95% CI, failures)."""
    a, b = c["a"], c["b"]
    head = f"{'':<20}{'A':>10}{'B':>10}{'B - A':>10}   {'95% CI of B - A':<24}{'failed A':>9}{'failed B':>9}"
    rows = [("team return", a["team_return"]["mean"], b["team_return"]["mean"], c["return_diff"]["mean"],
             _ci(c["return_diff"]["ci95"]), "", "")]
    for agent, d in c["agents"].items():
        rows.append((agent, a["agents"][agent]["return"]["mean"], b["agents"][agent]["return"]["mean"],
                     d["return_diff"]["mean"], _ci(d["return_diff"]["ci95"]), d["failures"]["a"], d["failures"]["b"]))
    boot = c["bootstrap"]
    lines = [f"{labels[0]}  vs  {labels[1]}",
             f"{c['env_id']}: {c['episodes']} episodes on the same seeds, {len(c['agents'])} agents; "
             f"{boot['method']}, {boot['resamples']} resamples", "", head]
    lines += [f"{name:<20}{fmt_number(x):>10}{fmt_number(y):>10}{fmt_number(d):>10}   {ci:<24}{fa!s:>9}{fb!s:>9}".rstrip()
              for name, x, y, d, ci, fa, fb in rows]
    lines += ["", f"P(B > A) + P(B = A) / 2 over paired episodes (team return): {c['prob_improvement']:.3f} "
                  f"{_ci(c['prob_improvement_ci95'])}"]
    return "\n".join(lines)
