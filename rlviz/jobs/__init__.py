"""The jobs the CLI runs, each one library call: :func:`render`, :func:`compare`. They tie the stages together;
no stage imports them.

Both are imported here, eagerly: ``rlviz.jobs.compare`` names the function, never the submodule of the same name
(a lazily loaded name would be shadowed by the submodule once anything imported ``rlviz.jobs.compare``, and
``from rlviz import compare`` would then hand back a module)."""

from __future__ import annotations

from .compare import CompareOutputs, compare
from .render import RenderOutputs, render

__all__ = ["CompareOutputs", "RenderOutputs", "compare", "render"]
