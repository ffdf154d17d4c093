"""``rlviz.compare``: agent A against agent B on the same episode seeds (``rlviz compare A B``).

Both agents play the same N episodes (episode ``k`` starts from the same seed for both, with the same number of
envs in lockstep, so ``compare(A, A)`` gives identical episodes). Output layout (``out``: a folder of the run's
own, written complete or not at all; see :mod:`rlviz.jobs.outdir`)::

    rlviz-run.json       what wrote the run, with which options
    comparison.json      "a", "b" (each render's summary), paired statistics of the return B - A with bootstrap
                         CIs (:mod:`rlviz.evaluate.paired`), the difference of every diagnostic number
    episodes.csv         per seed: A's and B's episode rows side by side, and the return difference
    heatmap_diff.npz/.png  counts of A and B and the per-failure difference (with --heatmap)
    videos/<label>-<k>.mp4  A and B on episode k's seed side by side (singles in videos/a, videos/b)
    disagreements.json/.csv, disagreement_heatmap.*, videos/disagreements/   with --disagreements K: the states
                         where A and B choose differently, each played out by both (:mod:`rlviz.disagree`)
"""

from __future__ import annotations

import csv
import io
import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import progress
from ..attention.summary import attention_paired, with_attention
from ..config import CompareConfig, config_dict, parse_video_spec
from ..disagree.outputs import JSON_NAME, log_disagreements, write_disagreements
from ..disagree.run import analyse, probed_rollouts
from ..draw.side_by_side import side_by_side
from ..draw.video import video_timing
from ..errors import UsageError
from ..evaluate import RolloutResult, summarize
from ..evaluate.heatmap import HeatmapDiff
from ..evaluate.paired import paired_comparison
from ..evaluate.stats import _f
from ..evaluate.threads import torch_threads
from ..media.atomic import atomic_path
from ..report import REPORT_NAME, RunData, VideoData, step_trace, write_report
from ..report.disagreements import disagreements_html
from ..sources import LoadedAgent, load_agent
from ..sources.hub import pinned_id
from .outdir import claim_out_dir, job_inputs, run_folder
from .render import (
    MIN_VIDEO_SECONDS,
    _flat_numbers,
    check_saliency,
    open_sinks,
    record_episode,
    run_rollouts,
    select_episodes,
    vector_attention_off,
)
from .shards import open_backend, share_agent

__all__ = ["CompareConfig", "CompareOutputs", "compare", "comparison_dict", "check_same_env", "format_comparison",
           "paired_csv"]

#: Summary numbers that are not properties of the agent (left out of ``diagnostics_diff``).
NOT_DIAGNOSTIC = ("wall_s",)


@dataclass(frozen=True)
class CompareOutputs:
    """What :func:`compare` wrote. ``comparison`` is the dict in comparison.json; ``table`` the terminal table."""

    out_dir: Path
    comparison: dict[Any, Any]
    table: str
    comparison_json: Path
    episodes_csv: Path
    heatmap_png: Path | None = None
    heatmap_npz: Path | None = None
    videos: tuple[Any, ...] = field(default_factory=tuple)
    disagreements_json: Path | None = None


def compare(config: CompareConfig | None = None, **kwargs: Any) -> CompareOutputs:
    """Run the whole ``rlviz compare A B`` job; ``compare(a=..., b=..., episodes=...)`` works too. Progress bars
    show only with ``progress=True`` (the CLI sets it when stderr is a terminal)."""
    if config is None:
        config = CompareConfig(**kwargs)
    elif kwargs:
        raise UsageError("compare() takes either a CompareConfig or keyword arguments, not both.")
    # refuse a bad --out, or one another run is writing, before the long work; hold it until the run is in place
    with claim_out_dir(config.out, config.overwrite, job_inputs(config)), progress.enabled(config.progress):
        agents = []
        for path in (config.a, config.b):
            with progress.phase(f"loading {Path(path).name}"):
                agents.append(load_agent(path, env=config.env, model=config.model, trust=config.trust_checkpoint,
                                         device=config.device))
        check_same_env(agents, (config.a, config.b))
        config = replace(config, a=pinned_id(config.a, agents[0]),  # type: ignore[type-var]  # hf://
                         b=pinned_id(config.b, agents[1]))
        # vector observations: no default attention (it needs an image); their saliency is per feature
        config = replace(config, attention=vector_attention_off(agents[0], config.render_config("a")).attention)  # type: ignore[type-var]
        for agent, side in zip(agents, "ab"):
            check_saliency(agent, config.render_config(side))  # now, not after the long rollouts
        sinks = open_sinks(config)  # fail early (a missing extra) before the long rollouts
        try:
            with run_folder(config.out, overwrite=config.overwrite, job="compare", options=config_dict(config)) as tmp:
                comparison, table, heatmap_npz, heatmap_png, videos, found = _compare_into(tmp, agents, config, sinks)
        finally:
            for sink in sinks:
                sink.close()
    out = Path(config.out)

    def final(path: Path | None) -> Path | None:  # where a file written in the staging folder now is
        return None if path is None else out / Path(path).relative_to(tmp)

    return CompareOutputs(out, comparison, table, out / "comparison.json", out / "episodes.csv", final(heatmap_png),
                          final(heatmap_npz), tuple(final(v) for v in videos), final(found))


