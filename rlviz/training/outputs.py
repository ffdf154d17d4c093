"""What ``rlviz timeline`` writes, and the evaluator that keeps a run's checkpoints in step order (used by the job
and by ``--follow`` alike): timeline.json (:func:`timeline_data`), timeline.csv (:func:`timeline_csv`), the terminal
table (:func:`format_timeline`), then the views (:func:`rlviz.training.views.write_views`). See
:mod:`rlviz.training.job` for the layout.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..evaluate.statistics.stats import flat_numbers, fmt_number
from ..media.atomic import atomic_path
from ..sources.run_folders import Skipped, TimelineCheckpoint
from .evaluate import evaluate_checkpoint, evaluate_many, policy_change, visited_states
from .findings import timeline_findings

__all__ = ["TimelineOutputs", "Evaluator", "write_outputs", "timeline_data", "timeline_csv", "format_timeline",
           "outputs_of", "say_stderr", "log_rows", "log_end", "JSON_NAME", "CSV_NAME"]

JSON_NAME, CSV_NAME = "timeline.json", "timeline.csv"


@dataclass(frozen=True)
class TimelineOutputs:
    """What :func:`timeline` wrote. ``data``: the dict in timeline.json; ``failed``: one line per checkpoint that
    failed to load or play (the CLI then exits 1); ``checkpoints``: the TimelineCheckpoints in step order."""

    out_dir: Path
    data: dict
    table: str
    timeline_json: Path
    timeline_csv: Path
    checkpoints: tuple = field(default_factory=tuple, repr=False)
    failed: tuple = ()


class Evaluator:
    """Evaluates a run's checkpoints one at a time, in any order of arrival (``--follow``), keeping them in step
    order with each one's ``policy_change`` against the evaluated checkpoint before it."""

    def __init__(self, config: Any, backend: Any = None, say: Callable[[str], None] | None = None):
        self.config, self.backend, self.say = config, backend, say or (lambda line: None)
        self.done: list[TimelineCheckpoint] = []

    @property
    def good(self) -> list[TimelineCheckpoint]:
        return [c for c in self.done if c.error is None]

    def add(self, cp: TimelineCheckpoint) -> TimelineCheckpoint:
        """Evaluate ``cp`` (its rollout, summary, policy change) and keep it; one progress line."""
        return self.add_many([cp])[0]

    def add_many(self, cps: Sequence[TimelineCheckpoint]) -> list[TimelineCheckpoint]:
        """Evaluate ``cps`` and keep them; one progress line each. With a backend all of them go to its workers at
        once (:func:`rlviz.training.evaluate.evaluate_many`); without, one at a time here."""
        cps = sorted(cps, key=lambda c: c.step)
        if self.backend is None or not cps:
            return [self._keep(self._one(cp)) for cp in cps]
        good = self.good
        previous = next((c for c in reversed(good) if c.step < cps[0].step), None)
        batch = evaluate_many(cps, self.config, self.backend, previous, good[0] if good else None)
        return [self._keep(cp) for cp in batch]

    def _one(self, cp: TimelineCheckpoint) -> TimelineCheckpoint:
        good = self.good
        with progress.phase(f"step {cp.step}: {cp.name}"):
            return evaluate_checkpoint(cp, self.config, good[0] if good else None)

    def _keep(self, cp: TimelineCheckpoint) -> TimelineCheckpoint:
        """Insert ``cp`` in step order; its policy change (and its successor's) against the checkpoint before it,
        measured here unless a worker measured it against that one already."""
        if cp.error is None and _vs(cp) != _step_before(self.good, cp.step):
            cp = self._with_change(cp)
        self.done = sorted([c for c in self.done if c.step != cp.step] + [cp], key=lambda c: c.step)
        later = next((c for c in self.good if c.step > cp.step), None)
        if later is not None and _vs(later) != _step_before(self.good, later.step):
            self._replace(self._with_change(later))
        self.say(_line(cp))
        return cp

    def _with_change(self, cp: TimelineCheckpoint) -> TimelineCheckpoint:
        before = [c for c in self.good if c.step < cp.step]
        if not before:
            return replace(cp, policy_change=None)
        earlier, later = before[-1].load(self.config), cp.load(self.config)
        change = policy_change(earlier, later, visited_states(later, self.config))
        return replace(cp, policy_change=None if change is None else {"vs_step": int(before[-1].step), **change})

    def _replace(self, cp: TimelineCheckpoint) -> None:
        self.done = [cp if c.step == cp.step else c for c in self.done]


def _vs(cp: TimelineCheckpoint) -> int | None:
    return None if cp.policy_change is None else cp.policy_change.get("vs_step")


def _step_before(good: Sequence[TimelineCheckpoint], step: int) -> int | None:
    return next((int(c.step) for c in reversed(good) if c.step < step), None)


def _line(cp: TimelineCheckpoint) -> str:
    """The progress line of one checkpoint."""
    if cp.error is not None:
        return f"rlviz: step {cp.step}: {cp.error}"
    s = cp.summary or {}
    warn = [f["id"] for f in s.get("diagnostics", ()) if f["severity"] == "warning"]
    change = cp.policy_change or {}
    tv = f", policy TV {change['tv_mean']:.3f}" if change.get("tv_mean") is not None else ""
    return (f"rlviz: step {cp.step} ({cp.name}): return {fmt_number(s['returns']['mean'])} over {s['episodes']} episodes"
            f"{tv}; " + (f"warnings: {', '.join(warn)}" if warn else "no warnings"))


