"""Reading rl-zoo3 ``config.yml`` / ``args.yml`` files without running anything they name.

rl-zoo3 writes its hyperparameters with ``yaml.dump`` of an ``OrderedDict``, so the files hold Python tags
(``!!python/object/apply:collections.OrderedDict``); ``yaml.load`` with PyYAML's unsafe loaders would build
whatever object a tag names. :func:`read_zoo_yaml` uses a ``SafeLoader`` that turns that one tag into a plain
dict and every other tag into inert :class:`Tagged` data. Names inside (``env_wrapper``: ``package.module.Class``
or ``{package.module.Class: {kwargs}}`` entries) pass :mod:`rlviz.envs.trust`'s rule before anything acts on
them: :func:`zoo_env_wrappers`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...envs.trust import check_env_kwargs, check_wrapper_name
from ...errors import CheckpointError, require
from ..limits import load_yaml, read_text_capped

__all__ = ["Tagged", "read_zoo_yaml", "zoo_env_wrappers"]

_ORDERED_DICT = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"


@dataclass(frozen=True)
class Tagged:
    """A YAML node whose tag rlviz does not build: the tag and the node's plain data, never an object."""

    tag: str
    value: Any


def _pairs_to_dict(pairs) -> dict:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ValueError("an OrderedDict node that is not a list of [key, value] pairs")
    return {k: v for k, v in pairs}


@functools.lru_cache(maxsize=1)
def _loader():
    yaml = require("yaml", "sb3", "rl-zoo3 config files")

    class InertLoader(yaml.SafeLoader):
        """SafeLoader + rl-zoo3's OrderedDict tag as a dict; any other tag as inert :class:`Tagged` data."""

    def plain(loader, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    def ordered_dict(loader, node):
        args = plain(loader, node)
        if isinstance(args, dict):  # the long form: {args: [[pairs]], ...}
            args = args.get("args", [])
        if not isinstance(args, list) or len(args) > 1:
            raise yaml.constructor.ConstructorError(None, None, "unexpected OrderedDict arguments", node.start_mark)
        try:
            return _pairs_to_dict(args[0] if args else [])
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(None, None, str(exc), node.start_mark) from None

    InertLoader.add_constructor(_ORDERED_DICT, ordered_dict)
    InertLoader.add_constructor(None, lambda loader, node: Tagged(str(node.tag), plain(loader, node)))
    return yaml, InertLoader


def read_zoo_yaml(path: str | os.PathLike) -> Any:
    """The data of an rl-zoo3 YAML file: dicts, lists, scalars and :class:`Tagged`; nothing is imported or built.
    A file over :data:`~rlviz.sources.limits.MAX_META_BYTES`, or whose aliases expand beyond
    :data:`~rlviz.sources.limits.MAX_YAML_NODES` nodes, is refused before it is built."""
    p = Path(path)
    text = read_text_capped(p, p)
    yaml, loader = _loader()
    try:  # the composed graph is checked (node budget, depth) before anything is built: limits.load_yaml
        return load_yaml(yaml, loader, text, p)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:  # PyYAML's constructors raise the others
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{p}: not a valid rl-zoo3 YAML file ({first}).") from None


def zoo_env_wrappers(config: dict, source: str, trusted: bool = False,
                     known: Collection[str] = ()) -> list[tuple[str, dict]]:
    """``[(wrapper name, kwargs), ...]`` of a config's ``env_wrapper`` entry (a name, a ``{name: kwargs}``, or a
    list of those), each name and its kwargs accepted by :mod:`rlviz.envs.trust` (rlviz's wrapper names, the
    caller's ``known`` translations, or ``trusted``). Nothing is imported here."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{source}: expected a mapping of hyperparameters, got {type(config).__name__}.")
    entry = config.get("env_wrapper")
    if entry is None:
        return []
    out = []
    for item in entry if isinstance(entry, list) else [entry]:
        if isinstance(item, dict) and len(item) == 1:
            (name, kwargs), = item.items()
        elif isinstance(item, str):
            name, kwargs = item, {}
        else:
            raise CheckpointError(f"{source}: env_wrapper entry {item!r} is neither a class name nor "
                                  "{class name: kwargs}; the file is malformed.")
        name = check_wrapper_name(name, source, trusted, known)
        out.append((name, check_env_kwargs(kwargs or {}, source, trusted, owner=f"wrapper {name!r}")))
    return out
