"""``report.html`` of a multi-agent run (``rlviz render`` on a PettingZoo env id, :mod:`rlviz.jobs.render_agents`):
one self-contained page, opened offline, as the single-agent report (:mod:`.page`: the same CSS and script).

From the top: the team's statistics; a table of each agent's statistics (return mean, std, min and max, length,
terminations, truncations, failures and failures placed on the heatmap), each number as ``summary.json`` holds it;
the findings, grouped by agent; the failure heatmap (one panel per agent) or the note saying why there is none; the
sortable episode table (``episodes.csv``: a row with a video opens it); the videos (the shared frame and one panel
column per agent), each with its per-agent saliency picture when the run computed saliency. The page's data
(``<script id='rlviz-data'>``) holds the same numbers as JSON.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..media import atomic_write
from .page import REPORT_NAME, _asset, _cell, _num, _rel

__all__ = ["agents_report_html", "write_agents_report", "AGENT_COLUMNS"]

#: The per-agent table's columns: (heading, key path in summary.json's ``agents.<agent>``).
AGENT_COLUMNS = (("return mean", "return.mean"), ("return std", "return.std"), ("return min", "return.min"),
                 ("return max", "return.max"), ("length mean", "length.mean"), ("terminations", "terminations"),
                 ("truncations", "truncations"), ("failures", "failures"), ("failures placed", "failures_placed"))
_EPISODE = re.compile(r"-episode-(\d+)$")


def _get(d: dict[str, Any], dotted: str) -> Any:
    v: Any = d
    for k in dotted.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v


def write_agents_report(folder: str | os.PathLike[str], title: str | None = None) -> Path:
    """Write ``report.html`` into the multi-agent run ``folder`` (read back from its summary.json, episodes.csv,
    heatmap.png and videos/), atomically; its path."""
    folder = Path(folder)
    return atomic_write(folder / REPORT_NAME, agents_report_html(folder, title))


def agents_report_html(folder: str | os.PathLike[str], title: str | None = None) -> str:
    """The page's HTML for the multi-agent run ``folder``; paths relative to it (the page lives there)."""
    folder = Path(folder)
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{folder} has no readable summary.json ({exc}); expected a folder written by `rlviz "
                         "render` on a PettingZoo env id.") from None
    if not summary.get("multi_agent"):
        raise UsageError(f"{folder}/summary.json is a single-agent run's; its page is rlviz.report.write_report.")
    rows: list[dict[str, str]] = []
    if (folder / "episodes.csv").is_file():
        with open(folder / "episodes.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    videos = sorted((folder / "videos").glob("*.mp4"), key=lambda p: (_episode(p), p.name))
    title = title or f"{summary.get('env_id', folder.name)} ({len(summary.get('agents', {}))} agents)"
    agents = list(summary.get("agents_list") or summary.get("agents", {}))
    columns = list(rows[0]) if rows else []
    data = {"runs": [{"title": title, "columns": columns,
                      "rows": [[_cell(r[c]) for c in columns] for r in rows],
                      "videos": [{"episode": _episode(v), "label": v.stem, "trace": None} for v in videos]}],
            "agents": {a: summary["agents"][a] for a in agents}, "team_return": summary.get("team_return")}
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    body = [f"<section class='run'><div class='top'><div><h3>Team</h3>{_team_html(summary)}</div>",
            _heatmap_html(folder, summary), "</div>", _agents_table_html(summary, agents),
            _findings_html(summary, agents)]
    if rows:
        body.append(f"<h3>Episodes ({len(rows)})</h3><p class='readout'>Click a column to sort; highlighted rows "
                    "have a video.</p><div class='episodes' id='episodes-0'></div>")
    if videos:
        body.append("<h3>Videos</h3>")
    body += [_video_html(v, f"video-0-{i}", folder) for i, v in enumerate(videos)]
    body.append("</section>")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src 'self' data:; "
        "media-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><link rel='icon' href='data:,'><style>{_asset('page.css')}"
        ".agents td:first-child{text-align:left}</style>"
        f"</head><body><main><h1>{html.escape(title)}</h1><div class='runs'>{''.join(body)}</div></main>"
        f"<script type='application/json' id='rlviz-data'>{blob}</script><script>{_asset('page.js')}</script>"
        "</body></html>\n"
    )


