"""What the report page shows of one run (built by the job from what it holds, or read from a run's folder):
summary, findings, episode table, heatmap and, per recorded video, its per-step trace from its ``.npz`` per-step
numbers (downsampled when long)."""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..media import probe_video

__all__ = ["RunData", "VideoData", "load_run", "video_data", "step_trace", "MAX_POINTS"]

#: A per-step trace keeps at most this many points per series (longer episodes are downsampled by a stride).
MAX_POINTS = 1200
_EPISODE_IN_NAME = re.compile(r"-(\d+)-episode-\d+$")  # render's videos: <label>-<episode>-episode-0.mp4


@dataclass(frozen=True)
class VideoData:
    """One recorded episode on the page: the MP4's path, the episode's index in the run (-1: unknown), a label
    and its per-step trace (see :func:`step_trace`)."""

    path: Path
    episode: int
    label: str
    trace: dict


@dataclass(frozen=True)
class RunData:
    """One run's part of the page. ``folder`` is the run's folder (paths are shown relative to the page)."""

    title: str
    folder: Path
    summary: dict
    episodes: list = field(default_factory=list)  # rows of episodes.csv as dicts
    heatmap: Path | None = None
    videos: tuple = field(default_factory=tuple)


def load_run(folder: str | os.PathLike, title: str | None = None) -> RunData:
    """Read a run folder written by ``rlviz render`` (summary.json, episodes.csv, heatmap.png, videos/)."""
    folder = Path(folder)
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise UsageError(f"{folder} has no summary.json; expected a folder written by `rlviz render --out`.")
    summary = json.loads(summary_path.read_text())
    rows = []
    if (folder / "episodes.csv").is_file():
        with open(folder / "episodes.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    heatmap = folder / "heatmap.png"
    videos = tuple(video_data(p) for p in sorted((folder / "videos").glob("*.mp4"), key=_video_order))
    return RunData(title=title or str(summary.get("env_id") or folder.name), folder=folder, summary=summary,
                   episodes=rows, heatmap=heatmap if heatmap.is_file() else None, videos=videos)


def _video_order(path: Path) -> float:
    return path.stat().st_mtime_ns


def video_data(path: Path) -> VideoData:
    """One recorded episode on the page: render's ``<label>-<episode>-episode-0.mp4`` (label and episode from the
    name; -1 when the name has none) with its per-step trace."""
    m = _EPISODE_IN_NAME.search(path.stem)
    episode = int(m.group(1)) if m else -1
    label = path.stem[: m.start()] if m else path.stem
    return VideoData(path=path, episode=episode, label=label, trace=step_trace(path))


def step_trace(video: str | os.PathLike, max_points: int = MAX_POINTS) -> dict:
    """The per-step series of a recorded episode for the page's per-step trace, read from the video's ``.npz``:
    steps T, fps, stride (one point every ``stride`` steps), value / return_to_go / entropy (floats rounded),
    rewards (summed per stride), probs [A][points], action names, chosen actions (every stride-th)."""
    video = Path(video)
    npz = video.with_suffix(".npz")
    if not npz.is_file():
        info = probe_video(video)
        return {"T": max(info.num_frames - 1, 0), "fps": info.fps or 30.0, "stride": 1}
    with np.load(npz, allow_pickle=False) as d:
        data = {k: d[k] for k in d.files}
    if "rewards" not in data:  # a multi-agent video's .npz (per agent): the steps and the frame rate only
        info = probe_video(video)
        return {"T": max(info.num_frames - 1, 0), "fps": float(data["fps"]) if "fps" in data else info.fps or 30.0,
                "stride": 1}
    # the frame rate the video was written at (older .npz files do not say: read the MP4's header)
    fps = float(data["fps"]) if "fps" in data else (probe_video(video).fps or 30.0)
    rewards = np.asarray(data["rewards"], np.float64)
    T = int(rewards.shape[0])
    stride = max(1, math.ceil((T + 1) / max_points))
    pick = slice(None, None, stride)
    out = {
        "T": T,
        "fps": fps,
        "stride": stride,
        "kind": str(data.get("kind", "")),
        "gamma": float(data.get("gamma", math.nan)),
        "return_to_go": _round(data["returns_to_go"][pick]),
        "entropy": _round(data["entropy"][pick]),
        "rewards": _round(np.add.reduceat(rewards, np.arange(0, T, stride)) if T else rewards),
        "probs": [_round(col, 3) for col in np.asarray(data["probs"], np.float64)[pick].T],
        "actions": np.asarray(data["actions"])[pick].astype(int).tolist(),
        "action_names": [str(n) for n in data.get("action_names", [])],
    }
    if "value" in data:
        out["value"] = _round(data["value"][pick])
    return out


def _round(a, digits: int = 4) -> list:
    """Floats for JSON: rounded to ``digits`` significant-ish decimals; NaN/inf become None."""
    arr = np.asarray(a, np.float64)
    return [None if not math.isfinite(x) else float(f"{x:.{digits}g}") for x in arr.tolist()]
