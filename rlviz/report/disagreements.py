"""The report page's section on where two agents disagree (``rlviz compare --disagreements K``): the summary
(how often their greedy actions differ, the distribution of TV), the heatmap of where, and the ranked states with
both agents' branches and their side-by-side videos. Built from disagreements.json's dict."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

__all__ = ["disagreements_html"]

_SUMMARY = (("states", "states"), ("greedy actions differ", "greedy_differ_share"), ("TV mean", "tv_mean"),
            ("TV median", "tv_q50"), ("TV 90%", "tv_q90"), ("TV 99%", "tv_q99"), ("value A (mean)", "value_a_mean"),
            ("value B (mean)", "value_b_mean"))
_STATE_COLUMNS = (("#", "rank"), ("states of", "states_of"), ("episode", "episode"), ("step", "step"), ("TV", "tv"),
                  ("V_A", "value_a"), ("V_B", "value_b"), ("A's branch return", "a_return"), ("A failed", "a_failed"),
                  ("B's branch return", "b_return"), ("B failed", "b_failed"), ("better", "better"))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return html.escape(str(v))


def _rel(path: Path, page_dir: Path) -> str:
    return html.escape(os.path.relpath(path, page_dir).replace(os.sep, "/"))


def disagreements_html(data: dict[str, Any], folder: str | os.PathLike, page_dir: str | os.PathLike) -> str:
    """The section's HTML; ``folder``: the run's folder (the JSON's paths are relative to it), ``page_dir``: the
    page's."""
    folder, page_dir = Path(folder), Path(page_dir)
    summary = data.get("summary", {})
    gap = data.get("measure") == "action_gap"  # deterministic actors: the actions' distance scaled by the bounds
    label = "gap" if gap else "TV"
    heads = (("A's states", "on_a_states"), ("B's states", "on_b_states"), ("both", "all"))
    rows = "".join(f"<tr><th>{name.replace('TV', label)}</th>" + "".join(f"<td>{_fmt(summary.get(k, {}).get(key))}</td>" for _, k in heads)
                   + "</tr>" for name, key in _SUMMARY)
    table = (f"<table class='summary'><tr><th></th>{''.join(f'<th>{h}</th>' for h, _ in heads)}</tr>{rows}</table>")
    horizon = data.get("horizon")
    parts = ["<section class='run disagreements'><h2>Where A and B disagree</h2>",
             "<p class='readout'>Each agent is asked on the other's states; "
             + ("gap is the distance of their actions scaled by the action bounds, averaged over the action's "
                "dimensions (0: the same action, 1: opposite ends of the bounds)" if gap else
                "TV is the total-variation distance of their action distributions (0: the same, 1: disjoint)")
             + ". The top states (one per "
             f"{int(data.get('window', 0))} steps of an episode) are played out by both agents from the saved state, "
             f"{'to the end of the episode' if horizon is None else f'for {int(horizon)} steps'}, with the same "
             "env randomness.</p>", table]
    png = folder / "disagreement_heatmap.png"
    if png.is_file():
        parts.append(f"<h3>Where they choose differently</h3><img alt='disagreement heatmap' src='{_rel(png, page_dir)}'>")
    if data.get("note"):
        parts.append(f"<p class='readout'>{html.escape(str(data['note']))}</p>")
    states = data.get("states", [])
    if states:
        head = "".join(f"<th>{label if h == 'TV' else h}</th>" for h, _ in _STATE_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{_fmt(s.get(k))}</td>" for _, k in _STATE_COLUMNS) + "</tr>"
                       for s in states)
        parts.append(f"<h3>Top {len(states)} states</h3><table class='summary'><tr>{head}</tr>{body}</table>")
    for s in states:
        if s.get("video"):
            parts.append(f"<div class='video'><div><b>#{int(s['rank'])}</b> episode {int(s['episode'])} of "
                         f"{html.escape(str(s['states_of']).upper())}, step {int(s['step'])} ({label} {_fmt(s['tv'])}; "
                         f"better: {_fmt(s.get('better'))})<br><video controls muted playsinline preload='metadata' "
                         f"src='{_rel(folder / s['video'], page_dir)}'></video></div></div>")
    parts.append("</section>")
    return "".join(parts)
