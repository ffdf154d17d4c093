"""``timeline.png``: a training run at a glance, and ``timeline_heatmaps.png``: how its failures moved.

Read from the rows of ``timeline.json`` (see :mod:`rlviz.training.views`), drawn with matplotlib (Agg):

- top: the return mean of each checkpoint with its 95% CI band against the training step; a dashed line where a
  diagnostic was first raised (``first_seen``) and a red triangle at each regression (labelled with the
  checkpoint it fell below);
- beneath: the mean relative entropy H/ln|A| and the value explained variance, on the same step axis;
- with attention (``--saliency METHOD --heatmap``): each object's attribution share over all steps (solid) and over
  the steps before failures (dashed), so a drop of attention before failures shows where it began.

The picture has a fixed size, :data:`SIZE` pixels (no tight bounding box), so pages and tests can rely on it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluate.failures.heatmap import FailureHeatmap, plot_small_multiples
from ..media import atomic_path

__all__ = ["plot_timeline", "plot_timelines", "plot_timeline_heatmaps", "row_value", "attention_objects", "SIZE",
           "DPI"]

#: (width, height) of ``timeline.png`` in pixels.
SIZE = (1200, 900)
DPI = 100
_RETURN, _BAND, _ENTROPY, _EV = "#2f6db5", "#9cc0ea", "#8a5cd6", "#2a9d6a"
_ONSET, _REGRESSION = "#d98a00", "#d62728"


def row_value(row: Mapping[str, Any], dotted: str) -> float:
    """The number at ``dotted`` (``"return.mean"``) in a timeline row; NaN when it is missing or not a number."""
    v: Any = row
    for key in dotted.split("."):
        v = v.get(key) if isinstance(v, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return math.nan
    return float(v)


def _ci(row: Mapping[str, Any]) -> tuple[float, float]:
    ret = row.get("return")
    ci = ret.get("ci95") if isinstance(ret, Mapping) else None
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(c, (int, float)) for c in ci):
        return float(ci[0]), float(ci[1])
    return math.nan, math.nan


def plot_timeline(path: str | os.PathLike, data: Mapping[str, Any], title: str | None = None) -> Path:
    """Draw ``timeline.png`` for ``data`` (the ``timeline.json`` dict) at ``path``, atomically; returns the path.

    Rows without a number leave a gap; an entropy or explained variance missing at every checkpoint (no value
    head) is said in its panel instead of drawn."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows = list(data.get("checkpoints") or [])
    steps = np.asarray([row_value(r, "step") for r in rows], dtype=np.float64)
    mean = np.asarray([row_value(r, "return.mean") for r in rows])
    ci = np.asarray([_ci(r) for r in rows]).reshape(-1, 2)
    objects = attention_objects(rows)
    fig, axes = plt.subplots(4 if objects else 3, 1, sharex=True, figsize=(SIZE[0] / DPI, SIZE[1] / DPI), dpi=DPI,
                             gridspec_kw={"height_ratios": [3, 1.2, 1.2] + ([1.2] if objects else [])},
                             layout="constrained")
    ax = axes[0]
    ax.fill_between(steps, ci[:, 0], ci[:, 1], color=_BAND, alpha=0.6, linewidth=0, label="95% CI of the mean")
    ax.plot(steps, mean, "o-", color=_RETURN, label="return mean")
    ax.set_ylabel("return")
    _mark_onsets(axes, data.get("first_seen") or {})
    _mark_regressions(ax, data.get("regressions") or [], rows)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(title or f"{len(rows)} checkpoint(s)" + (f" of {data['env_id']}" if data.get("env_id") else ""),
                 fontsize=11)
    _series(axes[1], steps, [row_value(r, "mean_relative_entropy") for r in rows], _ENTROPY,
            "entropy H/ln|A|", (0.0, 1.05))
    _series(axes[2], steps, [row_value(r, "value_explained_variance") for r in rows], _EV,
            "value expl. var.", None)
    if objects:
        _attention_panel(axes[3], steps, rows, objects)
    axes[-1].set_xlabel("training step")
    axes[-1].ticklabel_format(axis="x", style="sci", scilimits=(-3, 5), useMathText=True)
    for a in axes:
        a.grid(True, alpha=0.3)
    return _save(fig, path)


def attention_objects(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The object names of the rows' attention summaries (``row["attention"]["objects"]``), in first-seen order;
    empty when the timeline ran without attention."""
    names: list[str] = []
    for r in rows:
        att = r.get("attention")
        objs = att.get("objects") if isinstance(att, Mapping) else None
        names += [n for n in (objs or {}) if n not in names]
    return names


def _attention_panel(ax: Any, steps: np.ndarray, rows: Sequence[Mapping[str, Any]], objects: Sequence[str]) -> None:
    """Each object's attribution share per checkpoint: over all steps (solid) and before failures (dashed)."""
    import matplotlib.pyplot as plt

    colors = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]  # a ListedColormap
    for i, name in enumerate(objects):
        color = colors[i % len(colors)]
        share = [row_value(r, f"attention.objects.{name}.share") for r in rows]
        before = [row_value(r, f"attention.objects.{name}.share_before_failure") for r in rows]
        ax.plot(steps, share, "o-", color=color, markersize=3, label=f"{name}")
        ax.plot(steps, before, "--", color=color, linewidth=1, label=f"{name} before failures")
    ax.set_ylabel("attention share")
    ax.legend(loc="best", fontsize=7, ncol=2)


