"""What changed over training, from the evaluated checkpoints (all on the same episode seeds).

* each checkpoint's return against the previous checkpoint's and against the best earlier one's: the paired
  difference with a bootstrap 95% CI (:func:`rlviz.evaluate.statistics.paired.paired_difference`, compare's code);
* ``first_seen``: each diagnostic id -> the first step it was raised; ``diagnostics_over_training``: for each id the
  steps it was raised at, its last step and whether it ``persisted`` (raised at every checkpoint from its first on);
* ``regressions``: the checkpoints whose paired difference against the best earlier checkpoint has its 95% CI
  entirely below 0 (a drop beyond the episodes' noise, not a bad draw);
* ``policy_change`` (computed in :mod:`rlviz.training.evaluate`): carried into the rows;
* ``entropy_collapsing``, a finding only a run can show (added to the row where it holds, so ``first_seen`` names its
  step): a discrete stochastic policy whose mean relative entropy H/ln|A| has fallen below
  :data:`COLLAPSING_ENTROPY` and to less than half of the highest an earlier checkpoint had. Render's
  ``policy_collapsed`` needs the entropy under 0.01 on 95% of steps (a policy that has become deterministic); this
  one is the slide towards it, while training still runs (a missing entropy bonus, a too high learning rate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..evaluate.statistics.paired import bootstrap_ci, paired_difference
from ..sources.run_folders import TimelineCheckpoint

__all__ = ["checkpoint_row", "timeline_findings", "paired_diff", "COLLAPSING_ENTROPY"]

#: ``entropy_collapsing``: the mean relative entropy under this (a tenth of uniform's), and under half the run's highest
#: before (healthy MinAtar Breakout PPO runs stay above 0.16 here; their no-entropy twins fall to 0.04-0.09).
COLLAPSING_ENTROPY = 0.1

#: Summary keys the row shows under their own names (``returns`` becomes ``return``; diagnostics are listed).
_NOT_COPIED = ("returns", "diagnostics", "episodes", "env_id")


def paired_diff(earlier: TimelineCheckpoint, later: TimelineCheckpoint) -> dict:
    """``{"step": earlier.step, "return_diff": {"mean", "median", "ci95"}, "prob_improvement"}`` of later - earlier
    over the shared seeds."""
    assert earlier.result is not None and later.result is not None  # noqa: S101 - callers pass evaluated ones
    c = paired_difference(earlier.result.returns, later.result.returns)
    return {"step": int(earlier.step), "checkpoint": earlier.name, "return_diff": c["return_diff"],
            "prob_improvement": c["prob_improvement"]}


def checkpoint_row(cp: TimelineCheckpoint) -> dict:
    """One checkpoint's row of timeline.json: step, checkpoint, episodes, return (render's statistics of the
    returns + ci95 of the mean), render's other statistics, diagnostics, policy_change."""
    assert cp.summary is not None and cp.result is not None  # noqa: S101
    s = cp.summary
    row: dict = {"step": int(cp.step), "checkpoint": cp.name, "episodes": int(s["episodes"]),
                 "return": {**s["returns"], "ci95": bootstrap_ci(cp.result.returns)}}
    row.update({k: v for k, v in s.items() if k not in _NOT_COPIED})
    row["diagnostics"] = [{k: f[k] for k in ("id", "severity", "message", "evidence")} for f in s["diagnostics"]]
    row["policy_change"] = cp.policy_change
    return row


def _best_index(means: Sequence[float]) -> int:
    """The index of the highest mean return (the earliest on ties)."""
    return int(np.argmax(np.asarray(means)))


def timeline_findings(checkpoints: Sequence[TimelineCheckpoint]) -> dict:
    """``{"checkpoints": rows, "first_seen", "diagnostics_over_training", "regressions"}`` for the evaluated
    checkpoints in step order (failed ones are left out here)."""
    good = sorted((c for c in checkpoints if c.result is not None and c.summary is not None), key=lambda c: c.step)
    rows: list[dict] = []
    regressions: list[dict] = []
    means: list[float] = []
    for i, cp in enumerate(good):
        row = checkpoint_row(cp)
        row["vs_previous"] = paired_diff(good[i - 1], cp) if i else None
        row["vs_best"] = None
        row["regression"] = False
        if i:
            best = good[_best_index(means)]
            vs_best = row["vs_previous"] if best is good[i - 1] else paired_diff(best, cp)
            row["vs_best"] = vs_best
            if vs_best["return_diff"]["ci95"][1] < 0:
                row["regression"] = True
                regressions.append({"step": int(cp.step), "vs_step": int(best.step),
                                    "return_diff": {k: vs_best["return_diff"][k] for k in ("mean", "ci95")}})
        means.append(float(row["return"]["mean"]))
        rows.append(row)
    _entropy_collapsing(rows)
    over = _diagnostics_over_training(rows)
    return {"checkpoints": rows, "first_seen": {k: v["first_seen"] for k, v in over.items()},
            "diagnostics_over_training": over, "regressions": regressions}


def _diagnostics_over_training(rows: list[dict]) -> dict:
    """For each diagnostic id raised at some checkpoint: first_seen, last_seen, steps, severity, persisted."""
    steps = [r["step"] for r in rows]
    seen: dict[str, dict] = {}
    for r in rows:
        for f in r["diagnostics"]:
            entry = seen.setdefault(f["id"], {"first_seen": r["step"], "severity": f["severity"], "steps": []})
            if r["step"] not in entry["steps"]:
                entry["steps"].append(r["step"])
    for entry in seen.values():
        after = [s for s in steps if s >= entry["first_seen"]]
        entry["last_seen"] = entry["steps"][-1]
        entry["persisted"] = entry["steps"] == after
    return dict(sorted(seen.items(), key=lambda kv: (kv[1]["first_seen"], kv[0])))


def _entropy_collapsing(rows: list[dict]) -> None:
    """Add ``entropy_collapsing`` (a warning) to the diagnostics of each row where it holds (module docstring)."""
    highest: tuple[float, int] | None = None  # (entropy, step) of the highest earlier checkpoint
    for r in rows:
        ent = r.get("mean_relative_entropy")
        if r.get("entropy_measure") is not None or not isinstance(ent, (int, float)) or not np.isfinite(ent):
            continue  # a Box policy's differential entropy, or none (a Q-learner)
        if highest is not None and ent < COLLAPSING_ENTROPY and ent < 0.5 * highest[0] and \
                not any(f["id"] == "policy_collapsed" for f in r["diagnostics"]):
            r["diagnostics"].append({
                "id": "entropy_collapsing", "severity": "warning",
                "message": f"The policy's mean relative entropy fell to {ent:.3f} (from {highest[0]:.3f} at step "
                           f"{highest[1]:,}): it is becoming deterministic while training runs and explores less "
                           "and less. Often a missing or too small entropy bonus (check that it reaches the loss "
                           "that is differentiated), or a too high learning rate.",
                "evidence": {"mean_relative_entropy": round(float(ent), 4),
                             "highest_before": round(float(highest[0]), 4), "highest_step": int(highest[1]),
                             "threshold": COLLAPSING_ENTROPY}})
        if highest is None or ent > highest[0]:
            highest = (float(ent), int(r["step"]))
