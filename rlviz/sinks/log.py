"""Logging a run to the sinks, written once: a job (render, compare, timeline, the training-loop integrations) says
*what* it logs as a :class:`RunLog` (an ordered list of :class:`Logged` entries at one step), and :func:`log_run`
hands each entry to each sink in that order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Sink, as_sinks, check_step

__all__ = ["Logged", "RunLog", "log_run", "findings_markdown"]


@dataclass(frozen=True)
class Logged:
    """One entry of a :class:`RunLog`. Build it with its class methods: :meth:`scalars` (``name``: the prefix of
    every key; ``value``: ``{key: number}``), :meth:`text`, :meth:`table` (``value``: (columns, rows)),
    :meth:`video` (``value``: the MP4's path; ``fps``, ``caption``) and :meth:`image` (``value``: a PNG path or an
    HxWx3 uint8 array)."""

    kind: str  # "scalars", "text", "table", "video" or "image"
    name: str
    value: Any
    fps: float | None = None
    caption: str | None = None

    @classmethod
    def scalars(cls, prefix: str, numbers: Mapping[str, float]) -> Logged:
        return cls("scalars", prefix, dict(numbers))

    @classmethod
    def text(cls, name: str, text: str) -> Logged:
        return cls("text", name, text)

    @classmethod
    def table(cls, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Logged:
        return cls("table", name, (list(columns), [list(r) for r in rows]))

    @classmethod
    def video(cls, name: str, path: str | os.PathLike[str], fps: float, caption: str | None = None) -> Logged:
        return cls("video", name, path, fps=fps, caption=caption)

    @classmethod
    def image(cls, name: str, image: Any) -> Logged:
        return cls("image", name, image)


@dataclass(frozen=True)
class RunLog:
    """What a job logs at one ``step`` (0 for render and compare; the training step for a timeline), in order."""

    step: int
    items: tuple[Logged, ...] = ()


def log_run(sinks: Sink | Iterable[Sink] | None, log: RunLog) -> None:
    """Log each entry of ``log`` to each sink (W&B, TensorBoard, a folder), in order, at ``log.step``."""
    step = check_step(log.step)
    for sink in as_sinks(sinks):
        for item in log.items:
            if item.kind == "scalars":
                sink.log_scalars(item.value, step=step, prefix=item.name)
            elif item.kind == "text":
                sink.log_text(item.name, item.value, step=step)
            elif item.kind == "table":
                sink.log_table(item.name, item.value[0], item.value[1], step=step)
            elif item.kind == "video":
                sink.log_video(item.name, item.value, step=step, fps=item.fps if item.fps is not None else 30.0, caption=item.caption)
            else:  # "image" (the class methods make no other kind)
                sink.log_image(item.name, item.value, step=step)


def findings_markdown(findings: Iterable[Mapping[str, Any]]) -> str:
    """Diagnostic findings (dicts with severity, id, message; a multi-agent run's with code and agent instead of id) as
    a markdown list; "no findings" when none."""
    lines = [f"- **{f.get('severity')}** `{f.get('id') or f.get('code')}`{_whose(f)}: {f.get('message')}"
             for f in findings]
    return "\n".join(lines) or "no findings"


def _whose(finding: Mapping[str, Any]) -> str:
    """The finding's agent as " (agent)" (a multi-agent run's findings name one), else nothing."""
    agent = finding.get("agent")
    return f" ({agent})" if agent else ""
