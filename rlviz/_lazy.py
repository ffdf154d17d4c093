"""Packages whose public names load on first use (PEP 562): the one ``__getattr__`` / ``__dir__`` pair they share."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, exports: dict[str, str],
               missing: Callable[[str, str], Any] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name of ``exports`` (name -> the submodule defining it) is
    imported from its submodule when first read and kept in the package; any other name goes to ``missing(package,
    name)`` (e.g. a moved name's warning), else is an AttributeError."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            if missing is not None:
                return missing(package, name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where}", package), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(exports))

    return __getattr__, __dir__
