"""``rlviz timeline RUN``: the agent across its training run, on the same seeds at every checkpoint.

:mod:`rlviz.sources.run_folders` (find and order a run's checkpoints: :class:`TimelineCheckpoint`) -> evaluate.py (each checkpoint's
rollout of the run's N seeds, render's code) -> findings.py (paired differences, ``first_seen``, ``regressions``,
``policy_change``) -> job.py / outputs.py (timeline.json / timeline.csv, then the views: plot.py, progression.py, views.py);
follow.py (``--follow``: evaluate each new checkpoint once while training writes them; publish.py: its outputs
published as one consistent set after each); live.py (the same folder written during training).

The job is a plain function, :func:`rlviz.training.job.timeline`, exported as ``rlviz.timeline``. (Until 0.3 this
package was ``rlviz.timeline`` itself, callable as the job; those module paths work for one more release, with a
``DeprecationWarning``: :mod:`rlviz._deprecated`.)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"timeline": ".job", "TimelineOutputs": ".outputs", "TimelineCheckpoint": "..sources.run_folders",
            "discover": "..sources.run_folders"}

__all__ = [*_EXPORTS]  # the public surface: _EXPORTS, listed once


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