def _series(ax, steps: np.ndarray, values: Sequence[float], color: str, label: str, ylim) -> None:
    v = np.asarray(values, dtype=np.float64)
    ax.set_ylabel(label)
    if not np.isfinite(v).any():
        ax.text(0.5, 0.5, f"no {label} (no value head, or not recorded)", transform=ax.transAxes,
                ha="center", va="center", color="grey")
        return
    ax.plot(steps, v, "o-", color=color, markersize=4)
    if ylim is not None:
        ax.set_ylim(*ylim)


def _mark_onsets(axes, first_seen: Mapping[str, Any]) -> None:
    """A dashed line on every panel at each diagnostic's first step, its id written at the top panel."""
    by_step: dict[float, list[str]] = {}
    for did, seen in first_seen.items():
        step = seen.get("step") if isinstance(seen, Mapping) else seen
        if isinstance(step, (int, float)) and not isinstance(step, bool):
            by_step.setdefault(float(step), []).append(str(did))
    lo, hi = axes[0].get_xlim()
    for k, (step, ids) in enumerate(sorted(by_step.items())):
        for a in axes:
            a.axvline(step, color=_ONSET, linestyle="--", linewidth=1.2, label="diagnostic first seen"
                      if (a is axes[0] and k == 0) else None)
        right = step > (lo + hi) / 2  # the label on the side with room
        axes[0].annotate("\n".join(sorted(ids)), (step, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(-3 if right else 3, -3), textcoords="offset points", va="top",
                         ha="right" if right else "left", fontsize=7, color=_ONSET)


def _mark_regressions(ax, regressions: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> None:
    """A red triangle under the return at each regression, labelled with the step it fell below."""
    means = {row_value(r, "step"): row_value(r, "return.mean") for r in rows}
    xs, ys = [], []
    for reg in regressions:
        step = row_value(reg, "step")
        y = means.get(step, math.nan)
        if math.isnan(step) or math.isnan(y):
            continue
        xs.append(step)
        ys.append(y)
        diff = row_value(reg, "return_diff.mean")
        ax.annotate(f"{diff:+.3g} vs {int(row_value(reg, 'vs_step')):,}", (step, y), xytext=(0, -16),
                    textcoords="offset points", ha="center", va="top", fontsize=7, color=_REGRESSION)
    if xs:
        ax.plot(xs, ys, "v", color=_REGRESSION, markersize=11, label="regression (95% CI below 0)", zorder=5)


#: Colours of the runs in :func:`plot_timelines`, in order.
RUN_COLORS = ("#2f6db5", "#d62728", "#2a9d6a", "#8a5cd6", "#d98a00", "#17becf")


def plot_timelines(path: str | os.PathLike, runs: Mapping[str, Mapping[str, Any]], title: str | None = None) -> Path:
    """Several training runs' timelines on one step axis (e.g. a run and its twin with a bug): per run, the return
    mean with its 95% CI band, the entropy H/ln|A| and the value explained variance, in one colour; regressions
    marked. ``runs``: {label: the ``timeline.json`` dict}. Same size as ``timeline.png``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(SIZE[0] / DPI, SIZE[1] / DPI), dpi=DPI,
                             gridspec_kw={"height_ratios": [3, 1.2, 1.2]}, layout="constrained")
    for (label, data), color in zip(runs.items(), RUN_COLORS * (1 + len(runs) // len(RUN_COLORS))):
        rows = list(data.get("checkpoints") or [])
        steps = np.asarray([row_value(r, "step") for r in rows], dtype=np.float64)
        ci = np.asarray([_ci(r) for r in rows]).reshape(-1, 2)
        axes[0].fill_between(steps, ci[:, 0], ci[:, 1], color=color, alpha=0.18, linewidth=0)
        axes[0].plot(steps, [row_value(r, "return.mean") for r in rows], "o-", color=color, label=label)
        _mark_regressions(axes[0], data.get("regressions") or [], rows)
        for ax, key in ((axes[1], "mean_relative_entropy"), (axes[2], "value_explained_variance")):
            ax.plot(steps, [row_value(r, key) for r in rows], "o-", color=color, markersize=4, label=label)
    axes[0].set_ylabel("return (mean, 95% CI)")
    axes[0].legend(loc="best", fontsize=9)
    axes[0].set_title(title or " vs ".join(runs), fontsize=11)
    axes[1].set_ylabel("entropy H/ln|A|")
    axes[1].set_ylim(0.0, None)
    axes[2].set_ylabel("value expl. var.")
    axes[2].set_xlabel("training step")
    axes[2].ticklabel_format(axis="x", style="sci", scilimits=(-3, 5), useMathText=True)
    for a in axes:
        a.grid(True, alpha=0.3)
    return _save(fig, path)


def plot_timeline_heatmaps(path: str | os.PathLike, heatmaps: Sequence[FailureHeatmap], steps: Sequence[int],
                           log: bool = False) -> Path:
    """``timeline_heatmaps.png``: the failure heatmap of each checkpoint as small multiples, one column per
    checkpoint (titled with its training step), one row per object; each cell counts per failure, on one colour
    scale per row, so the columns compare. Drawn by :func:`rlviz.evaluate.failures.heatmap.plot_small_multiples`."""
    return plot_small_multiples(path, heatmaps, [f"step {int(s):,}" for s in steps], log=log)


def _save(fig, path: str | os.PathLike) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    return path
