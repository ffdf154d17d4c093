"""``rlviz timeline RUN``: the agent across its training, on the same seeds at every checkpoint.

:mod:`rlviz.sources.run_folders` (find and order a run's checkpoints: :class:`TimelineCheckpoint`) -> evaluate.py (each checkpoint's
rollout of the run's N seeds, render's code) -> findings.py (paired differences, ``first_seen``, ``regressions``,
``policy_change``) -> job.py / outputs.py (timeline.json / timeline.csv, then the views: plot.py, progression.py, views.py);
follow.py (``--follow``: evaluate each new checkpoint once while training writes them; publish.py: its outputs
published as one consistent set after each).

``rlviz.timeline`` is this package and the job alike: ``rlviz.timeline(TimelineConfig(...))`` (or keyword
arguments) runs :func:`rlviz.timeline.job.timeline`, whichever was imported first.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["timeline", "TimelineCheckpoint", "TimelineOutputs", "discover"]

_EXPORTS = {"timeline": ".job", "TimelineOutputs": ".outputs", "TimelineCheckpoint": "..sources.run_folders",
            "discover": "..sources.run_folders"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


class _CallablePackage(types.ModuleType):
    """The package, callable as the job (``rlviz.timeline(config)``): importing a submodule binds the package to
    ``rlviz.timeline``, so the job and the package share the name."""

    def __call__(self, config: Any = None, **kwargs: Any) -> Any:
        from .job import timeline

        return timeline(config, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
