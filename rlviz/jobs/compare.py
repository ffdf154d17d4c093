"""``rlviz.compare``: agent A against agent B on the same episode seeds (``rlviz compare A B``).

Each agent runs render's stages (:mod:`rlviz.jobs.stages`: resolved with its own ``--vecnormalize-a/-b``,
summarised and diagnosed as ``rlviz render`` would, its videos recorded in the workers with ``--workers``).
Both agents play the same N episodes (episode ``k`` starts from the same seed for both, with the same number of
envs in lockstep, so ``compare(A, A)`` gives identical episodes). Output layout (``out``: a folder of the run's
own, written complete or not at all; see :mod:`rlviz.jobs.outdir`)::

    rlviz-run.json       what wrote the run, with which options
    comparison.json      "a", "b" (each render's summary), paired statistics of the return B - A with bootstrap
                         CIs (:mod:`rlviz.evaluate.statistics.paired`), the difference of every diagnostic number
    episodes.csv         per seed: A's and B's episode rows side by side, and the return difference
    heatmap_diff.npz/.png  counts of A and B and the per-failure difference (with --heatmap)
    attention_at_failure_a.png, attention_at_failure_b.png  each agent's attention map at failure (with attention)
    videos/<label>-<k>.mp4  A and B on episode k's seed side by side (singles in videos/a, videos/b)
    disagreements.json/.csv, disagreement_heatmap.*, videos/disagreements/   with --disagreements K: the states
                         where A and B choose differently, each played out by both (:mod:`rlviz.disagree`)

With two flax agents on a JAX env (``--env gymnax:...``) the same stages run on the JAX engine
(:mod:`rlviz.jobs.jax_stages`): episode ``k`` is the episode of key (``--seed``, k) for both.
On a PettingZoo env id each policy plays every agent and the statistics are per agent: :mod:`rlviz.jobs.compare_agents`.
"""

from __future__ import annotations

import csv
import io
import json
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import progress
from ..attention.summary import attention_paired
from ..config import CompareConfig, parse_video_spec
from ..disagree.outputs import JSON_NAME, disagreements_logged, write_disagreements
from ..disagree.run import analyse, probed_rollouts
from ..draw.side_by_side import side_by_side
from ..draw.video import video_timing
from ..errors import UsageError
from ..evaluate import RolloutResult
from ..evaluate.backends.threads import torch_threads
from ..evaluate.backends.workers import Backend
from ..evaluate.failures.heatmap import FailureHeatmap, HeatmapDiff
from ..evaluate.statistics.paired import paired_comparison
from ..evaluate.statistics.stats import entropy_label, flat_numbers, fmt_number
from ..media.atomic import atomic_path
from ..report import REPORT_NAME, write_report
from ..report.disagreements import disagreements_html
from ..sinks.base import Sink
from ..sinks.log import Logged, RunLog, findings_markdown, log_run
from ..sources import LoadedAgent
from .agents_episodes import is_agents_agent
from .compare_agents import check_agents_compare, compare_agents_into
from .inputs import check_model_folders
from .jax_stages import is_jax_agent, run_kind
from .rollouts import run_rollouts
from .skeleton import check_camera, check_failed_at, check_saliency, job_setup, vector_attention_off
from .stages import run_record, summarise, write_attention_at_failure
from .videos import MIN_VIDEO_SECONDS, record_videos, select_episodes

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
    attention_png: tuple[Path | None, Path | None] = (None, None)

    @property
    def warnings(self) -> list[Any]:
        """A's and B's diagnostics of severity "warning", each with ``agent`` "a" or "b" (``--strict`` exits 3
        when there is any)."""
        return [{**f, "agent": side} for side in "ab" for f in self.comparison[side].get("diagnostics", ())
                if f["severity"] == "warning"]


