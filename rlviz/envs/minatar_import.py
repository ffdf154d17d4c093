"""Importing MinAtar without losing a Ctrl-C, and without seaborn and matplotlib on the start-up path.

``minatar.gym`` and ``minatar.environment`` import seaborn and matplotlib inside a bare ``try: ... except:``, so a
Ctrl-C during that import (seaborn alone takes ~1.5 s, matplotlib ~0.5 s) is swallowed as "Cannot import seaborn"
and the job goes on. :func:`import_minatar_gym` imports MinAtar with those two refused at once (MinAtar's own
``except`` takes the ImportError, its warning muted), then gives MinAtar's modules lazy stand-ins for the names it
would have bound (``plt``, ``colors``, ``sns``): each imports the real module the first time MinAtar draws a frame.
The whole import runs with SIGINT held (:func:`rlviz.interrupts.deferred_sigint`): now a tenth of a second, after
which a Ctrl-C that came meanwhile is raised. Nothing else in the process sees a stand-in (``sys.modules`` keeps
only real modules). ``minatar.gym``'s ``sns`` draws MinAtar's frames in its cubehelix palette without seaborn at all
(:func:`cubehelix_colors`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import logging
import sys
import types
import warnings
from typing import Any

import numpy as np

from ..interrupts import deferred_sigint

__all__ = ["import_minatar_gym", "cubehelix_colors"]

#: the names MinAtar's modules bind from their drawing-only imports, and the real modules behind them
_DRAWING = {"minatar.environment": {"plt": "matplotlib.pyplot", "colors": "matplotlib.colors", "sns": "seaborn"},
            "minatar.gym": {"sns": "seaborn"}}


class _Lazy(types.ModuleType):
    """Stands in for module ``name`` in one module's globals; imports it on first attribute access."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


#: Green's (2011) "cubehelix" colour scheme as matplotlib's colormap tabulates it (start 0.5, rotations -1.5, hue 1,
#: gamma 1; a table of 256 entries): each channel's weights of the two directions off the grey diagonal
_HELIX = ((-0.14861, 1.78277), (-0.29227, -0.90649), (1.97294, 0.0))
_TABLE = 256


def cubehelix_colors(n: int) -> list[tuple[float, ...]]:
    """``seaborn.color_palette("cubehelix", n)`` (the palette MinAtar draws its channels in) without seaborn: n
    evenly spaced samples of the scheme's table, its two ends left out (tests/test_minatar_import.py checks the
    two are equal)."""
    x = np.linspace(0, 1, _TABLE)
    a = x * (1 - x) / 2
    phi = 2 * np.pi * (0.5 / 3 + -1.5 * x)
    table = np.stack([np.clip(x + a * (p0 * np.cos(phi) + p1 * np.sin(phi)), 0, 1) for p0, p1 in _HELIX], axis=1)
    at = np.linspace(0, 1, int(n) + 2)[1:-1] * _TABLE
    at[at == _TABLE] = _TABLE - 1
    return [tuple(float(v) for v in row) for row in table[at.astype(int)]]


class _Palettes(types.ModuleType):
    """Stands in for seaborn in ``minatar.gym``, whose ``rgb_array`` frames ask it for the cubehelix palette on every
    render: that palette without importing seaborn (~1.5 s); anything else from the real seaborn."""

    def color_palette(self, palette: Any = None, n_colors: Any = None, *args: Any, **kwargs: Any) -> Any:
        if palette == "cubehelix" and isinstance(n_colors, int) and n_colors > 0 and not args and not kwargs:
            return cubehelix_colors(n_colors)
        return importlib.import_module("seaborn").color_palette(palette, n_colors, *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module("seaborn"), attr)


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
                    setattr(loaded, name, (_Palettes if module == "minatar.gym" else _Lazy)(real))
    return minatar.gym
