"""The jobs the CLI runs, each one library call: :func:`render`, :func:`compare`. They tie the stages together;
no stage imports them. Each loads on first use (``rlviz render`` imports neither compare nor its drawing code)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import CompareOutputs, compare
    from .render import RenderOutputs, render

__all__ = ["CompareOutputs", "RenderOutputs", "compare", "render"]

_WHERE = {"CompareOutputs": "compare", "compare": "compare", "RenderOutputs": "render", "render": "render"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
