"""``rlviz.timeline``: every checkpoint of a training run on the same episode seeds (``rlviz timeline RUN``).

find the checkpoints (:mod:`rlviz.sources.run_folders`) -> evaluate each on the run's N seeds, its row equal to ``rlviz render``
of the file (:mod:`.evaluate`) -> what changed over training (:mod:`.findings`) -> outputs. ``--follow``:
:mod:`.follow` (the same outputs, replaced after each new checkpoint).

Output layout (``out``: a folder of the run's own; see :mod:`rlviz.jobs.outdir`)::

    rlviz-run.json     what wrote the run, with which options
    timeline.json      env_id, episodes, seed, "checkpoints" (rows in step order: step, checkpoint, episodes,
                       return {mean, ci95, std, median, iqm, min, max, percentiles}, render's other statistics,
                       diagnostics [{id, severity, message, evidence}], policy_change, vs_previous, vs_best,
                       regression), first_seen {id: step}, diagnostics_over_training, regressions
                       [{step, vs_step, return_diff {mean, ci95}}], failed, skipped
    timeline.csv       one row per checkpoint, step first
    (views: timeline.png, heatmaps, progression.mp4, report.html: :mod:`rlviz.training.views`)
    disagreements/<step A>-vs-<step B>/   with --disagreements K: compare's analysis of each pair of checkpoints
                       (:mod:`rlviz.training.disagreements`), listed in timeline.json's "disagreements"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import TimelineConfig
from ..errors import CheckpointError, UsageError
from ..jobs.outdir import check_out_dir, job_inputs
from ..jobs.skeleton import job_setup
from ..sources.run_folders import discover
from .outputs import Evaluator, TimelineOutputs, log_end, log_rows, outputs_of, say_stderr, write_outputs

__all__ = ["TimelineConfig", "TimelineOutputs", "timeline"]

#: The folder under the timeline's --out that holds one comparison per pair of checkpoints.
DISAGREEMENTS_DIR = "disagreements"


def timeline(config: Any = None, **kwargs: Any) -> TimelineOutputs:
    """Run the whole ``rlviz timeline RUN`` job for a :class:`TimelineConfig`; ``timeline(run=..., episodes=...)``
    works too. A checkpoint that
    fails to load or play is named in ``failed`` (one line); the others are still evaluated and written. Only a run
    none of whose checkpoints can be evaluated fails (:class:`~rlviz.errors.CheckpointError`, nothing written)."""
    if config is None:
        config = TimelineConfig(**kwargs)
    elif kwargs:
        raise UsageError("timeline() takes either a TimelineConfig or keyword arguments, not both.")
    check_out_dir(config.out, config.overwrite, job_inputs(config))  # refuse a bad --out before the long work
    if config.follow:
        from .follow import follow

        return follow(config)
    checkpoints, skipped = discover(config.run)
    say = say_stderr if config.progress else (lambda line: None)
    for s in skipped:
        say(f"rlviz: skipped {s.why}")
    with job_setup(config) as job:  # --out claimed, progress, the workers (started once for the run)
        evaluator = Evaluator(config, job.backend, say)  # (each checkpoint is resolved as it is evaluated)
        with job.staging("timeline") as (tmp, sinks):  # the sinks first: a missing extra fails before the long work
            evaluator.add_many(checkpoints)  # with workers: every checkpoint's tasks at once
            if not evaluator.good:  # only this fails the job: a bad checkpoint among good ones is listed
                raise CheckpointError(f"RUN {config.run}: none of its {len(evaluator.done)} checkpoint(s) could "
                                      f"be evaluated (e.g. {evaluator.done[0].error}); nothing was written.")
            pairs = _disagreements(tmp, evaluator.good, config) if config.disagreements else None
            data = write_outputs(tmp, evaluator.done, skipped, config, pairs, job.backend)
            log_rows(sinks, data, {c.step for c in evaluator.done})
            log_end(sinks, tmp, data)
    return outputs_of(Path(config.out), data, evaluator.done)


def _disagreements(folder: Path, good: list[Any], config: Any) -> dict[str, Any]:
    """``--disagreements K``: compare's analysis between the evaluated checkpoints (consecutive ones, or
    ``--against STEP`` with each other one), under ``folder/disagreements/``; timeline.json's entry: per pair, its
    steps, folder, report page, and the summary compare put in its comparison.json."""
    from .disagreements import pair_folder, pairs_disagreements

    done = pairs_disagreements(config, sorted(good, key=lambda cp: cp.step), folder / DISAGREEMENTS_DIR)
    rows = []
    for out in done:
        a, b = (int(s) for s in out.out_dir.name.split("-vs-"))
        where = f"{DISAGREEMENTS_DIR}/{pair_folder(a, b)}"
        rows.append({"a": a, "b": b, "folder": where, "report": f"{where}/report.html",
                     **out.comparison.get("disagreements", {})})
    return {"disagreements": rows}