def compare(config: CompareConfig | None = None, **kwargs: Any) -> CompareOutputs:
    """Run the whole ``rlviz compare A B`` job; ``compare(a=..., b=..., episodes=...)`` works too. Progress bars
    show only with ``progress=True`` (the CLI sets it when stderr is a terminal)."""
    if config is None:
        config = CompareConfig(**kwargs)
    elif kwargs:
        raise UsageError("compare() takes either a CompareConfig or keyword arguments, not both.")
    check_model_folders(config)  # a folder with no model: said first, not an --out conflict
    with job_setup(config) as job:  # --out claimed, progress, the workers (both agents' shards) start now
        agents, pinned = [], []
        for side in "ab":  # render's stage 1 for each agent (its own --vecnormalize-a/-b)
            agent, rc, _ = job.agent(config.render_config(side))
            agents.append(agent)
            pinned.append(rc.checkpoint)
        check_same_env(agents, (config.a, config.b))
        config = replace(config, a=pinned[0], b=pinned[1])  # type: ignore[type-var]  # hf://: the loaded commits
        if is_agents_agent(agents[0]):  # a PettingZoo env id: per-agent statistics (jobs.compare_agents)
            return _compare_agents(job, agents, config)
        if is_jax_agent(agents[0]) and config.disagreements:
            raise UsageError(f"--disagreements {config.disagreements}: branching from a saved state needs a gymnasium "
                             f"env; {agents[0].recipe.env_id} is a JAX env. Compare without --disagreements.")
        # vector observations: no default attention (it needs an image); their saliency is per feature
        config = replace(config, attention=vector_attention_off(agents[0], config.render_config("a")).attention)  # type: ignore[type-var]
        for agent, side in zip(agents, "ab"):
            check_saliency(agent, config.render_config(side))  # now, not after the long rollouts
        check_camera(agents[0], config.render_config("a"))  # (the two agents play one env)
        check_failed_at(agents[0], config.render_config("a"))
        with job.staging("compare", config) as (tmp, sinks):  # the sinks first: a missing extra fails before the long work
            comparison, table, heatmap_npz, heatmap_png, videos, found, attention = _compare_into(
                tmp, agents, config, sinks, job.backend)
    out = Path(config.out)

    def final(path: Path | None) -> Path | None:  # where a file written in the staging folder now is
        return None if path is None else out / Path(path).relative_to(tmp)

    return CompareOutputs(out, comparison, table, out / "comparison.json", out / "episodes.csv", final(heatmap_png),
                          final(heatmap_npz), tuple(final(v) for v in videos), final(found),
                          (final(attention[0]), final(attention[1])))


def _compare_agents(job: Any, agents: list[LoadedAgent], config: CompareConfig) -> CompareOutputs:
    """compare on a PettingZoo env: each policy plays every agent (:mod:`rlviz.jobs.compare_agents`)."""
    check_agents_compare(agents, config)
    for agent, side in zip(agents, "ab"):
        check_saliency(agent, config.render_config(side))
    gammas = [float(config.gamma if config.gamma is not None else agent.gamma) for agent in agents]
    with job.staging("compare", config) as (tmp, sinks), torch_threads(config.threads):
        written = compare_agents_into(tmp, agents, config, gammas, select_episodes, job.backend)
        if sinks:  # the team's and each agent's paired numbers, both sides' findings, the videos, the heatmaps' difference
            with progress.phase("logging to " + ", ".join(type(s).__name__.replace("Sink", "") for s in sinks)):
                log_run(sinks, _run_log(written["comparison"], list(written["videos"]), written["heatmap_png"],
                                        written["fps"]))
    out = Path(config.out)

    def final(path: Path | None) -> Path | None:
        return None if path is None else out / Path(path).relative_to(tmp)

    return CompareOutputs(out, written["comparison"], written["table"], out / "comparison.json", out / "episodes.csv",
                          final(written["heatmap_png"]), final(written["heatmap_npz"]),
                          tuple(final(v) for v in written["videos"]))


