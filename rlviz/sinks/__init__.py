"""Where logged episodes go: a folder, Weights & Biases, TensorBoard.

``FolderSink`` needs nothing extra; ``WandbSink`` needs ``rlviz[wandb]`` and ``TensorBoardSink``
``rlviz[tensorboard]`` (imported only when used).
"""

from __future__ import annotations

from .base import Sink, VideoFrames, as_sinks, read_video_frames
from .files import FolderSink
from .log import Logged, RunLog, log_run

__all__ = ["Sink", "FolderSink", "WandbSink", "TensorBoardSink", "as_sinks", "read_video_frames", "VideoFrames",
           "log_timeline_checkpoint", "log_timeline_end", "Logged", "RunLog", "log_run"]

#: loaded when first used (the timeline's logging: by ``rlviz timeline`` only, not by a render)
_LAZY = {"WandbSink": ".wandb_sink", "TensorBoardSink": ".tensorboard_sink", "log_timeline_checkpoint": ".timeline",
         "log_timeline_end": ".timeline"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
