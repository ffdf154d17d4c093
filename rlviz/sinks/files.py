"""Folder sink: videos, images, scalars and tables as plain files in one output folder.

Layout (``name`` may contain ``/``, which makes sub-folders)::

    <folder>/<name>-step<step>.mp4   the episode video (copied, or moved with move=True),
                                     with its ``.npz`` per-step data when the recorder wrote one
    <folder>/<name>-step<step>.png   images (heatmaps)
    <folder>/<name>-step<step>.csv   tables
    <folder>/scalars.jsonl           one JSON object per log_scalars call: {"step": s, "<name>": value, ...}
    <folder>/summary.json            the latest value of every scalar
    <folder>/media.jsonl             one JSON object per file written: kind, name, step, path, fps, caption
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..media.atomic import atomic_path
from .base import Sink, check_step, check_video_path, load_image, scalar_items

__all__ = ["FolderSink"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def _json_number(v: float):
    return v if math.isfinite(v) else str(v)  # JSON has no NaN/inf: "nan", "inf", "-inf"


def _write_json_atomic(path: Path, data) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


class FolderSink(Sink):
    """Write everything into ``folder`` (created when missing).

    Args:
        folder: the output folder.
        move: move the MP4 (and its ``.npz``) instead of copying it (for videos recorded to a
            temporary folder).
    """

    def __init__(self, folder: str | os.PathLike, *, move: bool = False):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise UsageError(f"FolderSink folder {self.folder} exists and is not a folder; pass a folder path.")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.move = bool(move)
        summary = self.folder / "summary.json"
        try:
            self._summary: dict = json.loads(summary.read_text()) if summary.is_file() else {}
        except (OSError, ValueError):
            self._summary = {}

    def target(self, name: str, step: int, suffix: str) -> Path:
        """Where ``name`` at ``step`` goes: ``<folder>/<name>-step<step><suffix>`` (sanitised)."""
        parts = [_UNSAFE.sub("_", p) for p in str(name).replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts or any(p == ".." for p in parts):
            raise UsageError(f"Cannot use {name!r} as a file name; use letters, digits and '/' (e.g. 'eval/episode').")
        path = self.folder.joinpath(*parts[:-1], f"{parts[-1]}-step{check_step(step)}{suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _index(self, record: dict) -> None:
        with open(self.folder / "media.jsonl", "a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")

    def _transfer(self, src: Path, dst: Path) -> None:
        if src.resolve() == dst.resolve():
            return
        with atomic_path(dst) as tmp:
            if self.move:
                shutil.move(str(src), str(tmp))
            else:
                shutil.copyfile(src, tmp)

    def log_video(self, name: str, path, step: int, *, fps: float, caption: str | None = None) -> Path:
        """Copy (or move) the MP4 into the folder; returns where it went."""
        src = check_video_path(path)
        dst = self.target(name, step, ".mp4")
        self._transfer(src, dst)
        data = src.with_suffix(".npz")
        if data.is_file():
            self._transfer(data, dst.with_suffix(".npz"))
        self._index({"kind": "video", "name": name, "step": int(step), "path": dst.relative_to(self.folder).as_posix(),
                     "fps": float(fps), "caption": caption})
        return dst

    def log_image(self, name: str, image, step: int) -> Path:
        """Write a PNG (a PNG path is copied as is); returns its path."""
        dst = self.target(name, step, ".png")
        if isinstance(image, (str, os.PathLike)) and Path(image).suffix.lower() == ".png":
            load_image(image)  # checks it is a readable image
            src = Path(image)
            if src.resolve() != dst.resolve():
                shutil.copyfile(src, dst)
        else:
            import cv2

            rgb = load_image(image)
            if not cv2.imwrite(str(dst), np.ascontiguousarray(rgb[..., ::-1])):
                raise UsageError(f"Could not write {dst}; check that the folder is writable.")
        self._index({"kind": "image", "name": name, "step": int(step), "path": dst.relative_to(self.folder).as_posix()})
        return dst

    def log_scalars(self, scalars: Mapping[str, float], step: int, prefix: str = "") -> None:
        items = {k: _json_number(v) for k, v in scalar_items(scalars, prefix).items()}
        step = check_step(step)
        with open(self.folder / "scalars.jsonl", "a") as fh:
            fh.write(json.dumps({"step": step, **items}, sort_keys=True) + "\n")
        self._summary.update(items)
        _write_json_atomic(self.folder / "summary.json", self._summary)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int) -> Path:
        """Write a CSV with a header row; returns its path."""
        dst = self.target(name, step, ".csv")
        with open(dst, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(list(columns))
            for row in rows:
                row = list(row)
                if len(row) != len(columns):
                    raise UsageError(f"Table {name!r}: a row has {len(row)} values but there are {len(columns)} columns.")
                writer.writerow(row)
        self._index({"kind": "table", "name": name, "step": int(step), "path": dst.relative_to(self.folder).as_posix()})
        return dst