def _compare_into(folder: Path, agents: list[LoadedAgent], config: CompareConfig, sinks: list[Any]) -> tuple[Any, ...]:
    """The run's outputs, written into ``folder``: (comparison, table, heatmap npz, heatmap png, videos,
    disagreements.json or None)."""
    gammas = [float(config.gamma if config.gamma is not None else agent.gamma) for agent in agents]
    labels = (f"A: {Path(config.a).name}", f"B: {Path(config.b).name}")
    probes: list[Any] = []
    with torch_threads(config.threads), open_backend(config) as backend:  # --workers / --ray: both agents' shards
        for agent, side in zip(agents, "ab"):
            share_agent(config.render_config(side), agent)
        if config.disagreements:  # each agent asked on the other's states: the rollouts run here, probed
            results, probes = probed_rollouts(agents, config, gammas)
        else:
            results = [run_rollouts(agent, config.render_config(side), gamma, backend)
                       for agent, side, gamma in zip(agents, "ab", gammas)]
    comparison = comparison_dict(results, config)
    comparison.update({f"{side}_hub": a.metadata["hub"] for a, side in zip(agents, "ab") if "hub" in a.metadata})
    # the disagreements' branches and videos are made while this thread records the paired videos: most of a short
    # video's time is its ffmpeg processes starting
    with torch_threads(config.threads) if probes else nullcontext(), ThreadPoolExecutor(1) as pool:
        branch_videos = folder / "videos" / "disagreements" if parse_video_spec(config.videos) else None
        pending = pool.submit(analyse, agents, probes, results, config, gammas, branch_videos, labels) if probes else None
        with progress.phase("heatmap difference") if results[0].heatmap is not None else nullcontext():
            heatmap_npz, heatmap_png = _write_heatmap_diff(results, folder)
        videos, fps = _record_side_by_side(agents, results, folder / "videos", config, gammas, labels)
        with progress.phase("disagreements") if pending is not None else nullcontext():
            found = None if pending is None else pending.result()
    disagreements = None if found is None else write_disagreements(found, config, folder)
    if disagreements is not None:
        comparison["disagreements"] = {**disagreements["summary"], "branches": disagreements["branches"]}
    _write_text(folder / "comparison.json", json.dumps(comparison, indent=2) + "\n")
    _write_text(folder / "episodes.csv", paired_csv(results))
    if sinks:
        with progress.phase("logging to " + ", ".join(type(s).__name__.replace("Sink", "") for s in sinks)):
            _log(sinks, comparison, videos, heatmap_png, fps)
            if found is not None and disagreements is not None:
                log_disagreements(sinks, found, disagreements, folder, fps)
    with progress.phase("report"):
        extra = "" if disagreements is None else disagreements_html(disagreements, folder, folder)
        _write_report(folder, comparison, results, labels, heatmap_png, extra)
    return (comparison, format_comparison(comparison, labels), heatmap_npz, heatmap_png, videos,
            None if disagreements is None else folder / JSON_NAME)


def _write_report(folder: Path, comparison: dict[Any, Any], results: Any, labels: Any, heatmap_png: Path | None,
                  extra: str = "") -> Path:
    """report.html: both agents side by side (summary, findings, episode table, each agent's videos with their per-step
    traces), the heatmap difference with A's column; ``extra``: HTML sections below (the disagreements)."""
    runs = []
    for side, result, label in zip("ab", results, labels):
        videos = tuple(VideoData(path=p, episode=_episode_of(p), label=p.stem, trace=step_trace(p))
                       for p in sorted((folder / "videos" / side).glob("*.mp4")))
        runs.append(RunData(title=label, folder=folder, summary=comparison[side],
                            episodes=[e.to_row() for e in result.episodes],
                            heatmap=heatmap_png if side == "a" else None, videos=videos))
    return write_report(folder / REPORT_NAME, runs, title=f"{labels[0]} vs {labels[1]}", extra=extra)


