"""Checking what a reader parsed from a file (JSON, YAML, a pickle's plain data) against what it should be: types
and ranges, not only keys, so a malformed file ends in one :class:`~rlviz.errors.CheckpointError` naming the file
and the field, never in an ``AttributeError`` deep inside rlviz.

A field is described by :class:`Field` (accepted types, a range, a predicate for the elements of a list or the
keys of a mapping); :func:`check` checks one value, :func:`check_fields` a mapping's fields. :func:`check_recipe`
is the schema of an env recipe as files carry it (rlviz checkpoints' ``extra/rlviz.json``, rl-zoo3 runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError

__all__ = ["Field", "check", "check_fields", "check_recipe", "check_sizes", "NUMBER", "JSON_KEYS", "MAX_SIZE"]

#: The largest layer width, count or size a file may ask rlviz to build (a network is built before its weights load:
#: a size of 2**40 would allocate terabytes).
MAX_SIZE = 1 << 16

#: Numbers as JSON and YAML give them (bool is not a number here).
NUMBER = (int, float)


def _type_names(types: tuple) -> str:
    names = {type(None): "null", bool: "true/false", int: "a whole number", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", tuple: "a list"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


@dataclass(frozen=True)
class Field:
    """types: accepted Python types (``bool`` is accepted only when listed); low/high: inclusive bounds for
    numbers, list lengths or string lengths; items: a predicate every list element (or mapping key) passes;
    items_what: what ``items`` expects, for the message."""

    types: tuple
    low: float | None = None
    high: float | None = None
    items: Callable[[Any], bool] | None = None
    items_what: str = ""


def check(value: Any, spec: Field, source: str, what: str) -> Any:
    """``value`` if it matches ``spec``; else :class:`CheckpointError` (one line: the file, the field, what was
    there and what was expected)."""
    ok = isinstance(value, spec.types) and not (isinstance(value, bool) and bool not in spec.types)
    if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
        ok = math.isfinite(value) and (spec.low is None or value >= spec.low) and (spec.high is None or value <= spec.high)
    elif ok and isinstance(value, (list, tuple, dict, str)):
        ok = (spec.low is None or len(value) >= spec.low) and (spec.high is None or len(value) <= spec.high)
        if ok and spec.items is not None and not isinstance(value, str):
            ok = all(spec.items(v) for v in value)
    if ok:
        return value
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    bounds = ""
    if spec.low is not None or spec.high is not None:
        bounds = f" in [{spec.low if spec.low is not None else '-inf'}, {spec.high if spec.high is not None else 'inf'}]"
    items = f" of {spec.items_what}" if spec.items_what else ""
    raise CheckpointError(f"{source}: {what} is {shown} ({type(value).__name__}); expected {_type_names(spec.types)}"
                          f"{items}{bounds}. The file is malformed: re-save it, or pass a file written by its tool.")


def check_fields(doc: Any, fields: dict[str, Field], source: str, what: str, required: tuple = ()) -> dict:
    """``doc`` if it is a mapping whose ``fields`` (those present; ``required`` ones must be) match."""
    check(doc, Field((dict,)), source, what)
    for key in required:
        if key not in doc:
            raise CheckpointError(f"{source}: {what} has no {key!r}; expected the fields {sorted(fields)}. "
                                  "The file is malformed: re-save it.")
    for key, spec in fields.items():
        if key in doc:
            check(doc[key], spec, source, f"{what}[{key!r}]")
    return doc


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


#: Keys of a JSON/YAML mapping handed to code as keyword arguments: strings.
JSON_KEYS = Field((dict,), items=_is_str, items_what="string keys")

_WRAPPER = {"name": Field((str,), 1, 200), "kwargs": JSON_KEYS, "training_only": Field((bool,))}
_RECIPE = {"env_id": Field((str,), 1, 200), "env_kwargs": JSON_KEYS, "wrappers": Field((list, tuple), 0, 64),
           "saliency_mode": Field((str, type(None)))}


def check_recipe(raw: Any, source: str, what: str = "the env recipe") -> dict:
    """An env recipe's dict (:meth:`rlviz.envs.recipe.EnvRecipe.to_dict`'s form) with the types it must have."""
    check_fields(raw, _RECIPE, source, what, required=("env_id",))
    for i, w in enumerate(raw.get("wrappers") or ()):
        check_fields(w, _WRAPPER, source, f"{what} wrapper {i}", required=("name",))
    return raw


def check_sizes(value: Any, source: str, what: str, high: int = MAX_SIZE, depth: int = 0) -> Any:
    """``value`` (a literal: numbers, strings, lists, dicts) if every whole number in it is in [0, ``high``]:
    the sizes a file asks rlviz to build a network with."""
    if depth > 16:
        raise CheckpointError(f"{source}: {what} is nested more than 16 levels deep; the file is malformed.")
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else None
    if items is not None:
        for v in items:
            check_sizes(v, source, what, high, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool):
        check(value, Field((int,), 0, high), source, f"a size in {what}")
    return value