def _episode(path: Path) -> int:
    m = _EPISODE.search(path.stem)
    return int(m.group(1)) if m else -1


def _team_html(summary: dict[str, Any]) -> str:
    items = [("episodes", summary.get("episodes")), ("steps", summary.get("steps")),
             ("team return mean", _get(summary, "team_return.mean")), ("team return std", _get(summary, "team_return.std")),
             ("team return min", _get(summary, "team_return.min")), ("team return max", _get(summary, "team_return.max")),
             ("episode steps mean", _get(summary, "episode_steps.mean")), ("policy", summary.get("policy")),
             ("kind", summary.get("kind")), ("seed", summary.get("seed")), ("greedy", summary.get("greedy"))]
    rows = "".join(f"<tr><th>{name}</th><td>{html.escape(_num(v))}</td></tr>" for name, v in items if v is not None)
    return f"<table class='summary'>{rows}</table>"


def _agents_table_html(summary: dict[str, Any], agents: list[str]) -> str:
    head = "".join(f"<th>{name}</th>" for name, _ in AGENT_COLUMNS)
    rows = "".join(
        f"<tr data-agent='{html.escape(a)}'><td>{html.escape(a)}</td>" + "".join(
            f"<td>{html.escape(_num(_get(summary['agents'][a], key)))}</td>" for _, key in AGENT_COLUMNS) + "</tr>"
        for a in agents)
    return f"<h3>Agents</h3><table class='summary agents'><tr><th>agent</th>{head}</tr>{rows}</table>"


def _findings_html(summary: dict[str, Any], agents: list[str]) -> str:
    findings = summary.get("diagnostics") or []
    if not findings:
        return "<h3>Findings</h3><p class='readout'>No finding for any agent.</p>"
    order = {a: i for i, a in enumerate(agents)}
    parts = ["<h3>Findings</h3>"]
    for f in sorted(findings, key=lambda f: order.get(str(f.get("agent")), len(order))):
        parts.append(f"<div class='finding {html.escape(str(f.get('severity', 'info')))}' data-agent='"
                     f"{html.escape(str(f.get('agent', '')))}'><b>{html.escape(str(f.get('agent', '')))}</b> "
                     f"({html.escape(str(f.get('code', '')))}): {html.escape(str(f.get('message', '')))}</div>")
    return "".join(parts)


def _heatmap_html(folder: Path, summary: dict[str, Any]) -> str:
    png = folder / "heatmap.png"
    if png.is_file():
        return (f"<div class='heatmap'><h3>Failure heatmap per agent</h3><img alt='failure heatmap per agent' "
                f"src='{_rel(png, folder)}'></div>")
    note = summary.get("heatmap_note")
    return f"<div><h3>Failure heatmap</h3><p class='readout'>{html.escape(str(note))}</p></div>" if note else ""


def _video_html(video: Path, box_id: str, folder: Path) -> str:
    episode = _episode(video)
    what = f"episode {episode}" if episode >= 0 else html.escape(video.name)
    label = _EPISODE.sub("", video.stem)
    saliency = video.with_name(video.stem + "-saliency.png")
    extra = (f"<div><div class='trace-title'>mean saliency per agent</div><img alt='saliency per agent' "
             f"style='max-width:560px' src='{_rel(saliency, folder)}'></div>" if saliency.is_file() else "")
    return (f"<div class='video' id='{box_id}'><div><b>{html.escape(label)}</b> {what}<br><video controls muted "
            f"playsinline preload='auto' style='max-width:100%' src='{_rel(video, folder)}'></video></div>{extra}</div>")
