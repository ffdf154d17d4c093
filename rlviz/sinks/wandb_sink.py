"""Weights & Biases sink: the MP4 as is, heatmaps as images, statistics as scalars and a table.

``wandb.Video`` built from frames encodes a 4-fps GIF in-process through moviepy; built from an
MP4 *file path* it is uploaded unchanged. rlviz always has the H.264 MP4 on disk, so this sink
logs the path: no re-encoding, no moviepy. Works in offline mode (``WANDB_MODE=offline``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UsageError, require
from .base import Sink, check_step, check_video_path, load_image, scalar_items

__all__ = ["WandbSink"]


class WandbSink(Sink):
    """Log to a W&B run.

    Args:
        project, name, config: passed to ``wandb.init`` when this sink starts the run.
        run: an existing run to log into; it is not finished by :meth:`close`. When neither ``run``
            nor ``project`` is given and a run is active (``wandb.run``), that run is used.
        step_key: None (default) passes the step as W&B's own ``step=``, which must not decrease
            across ``run.log`` calls. With e.g. ``step_key="global_step"`` the step is logged as that
            metric instead (CleanRL style), so mixing with your own ``run.log`` calls is safe.
        summary: also write scalars into ``run.summary``.
        init_kwargs: anything else for ``wandb.init`` (``dir=`` (created if missing), ``mode="offline"`` (writes
            locally; ``WANDB_MODE`` works too), tags, group, settings...).
    """

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        run=None,
        step_key: str | None = None,
        summary: bool = True,
        **init_kwargs,
    ):
        wandb = require("wandb", "wandb", "the Weights & Biases sink")
        self._wandb = wandb
        if run is None and project is None and wandb.run is not None:
            run = wandb.run
        self._owns_run = run is None
        if run is None:
            kwargs = {k: v for k, v in init_kwargs.items() if v is not None}  # (dir=None, mode=None: wandb's own)
            if "dir" in kwargs:
                os.makedirs(kwargs["dir"], exist_ok=True)
                kwargs["dir"] = str(kwargs["dir"])
            run = wandb.init(project=project, name=name, config=dict(config or {}), **kwargs)
        elif config:
            run.config.update(dict(config), allow_val_change=True)
        self.run = run
        self.step_key = step_key
        self.summary = bool(summary)
        if step_key is not None:
            run.define_metric(step_key)
        self._closed = False

    def _log(self, data: dict, step: int) -> None:
        if self._closed:
            raise UsageError("This WandbSink is closed; make a new one to log more.")
        step = check_step(step)
        if self.step_key is None:
            self.run.log(data, step=step)
        else:
            self.run.log({**data, self.step_key: step})

    def log_video(self, name: str, path, step: int, *, fps: float, caption: str | None = None) -> None:
        """Upload the MP4 file unchanged (``fps`` is the file's own; W&B ignores it for files)."""
        p = check_video_path(path)
        self._log({name: self._wandb.Video(str(p), caption=caption, format="mp4")}, step)

    def log_image(self, name: str, image, step: int) -> None:
        if isinstance(image, (str, os.PathLike)):
            load_image(image)  # checks the file is a readable image
            self._log({name: self._wandb.Image(str(image))}, step)
        else:
            self._log({name: self._wandb.Image(load_image(image))}, step)

    def log_scalars(self, scalars: Mapping[str, float], step: int, prefix: str = "") -> None:
        items = scalar_items(scalars, prefix)
        self._log(dict(items), step)
        if self.summary:
            self.run.summary.update(items)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int) -> None:
        rows = [list(r) for r in rows]
        for r in rows:
            if len(r) != len(columns):
                raise UsageError(f"Table {name!r}: a row has {len(r)} values but there are {len(columns)} columns.")
        self._log({name: self._wandb.Table(columns=list(columns), data=rows)}, step)

    def log_text(self, name: str, text: str, step: int) -> None:
        """Into the run summary (shown on the run's overview page), where a text belongs in W&B."""
        if self._closed:
            raise UsageError("This WandbSink is closed; make a new one to log more.")
        check_step(step)
        self.run.summary[name] = str(text)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_run:
            self.run.finish()
