"""The report page of ``rlviz timeline``: a training-step axis; click a checkpoint to see its numbers, findings,
failure heatmap and its episode (its part of ``progression.mp4``, with the per-step trace of that episode).

Self-contained like :mod:`.page`: inline CSS (``page.css``) and JS (``page.js``, whose per-step trace class draws
the chosen episode, then ``timeline.js``), the data as JSON, images and videos by relative paths. The per-step
value / entropy trace of one episode is called a "per-step trace" on this page, never a timeline: the timeline is
the training run.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..media import atomic_write
from .data import step_trace as episode_trace
from .page import _asset, _rel

__all__ = ["write_timeline_report", "build_timeline_html"]


def write_timeline_report(path: str | os.PathLike, data: Mapping[str, Any], parts: Sequence[Any] = (),
                          heatmaps: Mapping[int, Path] | None = None, png: Path | None = None,
                          heatmaps_png: Path | None = None) -> Path:
    """Write the timeline page for ``data`` (the ``timeline.json`` dict) to ``path``, atomically.

    parts: the progression parts (:class:`rlviz.training.progression.ProgressionPart`, their videos in
    ``path``'s folder under ``progression/``); heatmaps: {step: PNG}; png / heatmaps_png: timeline.png and
    timeline_heatmaps.png, shown under the chart."""
    path = Path(path)
    return atomic_write(path, build_timeline_html(data, path.parent, parts, heatmaps or {}, png, heatmaps_png))


def _clean(v: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, tuples -> lists, paths -> strings."""
    if isinstance(v, Mapping):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):  # numpy scalars
        return _clean(v.item())
    return str(v)


def _not_evaluated(data: Mapping[str, Any]) -> str:
    """The checkpoints that failed to load or play, and the files left out, each with its one-line reason."""
    lines = [f"step {f.get('step')}: {f.get('error')}" for f in data.get("failed") or []]
    lines += [str(s.get("why")) for s in data.get("skipped") or []]
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<h3>Not evaluated ({len(lines)})</h3><ul class='not-evaluated'>{items}</ul>"


def _disagreements(data: Mapping[str, Any]) -> str:
    """``--disagreements K``: a link per pair of checkpoints to its comparison's page (the states where the two
    disagree and what each choice led to)."""
    pairs = data.get("disagreements") or []
    if not pairs:
        return ""

    def share(p: Mapping[str, Any]) -> str:
        v = (p.get("all") or {}).get("greedy_differ_share") if isinstance(p.get("all"), Mapping) else None
        return "" if not isinstance(v, (int, float)) else f": greedy actions differ on {100 * v:.1f}% of states"

    items = "".join(f"<li><a href='{html.escape(str(p.get('report')), quote=True)}'>step {int(p['a'])} vs step "
                    f"{int(p['b'])}</a>{html.escape(share(p))}</li>" for p in pairs)
    return f"<h3>Where checkpoints disagree ({len(pairs)} pairs)</h3><ul class='disagreements'>{items}</ul>"


def build_timeline_html(data: Mapping[str, Any], page_dir: str | os.PathLike, parts: Sequence[Any] = (),
                        heatmaps: Mapping[int, Path] | None = None, png: Path | None = None,
                        heatmaps_png: Path | None = None) -> str:
    """The page's HTML; paths are written relative to ``page_dir``."""
    page_dir = Path(page_dir)
    rows = [_clean(r) for r in data.get("checkpoints") or []]
    episodes = {}
    for p in parts:
        video = page_dir / "progression" / p.video
        episodes[str(p.step)] = {"video": _rel(video, page_dir), "first_frame": p.first_frame, "frames": p.frames,
                                 "seed": p.seed, "return": p.ret, "length": p.length, "trace": episode_trace(video)}
    blob = {
        "checkpoints": rows, "first_seen": _clean(data.get("first_seen") or {}),
        "regressions": _clean(data.get("regressions") or []), "episodes": episodes,
        "heatmaps": {str(s): _rel(Path(p), page_dir) for s, p in (heatmaps or {}).items()},
        "runs": [],  # page.js's per-run part (none here); its per-step trace class draws the chosen episode
    }
    text = json.dumps(blob, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    title = f"rlviz timeline: {data.get('env_id') or ''} {len(rows)} checkpoint(s)".replace("  ", " ")
    shown = (("timeline.png", png), ("timeline_heatmaps.png", heatmaps_png))
    pictures = "".join(f"<img alt='{alt}' src='{_rel(p, page_dir)}'>" for alt, p in shown
                       if p is not None and p.is_file())
    movie = (page_dir / "progression.mp4").is_file()
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src 'self' data:; "
        "media-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><link rel='icon' href='data:,'><style>{_asset('page.css')}"
        f"{_asset('timeline.css')}</style></head><body><main><h1>{html.escape(title)}</h1>"
        "<p class='readout'>The training run: each point is a checkpoint (return mean over the same episode seeds, "
        "with its 95% CI). Click one to see its numbers, findings, heatmap and episode.</p>"
        "<div id='tl-chart'><canvas id='tl-canvas'></canvas></div><div id='tl-steps'></div>"
        "<div class='top'><div id='tl-left'><h3 id='tl-heading'></h3><table class='summary' id='tl-numbers'></table>"
        "<details><summary>all numbers</summary><table class='summary' id='tl-more'></table></details>"
        "<div id='tl-findings'></div></div><div id='tl-right'><div class='heatmap' id='tl-heatmap'></div>"
        "<h3>Its episode (the same seed at every checkpoint)</h3><div id='tl-episode'></div></div></div>"
        + ("<h3>All checkpoints in training order</h3><video controls muted preload='metadata' id='tl-progression' "
           "src='progression.mp4'></video>" if movie else "")
        + f"<div class='pictures'>{pictures}</div>{_disagreements(data)}{_not_evaluated(data)}</main>"
        f"<script type='application/json' id='rlviz-data'>{text}</script>"
        f"<script>{_asset('page.js')}\n{_asset('timeline.js')}</script></body></html>\n"
    )
