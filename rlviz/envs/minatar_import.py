"""Importing MinAtar without losing a Ctrl-C, and without seaborn and matplotlib on the start-up path.

``minatar.gym`` and ``minatar.environment`` import seaborn and matplotlib inside a bare ``try: ... except:``, so a
Ctrl-C during that import (seaborn alone takes ~1.5 s, matplotlib ~0.5 s) is swallowed as "Cannot import seaborn"
and the job goes on. :func:`import_minatar_gym` imports MinAtar with those two refused at once (MinAtar's own
``except`` takes the ImportError, its warning muted), then gives MinAtar's modules lazy stand-ins for the names it
would have bound (``plt``, ``colors``, ``sns``): each imports the real module the first time MinAtar draws a frame.
The whole import runs with SIGINT held (:func:`rlviz.interrupts.deferred_sigint`): now a tenth of a second, after
which a Ctrl-C that came meanwhile is raised. Nothing else in the process sees a stand-in (``sys.modules`` keeps
only real modules).
"""

from __future__ import annotations

import importlib
import importlib.abc
import logging
import sys
import types
import warnings
from typing import Any

from ..interrupts import deferred_sigint

__all__ = ["import_minatar_gym"]

#: the names MinAtar's modules bind from their drawing-only imports, and the real modules behind them
_DRAWING = {"minatar.environment": {"plt": "matplotlib.pyplot", "colors": "matplotlib.colors", "sns": "seaborn"},
            "minatar.gym": {"sns": "seaborn"}}


class _Lazy(types.ModuleType):
    """Stands in for module ``name`` in one module's globals; imports it on first attribute access."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses seaborn and matplotlib (not imported yet) while MinAtar imports."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in ("seaborn", "matplotlib"):
            raise ImportError(f"{name}: imported by rlviz only when MinAtar draws")
        return None


def import_minatar_gym() -> types.ModuleType:
    """``minatar.gym``, imported as the module docstring says (ImportError when MinAtar is not installed)."""
    if "minatar.gym" in sys.modules:
        return sys.modules["minatar.gym"]
    refuse = _Refuse()
    with deferred_sigint(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.meta_path.insert(0, refuse)
        logging.disable(logging.WARNING)  # MinAtar's "Cannot import seaborn" (it is imported later, when drawing)
        try:
            import minatar.gym
        finally:
            logging.disable(logging.NOTSET)
            sys.meta_path.remove(refuse)
        for module, names in _DRAWING.items():
            loaded = sys.modules.get(module)
            for name, real in names.items():
                if loaded is not None and not hasattr(loaded, name):
                    setattr(loaded, name, _Lazy(real))
    return minatar.gym
