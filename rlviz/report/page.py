"""``report.html``: one self-contained page per run (or per comparison of runs), opened offline.

The page inlines its CSS and plain JS (``page.css``, ``page.js`` beside this module) and its data as JSON; the
videos and heatmap images are referenced by paths relative to the page, so the folder can be moved or zipped.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..evaluate.statistics.stats import entropy_label
from ..media import atomic_write
from .data import RunData

__all__ = ["build_html", "write_report", "REPORT_NAME"]

REPORT_NAME = "report.html"
_SUMMARY_ROWS = [("episodes", "episodes"), ("steps", "steps"), ("return mean", "returns.mean"),
                 ("return IQM", "returns.iqm"), ("return median", "returns.median"), ("return std", "returns.std"),
                 ("return min", "returns.min"), ("return max", "returns.max"), ("length mean", "lengths.mean"),
                 ("failures / episode", "failures_per_episode"), ("terminated rate", "terminated_rate"),
                 ("truncated rate", "truncated_rate"), ("solve rate", "solve_rate"),
                 ("mean relative entropy", "mean_relative_entropy"), ("value mean", "value_mean"),
                 ("discounted return mean", "discounted_return_mean"),
                 ("value explained variance", "value_explained_variance"), ("gamma", "gamma"),
                 ("Hub repo", "hub.repo"), ("Hub revision", "hub.revision"), ("Hub commit", "hub.commit")]
_PALETTE = ["#5c84c8", "#ffb028", "#78e678", "#ff78c8", "#b48cff", "#5ac8ff", "#ff5050", "#c8c864"]


def write_report(path: str | os.PathLike, runs: Sequence[RunData], title: str | None = None, extra: str = "") -> Path:
    """Write the page for ``runs`` (one run, or several side by side) to ``path``, atomically; ``extra``: HTML
    sections below the runs (e.g. :func:`rlviz.report.disagreements.disagreements_html`)."""
    path = Path(path)
    return atomic_write(path, build_html(runs, path.parent, title, extra))


def build_html(runs: Sequence[RunData], page_dir: str | os.PathLike, title: str | None = None, extra: str = "") -> str:
    """The page's HTML; paths are written relative to ``page_dir`` (the folder the page will be in)."""
    page_dir = Path(page_dir)
    title = title or " vs ".join(r.title for r in runs) or "rlviz report"
    data = {"runs": [_run_json(r, page_dir) for r in runs]}
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    body = "".join(_run_html(r, i, page_dir, len(runs) > 1) for i, r in enumerate(runs))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src 'self' data:; "
        "media-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><link rel='icon' href='data:,'><style>{_asset('page.css')}</style>"
        f"</head><body><main><h1>{html.escape(title)}</h1><div class='runs'>{body}</div>{extra}</main>"
        f"<script type='application/json' id='rlviz-data'>{blob}</script><script>{_asset('page.js')}</script>"
        "</body></html>\n"
    )


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _rel(path: Path, page_dir: Path) -> str:
    return html.escape(os.path.relpath(path, page_dir).replace(os.sep, "/"))


def _run_json(run: RunData, page_dir: Path) -> dict:
    columns = list(run.episodes[0]) if run.episodes else []
    rows = [[_cell(row[c]) for c in columns] for row in run.episodes]
    videos = [{"episode": v.episode, "label": v.label, "trace": v.trace} for v in run.videos]
    return {"title": run.title, "columns": columns, "rows": rows, "videos": videos}


def _cell(v: str):
    """A CSV cell as a compact JSON value: numbers rounded to 5 significant digits, booleans, strings."""
    if v in ("True", "False"):
        return v == "True"
    try:
        x = float(v)
    except ValueError:
        return v
    if x != x or x in (float("inf"), float("-inf")):
        return None
    return int(x) if x.is_integer() and abs(x) < 2**53 else float(f"{x:.5g}")


def _get(summary: dict, dotted: str):
    v: Any = summary
    for k in dotted.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v


def _label(name: str, key: str, summary: dict) -> str:
    """A summary row's name (a Box agent's entropy is its differential entropy, in nats)."""
    return entropy_label(summary) if key == "mean_relative_entropy" else name


