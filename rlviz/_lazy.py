"""Packages whose public names are imported on first use (PEP 562): one implementation for every ``__init__``.

``__getattr__, __dir__ = lazy_exports(__name__, EXPORTS, globals())`` in a package's ``__init__``, where ``EXPORTS``
maps each public name to the submodule (relative to the package) that defines it: ``import rlviz`` and the CLI's
argument checks stay fast, and a stage's package loads only what the name asked for needs. A name, once imported,
is kept in the package's namespace (later lookups do not reach ``__getattr__``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any],
                 otherwise: Callable[[str], Any] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) of ``package``. ``otherwise(name)``: what a name not in ``exports`` gives
    (e.g. a moved name, with a warning); default AttributeError."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if otherwise is not None:
                return otherwise(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
