"""Importing MinAtar without losing a Ctrl-C, and without seaborn on the start-up path.

``minatar.gym`` and ``minatar.environment`` import seaborn (and matplotlib) inside a bare ``try: ... except:``, so a
Ctrl-C during that import (seaborn alone takes ~1.5 s) is swallowed as "Cannot import seaborn" and the job goes on.
:func:`import_minatar_gym` imports MinAtar with SIGINT held (:func:`rlviz.interrupts.deferred_sigint`: a Ctrl-C is
raised as soon as the import is done), and with seaborn standing in as a lazy module that imports the real one on
first use: MinAtar calls ``seaborn.color_palette`` only when it renders a frame, so a job that records no video (or
has not reached its first frame yet) does not wait for seaborn.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
import warnings
from typing import Any

from ..interrupts import deferred_sigint

__all__ = ["import_minatar_gym"]


class _LazyModule(types.ModuleType):
    """A module imported on its first attribute access (then replaced by the real one in ``sys.modules``)."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        real = importlib.import_module(self.__name__)
        return getattr(real, name)


def import_minatar_gym() -> types.ModuleType:
    """``minatar.gym``, imported as the module docstring says (ImportError when MinAtar is not installed)."""
    with deferred_sigint(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "seaborn" not in sys.modules and importlib.util.find_spec("seaborn") is not None:
            sys.modules["seaborn"] = _LazyModule("seaborn")
        import minatar.gym

    return minatar.gym
