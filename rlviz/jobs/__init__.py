"""The jobs the CLI runs, each one library call: :func:`render`, :func:`compare`. They tie the stages together;
no stage imports them."""

from __future__ import annotations

from .compare import CompareOutputs, compare
from .render import RenderOutputs, render

__all__ = ["CompareOutputs", "RenderOutputs", "compare", "render"]