def _compare_into(folder: Path, agents: list[LoadedAgent], config: CompareConfig, sinks: list[Sink],
                  backend: Backend | None = None) -> tuple[Any, ...]:
    """The run's outputs, written into ``folder``: (comparison, table, heatmap npz, heatmap png, videos,
    disagreements.json or None, (A's, B's) attention at failure or None)."""
    gammas = [float(config.gamma if config.gamma is not None else agent.gamma) for agent in agents]
    labels = (f"A: {Path(config.a).name}", f"B: {Path(config.b).name}")
    probes: list[Any] = []
    with torch_threads(config.threads):  # --workers / --ray: both agents' shards run in ``backend``
        if config.disagreements:  # each agent asked on the other's states: the rollouts run here, probed
            results, probes = probed_rollouts(agents, config, gammas)
        else:
            results = [run_rollouts(agent, config.render_config(side), gamma, backend)
                       for agent, side, gamma in zip(agents, "ab", gammas)]
        kinds = tuple(run_kind(a, r) if is_jax_agent(a) else a.policy.kind for a, r in zip(agents, results))
        comparison = comparison_dict(results, config, kinds)  # type: ignore[arg-type]
        comparison.update({f"{side}_hub": a.metadata["hub"] for a, side in zip(agents, "ab") if "hub" in a.metadata})
        # the disagreements' branches and videos are made while this thread records the paired videos: most of a
        # short video's time is its ffmpeg processes starting
        with torch_threads(config.threads) if probes else nullcontext(), ThreadPoolExecutor(1) as pool:
            branch_videos = folder / "videos" / "disagreements" if parse_video_spec(config.videos) else None
            pending = pool.submit(analyse, agents, probes, results, config, gammas, branch_videos, labels) \
                if probes else None
            with progress.phase("heatmap difference") if results[0].heatmap is not None else nullcontext():
                heatmap_npz, heatmap_png = _write_heatmap_diff(results, folder)
                attention = tuple(write_attention_at_failure(r, a.recipe, folder / f"attention_at_failure_{side}.png",
                                                             config.seed) for r, a, side in zip(results, agents, "ab"))
            videos, fps = _record_side_by_side(agents, results, folder / "videos", config, gammas, labels, backend)
            with progress.phase("disagreements") if pending is not None else nullcontext():
                found = None if pending is None else pending.result()
    disagreements = None if found is None else write_disagreements(found, config, folder)
    if disagreements is not None and found is not None:
        comparison["disagreements"] = {"measure": found.measure, **disagreements["summary"],
                                       "branches": disagreements["branches"]}
        if found.note:  # fewer states than asked, or no branches: said here too, not only in the file
            warnings.warn(f"--disagreements {config.disagreements}: {found.note}", UserWarning, stacklevel=2)
    _write_text(folder / "comparison.json", json.dumps(comparison, indent=2) + "\n")
    _write_text(folder / "episodes.csv", paired_csv(results))
    if sinks:
        with progress.phase("logging to " + ", ".join(type(s).__name__.replace("Sink", "") for s in sinks)):
            log = _run_log(comparison, videos, heatmap_png, fps, attention)
            if found is not None and disagreements is not None:
                log = RunLog(log.step, log.items + disagreements_logged(found, disagreements, folder, fps))
            log_run(sinks, log)
    with progress.phase("report"):
        extra = "" if disagreements is None else disagreements_html(disagreements, folder, folder)
        _write_report(folder, comparison, results, labels, heatmap_png, extra)
    return (comparison, format_comparison(comparison, labels), heatmap_npz, heatmap_png, videos,
            None if disagreements is None else folder / JSON_NAME, attention)


def _write_report(folder: Path, comparison: dict[Any, Any], results: Any, labels: Any, heatmap_png: Path | None,
                  extra: str = "") -> Path:
    """report.html: both agents side by side (summary, findings, episode table, each agent's videos with their per-step
    traces), the heatmap difference with A's column; ``extra``: HTML sections below (the disagreements)."""
    runs = [run_record(folder, comparison[side], result, heatmap_png if side == "a" else None,
                       sorted((folder / "videos" / side).glob("*.mp4")), title=label)
            for side, result, label in zip("ab", results, labels)]
    return write_report(folder / REPORT_NAME, runs, title=f"{labels[0]} vs {labels[1]}", extra=extra)


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


def comparison_dict(results: list[RolloutResult], config: CompareConfig,
                    kinds: tuple[str, str] = ("actor_critic", "actor_critic")) -> dict[Any, Any]:
    """The content of comparison.json for the rollouts of A and B over the same seeds; ``kinds``: the agents'
    policy kinds (their diagnostics are render's, :func:`rlviz.jobs.stages.summarise`)."""
    ra, rb = results
    if [e.seed for e in ra.episodes] != [e.seed for e in rb.episodes]:
        raise UsageError("The rollouts of A and B have different episode seeds; compare needs the same episodes.")
    summaries = [summarise(r, kind).to_dict() for r, kind in zip(results, kinds)]
    flat_a, flat_b = (flat_numbers(s) for s in summaries)
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


