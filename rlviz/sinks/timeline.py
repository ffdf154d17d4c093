"""A training run's timeline to the sinks, at the **training step** (the global step is the number of environment
steps), so each checkpoint's numbers line up with the training curves of the same run in W&B / TensorBoard.

``rlviz timeline`` (and ``--follow``, and the training callbacks) call :func:`log_timeline_checkpoint` once per
evaluated checkpoint and :func:`log_timeline_end` once at the end (the progression video and the timeline picture).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .base import Sink, as_sinks, check_step
from .log import Logged, RunLog, findings_markdown, log_run

__all__ = ["log_timeline_checkpoint", "log_timeline_end", "timeline_scalars", "PREFIX"]

#: Every name logged here starts with it (``timeline/return/mean``).
PREFIX = "timeline/"
_SKIP = {"step", "checkpoint", "diagnostics"}


def timeline_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of one timeline row (a ``timeline.json`` checkpoint), flattened with ``/``: ``return/mean``,
    ``return/ci95_low``, ``return/ci95_high``, ``mean_relative_entropy``, ``policy_change/tv_mean``...,
    booleans as 0/1 (``regression``), plus ``diagnostics/count`` and ``diagnostics/warnings``. NaN, None, strings
    and the steps of other checkpoints (``vs_best/step``) are left out."""
    out: dict[str, float] = {}

    def walk(d: Mapping[str, Any], prefix: str) -> None:
        for k, v in d.items():
            if (prefix == "" and k in _SKIP) or k in ("step", "vs_step"):  # steps are the x axis, not numbers
                continue
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                walk(v, key + "/")
            elif isinstance(v, (list, tuple)) and len(v) == 2 and k.startswith("ci"):
                for end, x in zip(("low", "high"), v):
                    if _number(x):
                        out[f"{key}_{end}"] = float(x)
            elif isinstance(v, bool):  # e.g. "regression": 1 where the checkpoint is one
                out[key] = float(v)
            elif _number(v):
                out[key] = float(v)

    walk(row, "")
    findings = [f for f in row.get("diagnostics") or [] if isinstance(f, Mapping)]
    out["diagnostics/count"] = float(len(findings))
    out["diagnostics/warnings"] = float(sum(f.get("severity") == "warning" for f in findings))
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def log_timeline_checkpoint(sinks: Sink | Iterable[Sink] | None, row: Mapping[str, Any],
                            step: int | None = None) -> None:
    """Log one checkpoint's numbers (:func:`timeline_scalars`, under ``timeline/``) and its findings (text) at its
    training ``step`` (default ``row["step"]``)."""
    step = check_step(row.get("step") if step is None else step)
    text = findings_markdown(f for f in row.get("diagnostics") or [] if isinstance(f, Mapping))
    log_run(sinks, RunLog(step, (Logged.scalars(PREFIX, timeline_scalars(row)),
                                 Logged.text(PREFIX + "diagnostics", f"{row.get('checkpoint', '')}\n\n{text}"))))


def log_timeline_end(sinks: Sink | Iterable[Sink] | None, out: str | os.PathLike, step: int,
                     fps: float | None = None) -> None:
    """Once at the end: ``progression.mp4`` (a video) and ``timeline.png`` (an image) from ``out``, when they are
    there, at the last checkpoint's training ``step``."""
    out, step = Path(out), check_step(step)
    video, png = out / "progression.mp4", out / "timeline.png"
    targets = as_sinks(sinks)
    if not targets:  # (no probe of the video for no sink)
        return
    items = [Logged.image(PREFIX + "timeline", png)] if png.is_file() else []
    if video.is_file():
        if fps is None:
            from ..media import probe_video

            fps = probe_video(video, count=False).fps or 30.0
        items.append(Logged.video(PREFIX + "progression", video, fps))
    log_run(targets, RunLog(step, tuple(items)))
