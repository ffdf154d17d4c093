"""What the explorer knows of a run folder, read once at start: the marker (which job, which options), the
episodes (episodes.csv), the summary and the failure heatmap with each episode's contribution.

Every file is read through :func:`read_inside`, which refuses a path that leaves the folder (``..``, an absolute
path, or a link pointing out of it)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

from ..choices import RUN_MARKER as MARKER
from ..errors import UsageError

__all__ = ["RunIndex", "inside", "read_inside"]


def inside(root: Path, rel: str | os.PathLike[str]) -> Path | None:
    """``root / rel`` when it (links resolved) lies inside ``root`` (itself resolved); None otherwise."""
    if os.path.isabs(rel) or "\0" in str(rel):
        return None
    path = Path(os.path.realpath(root / rel))
    return path if path == root or root in path.parents else None


def read_inside(root: Path, rel: str) -> bytes:
    """The bytes of ``rel`` under ``root``; UsageError when it is missing or leaves the folder."""
    path = inside(root, rel)
    if path is None or not path.is_file():
        raise UsageError(f"{root / rel} is missing or leads out of the run folder {root}; expected the run's own file.")
    return path.read_bytes()


def _cell(v: str) -> Any:
    if v in ("True", "False"):
        return v == "True"
    if v == "":
        return None
    try:
        x = float(v)
    except ValueError:
        return v
    if not math.isfinite(x):
        return None
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


class RunIndex:
    """One run folder (``rlviz render``'s, ``rlviz compare``'s or ``rlviz timeline``'s).

    root: the folder, resolved; job / options: the marker's; columns, rows: episodes.csv (numbers parsed);
    heatmap: the FailureHeatmap or None."""

    def __init__(self, folder: str | os.PathLike[str]):
        folder = Path(folder)
        if not (folder / MARKER).is_file() or not folder.is_dir():
            raise UsageError(f"{folder} is not an rlviz run (no {MARKER}); pass a folder written by `rlviz render "
                             "--out` (or compare / timeline).")
        self.root = Path(os.path.realpath(folder))
        try:
            marker = json.loads(read_inside(self.root, MARKER))
        except ValueError as exc:
            raise UsageError(f"{folder / MARKER} is not JSON ({exc}); the run folder is damaged: render it again.") from None
        if not isinstance(marker, dict):
            raise UsageError(f"{folder / MARKER} holds no object; the run folder is damaged: render it again.")
        self.job = str(marker.get("job", ""))
        options = marker.get("options")
        self.options: dict[str, Any] = options if isinstance(options, dict) else {}
        self.summary = self._json("summary.json")
        self.columns: list[str] = []
        self.rows: list[list[Any]] = []
        if (self.root / "episodes.csv").exists():
            text = read_inside(self.root, "episodes.csv").decode("utf-8", "replace")
            try:
                table = list(csv.reader(io.StringIO(text, newline="")))
            except csv.Error as exc:
                raise UsageError(f"{folder / 'episodes.csv'} is not a CSV table ({exc}); the run folder is damaged: "
                                 "render it again.") from None
            if table:
                self.columns, self.rows = table[0], [[_cell(v) for v in r] for r in table[1:]]
        self.steps: tuple[int, ...] = ()  # a timeline run's checkpoints (their training steps)
        if self.job == "timeline":
            self._timeline()
        self.has_heatmap = (self.root / "heatmap.npz").exists() and inside(self.root, "heatmap.npz") is not None
        self._heatmap: Any = None
        self._heatmap_lock = threading.Lock()
        self._by_episode = {r[self.columns.index("episode")]: r for r in self.rows} if "episode" in self.columns else {}

    def _timeline(self) -> None:
        """A timeline run: its checkpoints' steps, and one row per episode (the seeds every checkpoint played)."""
        data = self._json("timeline.json")
        rows = data.get("checkpoints")
        steps = [r.get("step") for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        self.steps = tuple(s for s in steps if type(s) is int and 0 <= s < 10**15)
        episodes = data.get("episodes")
        if not self.columns and type(episodes) is int and 0 < episodes <= 10**6:
            self.columns, self.rows = ["episode"], [[e] for e in range(episodes)]
        if not self.summary:
            self.summary = {k: data[k] for k in ("env_id", "episodes", "seed") if k in data}

    def _json(self, rel: str) -> dict[str, Any]:
        if not (self.root / rel).exists():
            return {}
        try:
            data = json.loads(read_inside(self.root, rel))
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def heatmap(self) -> Any:
        """The run's FailureHeatmap (read on first use: the evaluation package loads torch), or None."""
        if not self.has_heatmap:
            return None
        with self._heatmap_lock:
            if self._heatmap is None:
                from ..evaluate.failures.heatmap import FailureHeatmap

                self._heatmap = FailureHeatmap.load(self.root / "heatmap.npz")
            return self._heatmap

    @property
    def replayable(self) -> bool:
        """Whether episodes can be opened: a render or compare run with one row per episode, or a timeline run."""
        if self.job == "timeline":
            return bool(self.steps) and "episode" in self.columns
        return self.job in ("render", "compare") and "episode" in self.columns and "seed" in self.columns

    def episode(self, n: int) -> dict[str, Any] | None:
        """Episode ``n``'s row as a dict, or None when the run has no such episode."""
        row = self._by_episode.get(n)
        return None if row is None else dict(zip(self.columns, row))

    def cell(self, x: int, y: int, layer: str | None = None) -> list[dict[str, Any]]:
        """The rows of the episodes whose failures put ``layer``'s object (None: any object) on pixel (x, y),
        by episode; UsageError for a pixel or layer the heatmap does not have."""
        if self.heatmap is None:
            raise UsageError("This run has no failure heatmap; render it with --heatmap.")
        if layer is not None and layer not in self.heatmap.object_names:
            raise UsageError(f"layer {layer!r} is not one of {', '.join(self.heatmap.object_names)}.")
        found = self.heatmap.episodes_at(y, x, layer)
        return [r for r in (self.episode(e) for e in found) if r is not None]

    def page_data(self) -> dict[str, Any]:
        """What the page is built from (JSON-able)."""
        data: dict[str, Any] = {"job": self.job, "title": str(self.summary.get("env_id") or self.root.name),
                                "summary": self.summary, "columns": self.columns, "rows": self.rows,
                                "replayable": self.replayable, "saliency": self.options.get("saliency")}
        data["heatmap"] = self.has_heatmap  # (its data: heatmap_view, asked for after the first page)
        return data

    def heatmap_view(self) -> dict[str, Any]:
        """The heatmap as the page draws it (counts per object, their total, the background), read from the .npz
        directly: the page does not wait for the evaluation package (the cells load FailureHeatmap)."""
        import numpy as np  # (not before the first page)

        try:
            with np.load(self.root / "heatmap.npz", allow_pickle=False) as z:
                counts = np.asarray(z["counts"], np.int64)
                names = [str(n) for n in z["object_names"]]
                bg = np.asarray(z["background"], np.uint8) if "background" in z.files else None
                view: dict[str, Any] = {"failures": int(z["failures"]), "episodes": int(z["episodes"]),
                        "per_episode": "contrib_episode" in z.files}
            if counts.ndim != 3 or len(names) != counts.shape[0] or (bg is not None and bg.shape[:2] != counts.shape[1:]):
                raise ValueError("its arrays do not fit together")
        except Exception as exc:  # noqa: BLE001 - numpy raises many types on a damaged file; each means "not a heatmap"
            said = " ".join(str(exc).split())[:200]
            raise UsageError(f"{self.root / 'heatmap.npz'} is not an rlviz failure heatmap ({said}); render the run "
                             "again with --heatmap.") from None
        view.update(shape=list(counts.shape[1:]), layers={n: c.tolist() for n, c in zip(names, counts)},
                    total=counts.sum(axis=0).tolist(), background=None if bg is None else bg.reshape(-1).tolist())
        return view
