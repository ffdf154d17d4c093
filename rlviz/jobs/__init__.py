"""The jobs the CLI runs, each one library call: :func:`render`, :func:`compare`. They tie the stages together;
no stage imports them.

Each job's module is imported when its names are first used, so a render never loads the compare and disagreement
machinery (``tests/test_hardening4.py`` counts the modules a render imports). ``rlviz.jobs.compare`` and
``rlviz.jobs.render`` name the functions, never the submodules of the same names: the import system's binding of a
submodule onto this package (``rlviz.jobs.compare = <module>``, once anything imported it) is not kept for those
names (:class:`_Jobs`), so ``from rlviz.jobs import compare`` and ``from rlviz import compare`` hand back the
function whatever was imported before."""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import CompareOutputs, compare
    from .render import RenderOutputs, render

__all__ = ["CompareOutputs", "RenderOutputs", "compare", "render"]

#: each public name, and the submodule that defines it
_WHERE = {"CompareOutputs": "compare", "compare": "compare", "RenderOutputs": "render", "render": "render"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    object.__setattr__(sys.modules[__name__], name, value)  # (past _Jobs.__setattr__: the function, not the module)
    return value


class _Jobs(types.ModuleType):
    """This package: a submodule bound onto it under a public name (by the import system) is not kept, so the
    name stays the function's."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Jobs
