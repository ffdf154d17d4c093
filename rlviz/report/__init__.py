"""The report page: one self-contained ``report.html`` per run (summary, findings, heatmap, a sortable episode
table, each video beside its per-step trace, synchronised with it), the page of ``rlviz timeline``
(:mod:`.timeline_page`), and the notebook views of the jobs' outputs."""

from __future__ import annotations

from .data import RunData, VideoData, load_run, step_trace, video_data
from .page import REPORT_NAME, build_html, write_report

__all__ = ["REPORT_NAME", "RunData", "VideoData", "build_html", "load_run", "step_trace", "video_data", "write_report"]