def _record_side_by_side(agents: Any, results: Any, folder: Path, config: CompareConfig, gammas: Any, labels: Any,
                         backend: Backend | None = None) -> tuple[list[Any], float]:
    """For each episode ``config.videos`` selects (worst/best by the return B - A): both agents' videos on its
    seed (videos/a, videos/b: render's :func:`~rlviz.jobs.videos.record_videos`, in the workers with a
    ``backend``) and the two side by side (videos/<label>-<k>.mp4)."""
    diffs = results[1].returns - results[0].returns
    maps = [r.heatmap for r in results if r.heatmap is not None]  # failed-at: the episodes where A or B failed there
    chosen = select_episodes(diffs, parse_video_spec(config.videos), seed=config.seed,
                             heatmap=FailureHeatmap.merged(maps) if maps else None)
    if not chosen:
        return [], 30.0
    singles, fps = [], 30.0
    for agent, result, side, gamma in zip(agents, results, "ab", gammas):
        replayed, fps = record_videos(agent, result, folder / side, config.render_config(side), gamma, backend,
                                      chosen, min_seconds=0.0)  # frame-locked: the pair is drawn side by side
        singles.append([Path(str(r.video_path)) for r in replayed])
    videos, rate = [], fps
    for k, (label, idx) in enumerate(chosen):
        longest = max(results[0].episodes[idx].length, results[1].episodes[idx].length) + 1
        rate, held = video_timing(longest, fps, MIN_VIDEO_SECONDS)  # short pairs play slower and hold their end
        with progress.phase(f"side by side {label}:{idx}"):
            path, _ = side_by_side(singles[0][k], singles[1][k], folder / f"{label}-{idx}.mp4", fps=rate,
                                   labels=labels, min_frames=longest + held)
        videos.append(path)
    return videos, rate


def _run_log(comparison: dict[Any, Any], videos: list[Path], heatmap_png: Path | None, fps: float,
             attention: Any = (None, None)) -> RunLog:
    """What a comparison logs (at step 0, under ``rlviz/compare/``): its numbers (with each interval's ends),
    each agent's findings, the side-by-side videos, the heatmap difference and each agent's attention at failure."""
    numbers = {k: v for k, v in flat_numbers(comparison).items() if not k.startswith(("a/", "b/"))}
    for key, (lo, hi) in _intervals(comparison).items():
        numbers[f"{key}_lo"], numbers[f"{key}_hi"] = lo, hi
    items = [Logged.scalars("rlviz/compare/", numbers)]
    items += [Logged.text(f"rlviz/compare/{side}/diagnostics", findings_markdown(comparison[side]["diagnostics"]))
              for side in "ab"]
    items += [Logged.video(f"rlviz/compare/{v.stem}", v, fps) for v in videos]
    if heatmap_png is not None:
        items.append(Logged.image("rlviz/compare/heatmap_diff", heatmap_png))
    items += [Logged.image(f"rlviz/compare/{side}/attention_at_failure", png)
              for side, png in zip("ab", attention) if png is not None]
    return RunLog(0, tuple(items))


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
    return f"[{fmt_number(float(v[0]))}, {fmt_number(float(v[1]))}]"


def format_comparison(c: dict[Any, Any], labels: Any = ("A", "B")) -> str:
    """A plain-text table of a comparison dict for the terminal."""
    boot = c["bootstrap"]
    fa, fb = flat_numbers(c["a"]), flat_numbers(c["b"])
    head = f"{'':<26}{'A':>10}{'B':>10}{'B - A':>10}   95% CI of B - A"
    rows = [
        ("return mean", c["a"]["returns"]["mean"], c["b"]["returns"]["mean"], c["return_diff"]["mean"],
         _ci(c["return_diff"]["ci95"])),
        ("return IQM", c["iqm"]["a"]["value"], c["iqm"]["b"]["value"], c["iqm"]["diff"]["value"],
         _ci(c["iqm"]["diff"]["ci95"])),
        ("return median", c["a"]["returns"]["median"], c["b"]["returns"]["median"], c["return_diff"]["median"],
         "(median of the paired differences)"),
    ]
    rows += [(entropy_label(c["a"], short=True) if key == "mean_relative_entropy" else name, fa.get(key), fb.get(key),
              c["diagnostics_diff"].get(key), "") for name, key in _TABLE_ROWS]
    for obj, d in c.get("attention_diff", {}).items():  # attention shares, paired over the same seeds
        rows += [(f"attention {obj}{what}", fa.get(f"attention/{path}/share{key}"),
                  fb.get(f"attention/{path}/share{key}"), d[f"share{key}_diff"], _ci(d[f"ci95_share{key}_diff"]))
                 for what, key in (("", ""), (" pre-fail", "_before_failure"))
                 for path in [f"objects/{obj}" if obj != "other" else "other"]]
    lines = [f"{labels[0]}  vs  {labels[1]}",
             f"{c['env_id']}: {c['episodes']} episodes on the same seeds; {boot['method']}, "
             f"{boot['resamples']} resamples", "", head]
    lines += [f"{name:<26}{fmt_number(a):>10}{fmt_number(b):>10}{fmt_number(d):>10}   {ci}".rstrip() for name, a, b, d, ci in rows]
    lines += ["", f"P(B > A) + P(B = A) / 2 over paired episodes: {c['prob_improvement']:.3f} "
                  f"{_ci(c['prob_improvement_ci95'])}"]
    return "\n".join(lines)