def _episode_of(path: Path) -> int:
    """The rollout episode of a video named ``<label>-<k>-episode-0.mp4``."""
    parts = path.stem.split("-")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1


def check_same_env(agents: list[LoadedAgent], paths: Any) -> None:
    """A usage error unless both agents run on the same env (the same recipe: env id, kwargs, wrappers)."""
    a, b = (agent.recipe for agent in agents)
    if a.to_json() == b.to_json():
        return
    what = f"{a.env_id!r} and {b.env_id!r}" if a.env_id != b.env_id else f"{a.env_id!r} with different settings"
    raise UsageError(
        f"A ({paths[0]}) and B ({paths[1]}) are agents for {what}; compare plays both on the same seeds of one env. "
        "Pass two checkpoints of the same env, or --env ID to run both on ID."
    )


def comparison_dict(results: list[RolloutResult], config: CompareConfig) -> dict[Any, Any]:
    """The content of comparison.json for the rollouts of A and B over the same seeds."""
    ra, rb = results
    if [e.seed for e in ra.episodes] != [e.seed for e in rb.episodes]:
        raise UsageError("The rollouts of A and B have different episode seeds; compare needs the same episodes.")
    summaries = [with_attention(summarize(r), r).to_dict() for r in results]
    flat_a, flat_b = (_flat_numbers(s) for s in summaries)
    diagnostics = {k: flat_b[k] - flat_a[k] for k in flat_a
                   if k in flat_b and k.split("/")[0] not in NOT_DIAGNOSTIC}
    return {
        "a_checkpoint": str(config.a),
        "b_checkpoint": str(config.b),
        "env_id": ra.env_id,
        "episodes": len(ra.episodes),
        "seed": int(config.seed),
        **paired_comparison(ra.returns, rb.returns),
        "diagnostics_diff": diagnostics,
        **({"attention_diff": diff} if (diff := attention_paired(ra.episodes, rb.episodes)) else {}),
        "a": summaries[0],
        "b": summaries[1],
    }


def paired_csv(results: list[RolloutResult]) -> str:
    """episodes.csv: episode, seed, then A's columns (``a_return``...), B's (``b_return``...), ``return_diff``."""
    ra, rb = results
    buf = io.StringIO()
    writer = None
    for ea, eb in zip(ra.episodes, rb.episodes):
        row = {"episode": ea.index, "seed": ea.seed}
        for side, ep in (("a", ea), ("b", eb)):
            row.update({f"{side}_{k}": v for k, v in ep.to_row().items() if k not in ("episode", "seed")})
        row["return_diff"] = eb.ret - ea.ret
        if writer is None:
            writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
            writer.writeheader()
        writer.writerow(row)
    return buf.getvalue()


