"""What the disagreement analysis writes into a comparison's folder and logs to its sinks.

::

    disagreements.json     the summary (share of states where the greedy actions differ, TV's distribution, per
                           agent's states), the options, and the ranked states with both branches' outcomes;
                           "measure" says what the "tv" numbers are: "total_variation", or "action_gap" for
                           deterministic actors ("measure_is" in words); "note": fewer states than asked, or no
                           branches, and why
    disagreements.csv      one row per ranked state (the same numbers)
    disagreement_heatmap.npz/.png   object positions on the states where the greedy actions differ (with --heatmap)
    videos/disagreements/state-<rank>.mp4   the two branches side by side (per-step numbers: a/ b/state-<rank>.npz)
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from ..evaluate.statistics.distance import MEASURES
from ..media.atomic import atomic_path
from ..sinks.log import Logged, RunLog, log_run
from .run import BranchedState, Disagreements

__all__ = ["state_row", "disagreements_dict", "write_disagreements", "log_disagreements", "disagreements_logged", "CSV_COLUMNS",
           "JSON_NAME", "CSV_NAME", "HEATMAP_NAME"]

JSON_NAME, CSV_NAME, HEATMAP_NAME = "disagreements.json", "disagreements.csv", "disagreement_heatmap"
CSV_COLUMNS = ("rank", "states_of", "episode", "seed", "step", "tv", "greedy_differ", "value_a", "value_b",
               "a_return", "a_steps", "a_failed", "a_terminated", "b_return", "b_steps", "b_failed", "b_terminated",
               "better", "video")


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def state_row(s: BranchedState, folder: Path | None = None) -> dict[str, Any]:
    """One ranked state as a flat dict (the CSV's columns; None where a branch was not played)."""
    p = s.pick
    row: dict[str, Any] = {"rank": s.rank, "states_of": p.side, "episode": p.episode, "seed": p.seed, "step": p.step,
                           "tv": _num(p.tv), "greedy_differ": p.differ, "value_a": _num(p.value_a),
                           "value_b": _num(p.value_b)}
    for side, br in (("a", s.a), ("b", s.b)):
        row.update({f"{side}_return": None if br is None else br.ret, f"{side}_steps": None if br is None else br.steps,
                    f"{side}_failed": None if br is None else br.failed,
                    f"{side}_terminated": None if br is None else br.terminated})
    video = s.video
    row["better"] = s.better
    row["video"] = None if video is None else (str(video.relative_to(folder)) if folder else str(video))
    return row


def disagreements_dict(d: Disagreements, config: Any, folder: Path | None = None) -> dict[str, Any]:
    """The content of disagreements.json."""
    wins = {k: sum(1 for s in d.states if s.better == k) for k in ("a", "b", "tie")}
    return {"disagreements": int(config.disagreements), "horizon": d.horizon, "to_end": bool(config.disagreement_to_end),
            "window": int(config.disagreement_horizon), "measure": d.measure, "measure_is": MEASURES[d.measure],
            "summary": d.summary,
            "branches": {"states": sum(1 for s in d.states if s.a is not None), "better": wins},
            "note": d.note, "states": [state_row(s, folder) for s in d.states]}


def write_disagreements(d: Disagreements, config: Any, folder: Path) -> dict[str, Any]:
    """disagreements.json, .csv and the heatmap (when there is one) in ``folder``; returns the JSON's dict."""
    data = disagreements_dict(d, config, folder)
    with atomic_path(folder / JSON_NAME) as tmp:
        tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in data["states"]:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    with atomic_path(folder / CSV_NAME) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")
    if d.heatmap is not None:
        d.heatmap.save(folder / f"{HEATMAP_NAME}.npz")
        d.heatmap.plot(folder / f"{HEATMAP_NAME}.png",
                       title=f"{d.heatmap.env_id}: objects on {d.heatmap.failures} states where A and B choose "
                             f"differently / {d.heatmap.episodes} episodes")
    return data


def log_disagreements(sinks: list[Any], d: Disagreements, data: dict[str, Any], folder: Path, fps: float) -> None:
    """The ranked states as a table, their videos and the heatmap, to each sink (the summary numbers go with the
    comparison's scalars)."""
    log_run(sinks, RunLog(0, disagreements_logged(d, data, folder, fps)))


def disagreements_logged(d: Disagreements, data: dict[str, Any], folder: Path, fps: float) -> tuple[Logged, ...]:
    """What :func:`log_disagreements` logs (compare logs it with the comparison, in one :class:`RunLog`)."""
    rows = [[row[c] for c in CSV_COLUMNS] for row in data["states"]]
    png = folder / f"{HEATMAP_NAME}.png"
    items = [Logged.table("rlviz/compare/disagreements", list(CSV_COLUMNS), rows)]
    items += [Logged.video(f"rlviz/compare/disagreement-{s.rank}", s.video, fps) for s in d.states
              if s.video is not None]
    if d.heatmap is not None and png.is_file():
        items.append(Logged.image("rlviz/compare/disagreement_heatmap", png))
    return tuple(items)