def log_rows(sinks: Sequence[Any], data: dict, steps: Collection[int]) -> None:
    """The rows of ``steps`` to the sinks, each at its training step (:func:`rlviz.sinks.log_timeline_checkpoint`)."""
    if not sinks:
        return
    from ..sinks.timeline import log_timeline_checkpoint

    for row in data["checkpoints"]:
        if row["step"] in steps:
            log_timeline_checkpoint(sinks, row)


def log_end(sinks: Sequence[Any], out: Path, data: dict) -> None:
    """Once at the end: the progression video and timeline.png at the last checkpoint's step."""
    if sinks and data["checkpoints"]:
        from ..sinks.timeline import log_timeline_end

        log_timeline_end(sinks, out, data["checkpoints"][-1]["step"])


def outputs_of(out: Path, data: dict, done: Sequence[TimelineCheckpoint]) -> TimelineOutputs:
    return TimelineOutputs(out, data, format_timeline(data), out / JSON_NAME, out / CSV_NAME, tuple(done),
                           tuple(str(f["error"]) for f in data["failed"]))  # (each line names its file once)


def say_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def timeline_data(done: Sequence[TimelineCheckpoint], skipped: Sequence[Skipped], config: Any) -> dict:
    """The content of timeline.json."""
    good = [c for c in done if c.error is None]
    env_id = good[0].result.env_id if good and good[0].result is not None else None
    return {"env_id": env_id, "episodes": int(config.episodes), "seed": int(config.seed),
            "greedy": bool(config.greedy), **timeline_findings(done),
            "failed": [{"step": int(c.step), "checkpoint": c.name, "error": c.error} for c in done if c.error],
            "skipped": [s.to_dict() for s in skipped]}


def write_outputs(folder: Path, done: Sequence[TimelineCheckpoint], skipped: Sequence[Skipped], config: Any,
                  extra: dict | None = None, backend: Any = None) -> dict:
    """timeline.json and timeline.csv in ``folder`` (each replaced atomically), then the views (their video parts
    recorded by ``backend``'s workers when given); the data (``extra``'s keys added to timeline.json's, e.g.
    ``"disagreements"``)."""
    data = {**timeline_data(done, skipped, config), **(extra or {})}
    _write_text(folder / JSON_NAME, json.dumps(_clean(data), indent=2, allow_nan=False) + "\n")
    _write_text(folder / CSV_NAME, timeline_csv(data))
    try:
        from .views import write_views
    except ImportError:  # the views are optional to the numbers: timeline.json / .csv stand alone
        return data
    write_views(folder, data, [c for c in done if c.error is None], config, backend)
    return data


def _clean(value: Any) -> Any:
    """JSON-able: numpy numbers as Python ones, non-finite numbers as None (timeline.json is strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return str(value)


def _write_text(path: Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


#: timeline.csv's columns after ``step`` and ``checkpoint`` (flattened row keys), when a row has them.
_CSV_SKIP = ("diagnostics", "vs_previous/step", "vs_best/step", "policy_change/vs_step", "policy_change/states")


def timeline_csv(data: dict) -> str:
    """timeline.csv: one row per checkpoint, ``step`` first, then the checkpoint, the numbers of its row (flattened
    with ``/``: ``return/mean``, ``vs_best/return_diff/mean``...; CIs as ``_lo``/``_hi``), its warnings' ids."""
    rows = []
    for r in data["checkpoints"]:
        numbers = flat_numbers(_with_intervals(r))
        flat = {"step": r["step"], "checkpoint": r["checkpoint"],
                **{k: v for k, v in numbers.items() if k != "step" and not k.startswith(_CSV_SKIP)}}
        flat["regression"] = int(bool(r.get("regression")))
        flat["warnings"] = ";".join(f["id"] for f in r["diagnostics"] if f["severity"] == "warning")
        rows.append(flat)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns or ["step"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _with_intervals(d: dict) -> dict:
    """``ci95: [lo, hi]`` -> ``ci95_lo``, ``ci95_hi`` (for the flat CSV), recursively."""
    out: dict = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _with_intervals(v)
        elif k.endswith("ci95") and isinstance(v, list) and len(v) == 2:
            out[f"{k}_lo"], out[f"{k}_hi"] = v
        elif k != "percentiles":
            out[k] = v
    return out


def format_timeline(data: dict) -> str:
    """A plain-text table of a timeline dict for the terminal."""
    head = f"{'step':>12}  {'return':>9}  {'95% CI':>20}  {'vs best':>9}  {'policy TV':>9}  warnings"
    lines = [f"{data.get('env_id')}: {len(data['checkpoints'])} checkpoint(s), {data['episodes']} episodes each on the "
             f"same seeds (seed {data['seed']})", "", head]
    for r in data["checkpoints"]:
        ci = r["return"]["ci95"]
        best = r["vs_best"]["return_diff"]["mean"] if r.get("vs_best") else None
        tv = (r.get("policy_change") or {}).get("tv_mean")
        warn = ", ".join(f["id"] for f in r["diagnostics"] if f["severity"] == "warning")
        mark = "  REGRESSION" if r.get("regression") else ""
        lines.append(f"{r['step']:>12}  {fmt_number(r['return']['mean']):>9}  {f'[{fmt_number(ci[0])}, {fmt_number(ci[1])}]':>20}  "
                     f"{fmt_number(best) if best is not None else '':>9}  {fmt_number(tv, 3) if tv is not None else '':>9}  "
                     f"{warn}{mark}".rstrip())
    if data["first_seen"]:
        lines += ["", "first seen: " + ", ".join(f"{k} at {v}" for k, v in data["first_seen"].items())]
    for f in data["failed"]:
        lines.append(f"failed: {f['checkpoint']}")
    return "\n".join(lines)
