"""Where a training run's policy started choosing differently: compare's disagreement analysis
(:mod:`rlviz.disagree`, ``rlviz compare EARLIER LATER --disagreements K``) between checkpoints of a run, on the
timeline's seeds and options.

One implementation: each pair is :func:`rlviz.jobs.compare` of the two checkpoint files with the timeline config's
shared options (the same N seeds, ``--greedy``, ``--fail-on``, ``--heatmap``...), written to
``OUT/<step A>-vs-<step B>/`` (comparison.json, disagreements.json/.csv, the branch videos, report.html).
``rlviz timeline RUN --disagreements K`` writes them to its ``--out``'s ``disagreements/`` (:mod:`.job`), and lists
them in timeline.json's ``"disagreements"`` and on its report page.
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

__all__ = ["checkpoint_pairs", "timeline_disagreements", "pairs_disagreements", "pair_folder"]


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


#: Timeline options a pair's compare does not take over: the timeline's sinks get its own rows, not each pair's.
_NOT_PASSED = ("out", "wandb_project", "wandb_run", "tensorboard")


def timeline_disagreements(config: Any, out: str | os.PathLike, disagreements: int | None = None, *,
                           against: int | None = None, horizon: int | None = None, to_end: bool | None = None,
                           videos: int | None = None) -> list[CompareOutputs]:
    """Compare's disagreement analysis between the checkpoints of ``config.run`` (a
    :class:`~rlviz.config.TimelineConfig`) with its options, one compare folder per pair under ``out``; returns
    their :class:`~rlviz.jobs.compare.CompareOutputs` in pair order. The analysis's options default to the
    config's (``--disagreements K``, ``--against STEP``, ``--disagreement-horizon``, ``--disagreement-to-end``,
    ``--disagreement-videos``)."""
    cps, _ = discover(config.run)
    return pairs_disagreements(config, list(cps), out, disagreements, against=against, horizon=horizon,
                               to_end=to_end, videos=videos)


def pairs_disagreements(config: Any, cps: list[TimelineCheckpoint], out: str | os.PathLike,
                        disagreements: int | None = None, *, against: int | None = None, horizon: int | None = None,
                        to_end: bool | None = None, videos: int | None = None) -> list[CompareOutputs]:
    """:func:`timeline_disagreements` between the checkpoints ``cps`` (in step order: the timeline job's, those it
    could evaluate)."""
    def pick(given: Any, name: str, default: Any) -> Any:
        return given if given is not None else getattr(config, name, default)

    k = int(pick(disagreements, "disagreements", 10))
    options = {"disagreements": k, "disagreement_horizon": int(pick(horizon, "disagreement_horizon", 50)),
               "disagreement_to_end": bool(pick(to_end, "disagreement_to_end", False)),
               "disagreement_videos": pick(videos, "disagreement_videos", None)}
    shared = {n: getattr(config, n) for n in COMPARE_SHARED if n in TIMELINE_SHARED and n not in _NOT_PASSED}
    if getattr(config, "vecnormalize", None) is not None:  # the run's one statistics file, for both checkpoints
        shared.update(vecnormalize_a=config.vecnormalize, vecnormalize_b=config.vecnormalize)
    done = []
    for a, b in checkpoint_pairs(cps, pick(against, "against", None)):
        done.append(compare(CompareConfig(a=a.path, b=b.path, out=Path(out) / pair_folder(a.step, b.step),
                                          **options, **shared)))
    return done


def pair_folder(step_a: int, step_b: int) -> str:
    """The folder of one pair's comparison, under the analysis's ``out``."""
    return f"{step_a}-vs-{step_b}"
