"""Notebook views of a job's outputs (the ``_repr_html_`` of :class:`~rlviz.jobs.render.RenderOutputs`)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..episode.display import table_html, video_html

__all__ = ["outputs_html"]


def outputs_html(summary: dict, heatmap_png: Path | None, videos, report: Path | None = None) -> str:
    """Statistics table, the heatmap (embedded PNG) and each video playing inline; a link to the report page."""
    returns, lengths = summary.get("returns", {}), summary.get("lengths", {})
    rows = [("env", summary.get("env_id")), ("episodes", summary.get("episodes")),
            ("return mean", returns.get("mean")), ("return IQM", returns.get("iqm")),
            ("return min / max", f"{returns.get('min')} / {returns.get('max')}"),
            ("length mean", lengths.get("mean")), ("failures / episode", summary.get("failures_per_episode"))]
    parts = ["<div class='rlviz-render'>", table_html(rows)]
    for f in summary.get("diagnostics") or []:
        parts.append(f"<p><b>{html.escape(str(f.get('severity', '')))}</b> {html.escape(str(f.get('message', '')))}</p>")
    if heatmap_png is not None and Path(heatmap_png).is_file():
        png = base64.b64encode(Path(heatmap_png).read_bytes()).decode("ascii")
        parts.append(f"<img alt='failure heatmap' style='max-width:100%' src='data:image/png;base64,{png}'>")
    parts.extend(f"<div><b>{html.escape(Path(v).name)}</b><br>{video_html(v)}</div>" for v in videos)
    if report is not None:
        parts.append(f"<p>Report page: <code>{html.escape(str(report))}</code></p>")
    parts.append("</div>")
    return "".join(parts)
