"""Where a training run's policy started choosing differently: compare's disagreement analysis
(:mod:`rlviz.disagree`, ``rlviz compare EARLIER LATER --disagreements K``) between checkpoints of a run, on the
timeline's seeds and options.

One implementation: each pair is :func:`rlviz.jobs.compare` of the two checkpoint files with the timeline config's
shared options (the same N seeds, ``--greedy``, ``--fail-on``, ``--heatmap``...), written to
``OUT/<step A>-vs-<step B>/`` (comparison.json, disagreements.json/.csv, the branch videos, report.html).
Pairs: consecutive checkpoints, or with ``against=STEP`` the checkpoint at STEP (as A) against each other one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import COMPARE_SHARED, TIMELINE_SHARED, CompareConfig
from ..errors import UsageError
from ..jobs.compare import CompareOutputs, compare
from ..sources.run_folders import TimelineCheckpoint, discover

__all__ = ["checkpoint_pairs", "timeline_disagreements"]


def checkpoint_pairs(cps: list[TimelineCheckpoint], against: int | None = None) -> list[tuple[TimelineCheckpoint,
                                                                                                TimelineCheckpoint]]:
    """(A, B) pairs of checkpoints in step order: consecutive ones, or the one at step ``against`` with each other."""
    if against is None:
        return list(zip(cps, cps[1:]))
    base = next((cp for cp in cps if cp.step == int(against)), None)
    if base is None:
        raise UsageError(f"against={against}: the run has no checkpoint at that step; its steps are "
                         f"{', '.join(str(cp.step) for cp in cps)}.")
    return [(base, cp) for cp in cps if cp is not base]


def timeline_disagreements(config: Any, out: str | os.PathLike, disagreements: int = 10, *, against: int | None = None,
                           horizon: int = 50, to_end: bool = False) -> list[CompareOutputs]:
    """Compare's disagreement analysis between the checkpoints of ``config.run`` (a
    :class:`~rlviz.config.TimelineConfig`) with its options, one compare folder per pair under ``out``; returns
    their :class:`~rlviz.jobs.compare.CompareOutputs` in pair order."""
    cps, _ = discover(config.run)
    shared = {n: getattr(config, n) for n in COMPARE_SHARED if n in TIMELINE_SHARED and n != "out"}
    done = []
    for a, b in checkpoint_pairs(cps, against):
        done.append(compare(CompareConfig(a=a.path, b=b.path, out=Path(out) / f"{a.step}-vs-{b.step}",
                                          disagreements=disagreements, disagreement_horizon=horizon,
                                          disagreement_to_end=to_end, **shared)))
    return done
