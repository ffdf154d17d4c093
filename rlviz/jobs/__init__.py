"""The jobs the CLI runs, each one library call: :func:`render`, :func:`compare`. They tie the stages together;
no stage imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .render import RenderOutputs, render

__all__ = ["CompareOutputs", "RenderOutputs", "compare", "render"]


def __getattr__(name: str) -> Any:
    if name in ("CompareOutputs", "compare"):  # on first use: a render need not import compare's stages (disagree)
        import importlib

        value = getattr(importlib.import_module(".compare", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlviz.jobs' has no attribute {name!r}")


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .compare import CompareOutputs, compare