def _write_text(path: Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def _write_heatmap_diff(results: list[RolloutResult], out: Path) -> tuple[Path | None, Path | None]:
    ha, hb = (r.heatmap for r in results)
    if ha is None or hb is None:
        return None, None
    diff = HeatmapDiff(ha, hb)
    return diff.save(out / "heatmap_diff.npz"), diff.plot(out / "heatmap_diff.png", labels=("A", "B"))


def _record_side_by_side(agents: Any, results: Any, folder: Path, config: CompareConfig, gammas: Any, labels: Any) -> tuple[list[Any], float]:
    """For each episode ``config.videos`` selects (worst/best by the return B - A): both agents' videos on its
    seed (videos/a, videos/b) and the two side by side (videos/<label>-<k>.mp4)."""
    diffs = results[1].returns - results[0].returns
    videos, fps = [], 30.0
    for label, idx in select_episodes(diffs, parse_video_spec(config.videos), seed=config.seed):
        singles: list[Any] = []
        for agent, result, side, gamma in zip(agents, results, "ab", gammas):
            replayed, fps = record_episode(agent, result.episodes[idx], folder / side, f"{label}-{idx}",
                                           config.render_config(side), gamma, min_seconds=0.0)  # frame-locked
            singles.append(replayed.video_path)
        longest = max(results[0].episodes[idx].length, results[1].episodes[idx].length) + 1
        rate, held = video_timing(longest, fps, MIN_VIDEO_SECONDS)  # short pairs play slower and hold their end
        with progress.phase(f"side by side {label}:{idx}"):
            path, _ = side_by_side(singles[0], singles[1], folder / f"{label}-{idx}.mp4", fps=rate, labels=labels,
                                   min_frames=longest + held)
        fps = rate
        videos.append(path)
    return videos, fps


def _log(sinks: list[Any], comparison: dict[Any, Any], videos: list[Path], heatmap_png: Path | None, fps: float) -> None:
    """The comparison's numbers, the side-by-side videos and the heatmap difference to each sink."""
    numbers = {k: v for k, v in _flat_numbers(comparison).items() if not k.startswith(("a/", "b/"))}
    for key, (lo, hi) in _intervals(comparison).items():
        numbers[f"{key}_lo"], numbers[f"{key}_hi"] = lo, hi
    for sink in sinks:
        sink.log_scalars(numbers, step=0, prefix="rlviz/compare/")
        for v in videos:
            sink.log_video(f"rlviz/compare/{v.stem}", v, step=0, fps=fps)
        if heatmap_png is not None:
            sink.log_image("rlviz/compare/heatmap_diff", heatmap_png, step=0)


def _intervals(d: dict[Any, Any], prefix: str = "") -> dict[Any, Any]:
    """{"return_diff/ci95": (lo, hi), ...}: the confidence intervals of a comparison dict."""
    found = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("a", "b"):
            found.update(_intervals(v, f"{prefix}{k}/"))
        elif k.endswith("ci95") and isinstance(v, list) and len(v) == 2:
            found[f"{prefix}{k}"] = (float(v[0]), float(v[1]))
    return found



#: Rows of the terminal table below the return: (label, key in the summaries).
_TABLE_ROWS = (("length mean", "lengths/mean"), ("failures/episode", "failures_per_episode"),
               ("mean relative entropy", "mean_relative_entropy"), ("value residual (G - V)", "value_residual"),
               ("value explained variance", "value_explained_variance"))


def _ci(v: Any) -> str:
    return f"[{_f(float(v[0]))}, {_f(float(v[1]))}]"


def format_comparison(c: dict[Any, Any], labels: Any = ("A", "B")) -> str:
    """A plain-text table of a comparison dict for the terminal."""
    boot = c["bootstrap"]
    fa, fb = _flat_numbers(c["a"]), _flat_numbers(c["b"])
    head = f"{'':<26}{'A':>10}{'B':>10}{'B - A':>10}   95% CI of B - A"
    rows = [
        ("return mean", c["a"]["returns"]["mean"], c["b"]["returns"]["mean"], c["return_diff"]["mean"],
         _ci(c["return_diff"]["ci95"])),
        ("return IQM", c["iqm"]["a"]["value"], c["iqm"]["b"]["value"], c["iqm"]["diff"]["value"],
         _ci(c["iqm"]["diff"]["ci95"])),
        ("return median", c["a"]["returns"]["median"], c["b"]["returns"]["median"], c["return_diff"]["median"],
         "(median of the paired differences)"),
    ]
    rows += [(name, fa.get(key), fb.get(key), c["diagnostics_diff"].get(key), "") for name, key in _TABLE_ROWS]
    for obj, d in c.get("attention_diff", {}).items():  # attention shares, paired over the same seeds
        rows += [(f"attention {obj}{what}", fa.get(f"attention/{path}/share{key}"),
                  fb.get(f"attention/{path}/share{key}"), d[f"share{key}_diff"], _ci(d[f"ci95_share{key}_diff"]))
                 for what, key in (("", ""), (" pre-fail", "_before_failure"))
                 for path in [f"objects/{obj}" if obj != "other" else "other"]]
    lines = [f"{labels[0]}  vs  {labels[1]}",
             f"{c['env_id']}: {c['episodes']} episodes on the same seeds; {boot['method']}, "
             f"{boot['resamples']} resamples", "", head]
    lines += [f"{name:<26}{_f(a):>10}{_f(b):>10}{_f(d):>10}   {ci}".rstrip() for name, a, b, d, ci in rows]
    lines += ["", f"P(B > A) + P(B = A) / 2 over paired episodes: {c['prob_improvement']:.3f} "
                  f"{_ci(c['prob_improvement_ci95'])}"]
    return "\n".join(lines)
