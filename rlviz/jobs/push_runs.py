"""The run ``rlviz push`` publishes, read from its folder: a render run (its agent), or a compare run (agent B, the
candidate, with its paired difference against A). Either becomes one :class:`PushedRun`: the render options that
replay the agent's episodes, its summary and its episode rows as a single agent's (a PettingZoo run's: the team's).

Nothing is written here; :mod:`rlviz.jobs.push` builds the repo folder from a :class:`PushedRun`."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import COMPARE_SHARED
from ..errors import UsageError

__all__ = ["PushedRun", "read_run"]


@dataclass(frozen=True)
class PushedRun:
    """One agent's run, as the push reads it.

    ``options``: the RenderConfig options (names as rlviz-run.json writes them) that replay its episodes;
    ``summary``: summary.json's dict with ``returns`` and ``lengths`` (a PettingZoo run's: the team's);
    ``rows``: episodes.csv's rows, each with ``episode``, ``seed``, ``return`` and ``length`` (strings);
    ``report``: the run's report.html; ``heatmap``: its heatmap.png (None when it has none);
    ``comparison``: a compare run's comparison.json (B against A), None for a render run."""

    folder: Path
    options: dict[str, Any]
    summary: dict[str, Any]
    rows: list[dict[str, str]]
    report: Path | None
    heatmap: Path | None
    comparison: dict[str, Any] | None = None


def _load(run: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    try:
        meta = json.loads((run / "rlviz-run.json").read_text())
        with (run / "episodes.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{run} is not an rlviz render or compare run ({type(exc).__name__} reading its "
                         "rlviz-run.json and episodes.csv); pass the --out folder of `rlviz render`.") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("options"), dict) or \
            meta.get("job") not in ("render", "compare"):
        job = meta.get("job") if isinstance(meta, dict) else "?"
        raise UsageError(f"{run} is a {job!r} run; rlviz push publishes a render run (or a compare run's agent B): "
                         "pass the --out folder of `rlviz render` or `rlviz compare`.")
    return meta, rows


def _json(path: Path, run: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{run} is not a complete rlviz run ({type(exc).__name__} reading {path.name}); render "
                         "it again.") from None
    if not isinstance(data, dict):
        raise UsageError(f"{run}/{path.name} holds a {type(data).__name__}, expected an object; render it again.")
    return data


def _team_summary(summary: dict[str, Any], rows: list[dict[str, str]]) -> dict[str, Any]:
    """A multi-agent run's summary with ``returns`` and ``lengths`` (the team's) as a single agent's reads."""
    import numpy as np

    def stats(values: list[float], given: dict[str, Any] | None) -> dict[str, Any]:
        x = np.asarray(values, dtype=float)
        out = {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std()), "median": float(np.median(x)),
               "min": float(x.min()), "max": float(x.max())}
        return {**out, **{k: v for k, v in (given or {}).items() if k in ("mean", "std", "min", "max")}}

    return {**summary, "returns": stats([float(r["return"]) for r in rows], summary.get("team_return")),
            "lengths": stats([float(r["length"]) for r in rows], summary.get("episode_steps"))}


def _compare_side(meta: dict[str, Any], rows: list[dict[str, str]], side: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """A compare run's agent ``side``: its render options (CompareConfig's per-agent fields as RenderConfig's) and
    its episode rows (``b_return`` -> ``return``...)."""
    given = meta["options"]
    options = {n: given[n] for n in COMPARE_SHARED if n in given}
    options.update(checkpoint=given.get(side), vecnormalize=given.get(f"vecnormalize_{side}"))
    prefix = f"{side}_"
    return options, [{"episode": r["episode"], "seed": r["seed"],
                      **{k[len(prefix):]: v for k, v in r.items() if k.startswith(prefix)}} for r in rows]


def read_run(run: Path) -> PushedRun:
    """The agent a run folder publishes: a render run's, or a compare run's B (refused: any other folder)."""
    if not (run / "rlviz-run.json").is_file():
        raise UsageError(f"{run} is not an rlviz run (no rlviz-run.json); pass the --out folder of `rlviz render`.")
    meta, rows = _load(run)
    comparison = None
    if meta["job"] == "compare":
        comparison = _json(run / "comparison.json", run)
        summary = comparison.get("b")
        if not isinstance(summary, dict):
            raise UsageError(f"{run}/comparison.json has no summary of B; run the comparison again.")
        options, rows = _compare_side(meta, rows, "b")
        heatmap = None  # (heatmap_diff.png is A's and B's: the replay of B draws B's own)
    else:
        options, summary = meta["options"], _json(run / "summary.json", run)
        heatmap = run / "heatmap.png" if (run / "heatmap.png").is_file() else None
    if rows and "team_return" in rows[0]:  # a PettingZoo run: the team's return is the episode's
        rows = [{**r, "return": r["team_return"], "length": r.get("steps", "0")} for r in rows]
        summary = _team_summary(summary, rows)
    if not rows or "returns" not in summary:
        raise UsageError(f"{run} holds no episodes; render at least one episode before pushing it.")
    report = run / "report.html"
    return PushedRun(run, options, summary, rows, report if report.is_file() else None, heatmap, comparison)