def _run_html(run: RunData, r: int, page_dir: Path, several: bool) -> str:
    rows = "".join(f"<tr><th>{_label(name, key, run.summary)}</th><td>{html.escape(_num(_get(run.summary, key)))}</td></tr>"
                   for name, key in _SUMMARY_ROWS if _get(run.summary, key) is not None)
    heading = f"<h2>{html.escape(run.title)}</h2>" if several else ""
    parts = [f"<section class='run'>{heading}<div class='top'><div><h3>Summary</h3>"
             f"<table class='summary'>{rows}</table>{_findings_html(run.summary)}</div>"]
    if run.heatmap is not None:
        parts.append(f"<div class='heatmap'><h3>Failure heatmap</h3><img alt='failure heatmap' "
                     f"src='{_rel(run.heatmap, page_dir)}'></div>")
    parts.append("</div>" + _attention_html(run, page_dir))
    if run.episodes:
        parts.append(f"<h3>Episodes ({len(run.episodes)})</h3><p class='readout'>Click a column to sort; "
                     f"highlighted rows have a video.</p><div class='episodes' id='episodes-{r}'></div>")
    if run.videos:
        parts.append("<h3>Videos</h3>")
    for i, v in enumerate(run.videos):
        parts.append(_video_html(v, f"video-{r}-{i}", page_dir))
    parts.append("</section>")
    return "".join(parts)


def _attention_html(run: RunData, page_dir: Path) -> str:
    """The attention table (share of attribution per object: all steps, before failures, elsewhere, area) and the
    attention map at failure beside the failure heatmap, when the run computed attention."""
    att = run.summary.get("attention")
    if not att:
        return ""
    rows = "".join(
        f"<tr><th>{html.escape(name)}</th>" + "".join(f"<td>{html.escape(_num(r.get(k)) if r.get(k) is not None else '-')}</td>" for k in
                                                       ("share", "share_before_failure", "share_elsewhere", "area"))
        + "</tr>" for name, r in {**att["objects"], "other": att["other"]}.items())
    png = Path(run.folder) / "attention_at_failure.png"
    img = (f"<img alt='attention at failure' src='{_rel(png, page_dir)}'>" if png.is_file() else "")
    return (f"<h3>Attention ({html.escape(str(att.get('attribution', '')))})</h3><table class='summary'><tr><th>"
            "</th><th>share</th><th>before failures</th><th>elsewhere</th><th>area</th></tr>"
            f"{rows}</table>{img}")


def _findings_html(summary: dict) -> str:
    findings = summary.get("diagnostics")
    if not findings:
        return ""
    items = "".join(
        f"<div class='finding {html.escape(str(f.get('severity', 'info')))}'><b>{html.escape(str(f.get('id', '')))}"
        f"</b>: {html.escape(str(f.get('message', '')))}</div>" for f in findings)
    return f"<h3>Findings</h3>{items}"


def _video_html(v, box_id: str, page_dir: Path) -> str:
    names = v.trace.get("action_names", [])
    legend = "".join(f"<span style='color:{_PALETTE[a % len(_PALETTE)]}'>&#9632; {html.escape(n)}</span>"
                     for a, n in enumerate(names))
    series = ("<span style='color:#5ac8ff'>&#9632; value</span><span style='color:#ff78c8'>&#9632; return-to-go"
              "</span><span style='color:#b48cff'>&#9632; entropy</span><span style='color:#78e678'>&#9632; reward"
              "</span>")
    what = f"episode {v.episode}" if v.episode >= 0 else html.escape(v.path.name)
    return (f"<div class='video' id='{box_id}'><div><b>{html.escape(v.label)}</b> {what} "
            f"({v.trace.get('T', '?')} steps)<br><video controls muted playsinline preload='auto' "
            f"src='{_rel(v.path, page_dir)}'></video></div><div class='trace'>"
            "<div class='trace-title'>per-step trace of this episode</div><canvas data-step='0'></canvas>"
            f"<div class='legend'>{series}</div><div class='legend'>{legend}</div><div class='readout'></div>"
            "</div></div>")


def _num(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
