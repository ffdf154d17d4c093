"""The jobs the CLI runs, each one library call: :func:`render` (and more to come). They tie the stages together;
no stage imports them."""

from __future__ import annotations

from .render import RenderOutputs, render

__all__ = ["RenderOutputs", "render"]
