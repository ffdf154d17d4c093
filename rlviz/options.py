"""How an option is declared once: a config dataclass field carrying its CLI spelling and help (:func:`option`,
:class:`CliOption`, :func:`cli_options`), and the value checks the configs share. The configs themselves are in
:mod:`rlviz.config`; the CLI (:mod:`rlviz.cli`) is generated from their fields.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .choices import SALIENCY_METHODS, VIDEO_KINDS
from .errors import UsageError

__all__ = ["CliOption", "option", "cli_options", "parse_video_spec", "whole", "choice", "attention_value", "camera_list",
           "import_user_module", "import_user_attr"]


def import_user_module(name: str) -> Any:
    """The module ``name`` that the user typed on the command line or in their own code (``--wrapper
    my_wrappers:X``, ``--model mynet:Net``, ``--objects mygame:extract``): their consent, so it is also looked for in
    the working folder, as ``python script.py`` would find it. Never for a name read from a file: the ``rlviz``
    command and ``python -m rlviz`` keep the working folder off the import path otherwise (a file in the folder of a
    run must not shadow a module a run's names import)."""
    import importlib
    import os
    import sys

    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.append(cwd)  # last: an installed package of the same name wins
    try:
        return importlib.import_module(name)
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def import_user_attr(where: str, name: str, what: str = "model=") -> Any:
    """The attribute ``name`` (dotted) of the module ``where`` (``pkg.module``, found as
    :func:`import_user_module` finds it, or ``path/to/file.py``, loaded once under a name of its own), both typed by
    the user (``--model``, ``--critic``): one-line :class:`UsageError`s naming ``what`` when it cannot be had. The one
    importer of a user's ``module:Class`` for the torch and the JAX loaders."""
    import importlib.util
    import re
    import sys
    from pathlib import Path

    try:
        if where.endswith(".py") or "/" in where or "\\" in where:
            file = Path(where).expanduser().resolve()
            if not file.is_file():
                raise UsageError(f"model file {where!r} does not exist ({what}).")
            mod_name = f"rlviz_user_{re.sub(r'[^0-9a-zA-Z_]', '_', file.stem)}_{abs(hash(str(file))) % 10**8}"
            module = sys.modules.get(mod_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(mod_name, file)
                module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # a .py file has a spec
                sys.modules[mod_name] = module
                spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            module = import_user_module(where)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"Cannot import {where!r} for {what} ({type(exc).__name__}: {exc}).") from exc
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{where!r} has no attribute {name!r} ({what}).")
        obj = getattr(obj, part)
    return obj

@dataclass(frozen=True)
class CliOption:
    """How a config field appears on the command line (read by :mod:`rlviz.cli`).

    flag: ``--name`` (default: the field name with dashes); ``None`` for the positional argument.
    kind: "value" (takes a value), "switch" (``store_true``), "negated" (``--no-x`` sets False), "append" (repeatable:
    a tuple of the values given) or "optional" (the value may be left out: the flag alone gives ``const``, e.g.
    ``--ray`` alone a local Ray instance).
    choices: allowed values (shown in --help, "did you mean" on a typo); metavar: the value's name in --help.
    """

    name: str
    flag: str | None
    help: str
    kind: str = "value"
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None
    positional: bool = False
    default: Any = None
    cli_default: Any = None
    const: Any = None
    nargs: str | None = None


def option(default: Any = MISSING, help: str = "", *, flag: str | None = None, kind: str | None = None,
           choices: tuple[Any, ...] | None = None, metavar: str | None = None, positional: bool = False,
           cli_default: Any = None, const: Any = None, nargs: str | None = None) -> Any:
    """A config field carrying its CLI spelling and help in ``metadata["cli"]``. ``cli_default``: the value the
    CLI uses when the flag is absent, if it differs from the library's default ("tty": stderr is a terminal);
    ``const``: the value of an "optional" flag given alone; ``nargs``: argparse's, for a positional taking several
    values ("+")."""
    meta = {"help": help, "flag": flag, "kind": kind, "choices": choices, "metavar": metavar,
            "positional": positional, "cli_default": cli_default, "const": const, "nargs": nargs}
    if default is MISSING:
        return field(metadata={"cli": meta})
    return field(default=default, metadata={"cli": meta})


def cli_options(cls: Any) -> list[CliOption]:
    """The CLI options of a config dataclass, in field order."""
    out = []
    for f in fields(cls):
        meta = f.metadata.get("cli")
        if meta is None:
            continue
        default = None if f.default is MISSING else f.default
        kind = meta["kind"] or ("switch" if isinstance(default, bool) else "value")
        flag = None if meta["positional"] else (meta["flag"] or "--" + f.name.replace("_", "-"))
        out.append(CliOption(f.name, flag, meta["help"], kind, meta["choices"], meta["metavar"], meta["positional"],
                             default, meta["cli_default"], meta.get("const"), meta.get("nargs")))
    return out


def whole(name: str, value: Any, minimum: int) -> int:
    what = "a positive whole number" if minimum == 1 else f"a whole number >= {minimum}"
    flag = "--" + name.replace("_", "-")
    message = f"{flag}: expected {what}, received {value!r}."
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise UsageError(message)
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise UsageError(message) from None
    if v < minimum:
        raise UsageError(message)
    return v


def choice(name: str, value: Any, choices: tuple[Any, ...]) -> str:
    if value not in choices:
        from .errors import did_you_mean

        raise UsageError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}.{did_you_mean(value, choices)}")
    return str(value)


def parse_video_spec(spec: str | None) -> list[tuple[str, Any]]:
    """``"first:1,worst:2"`` -> ``[("first", 1), ("worst", 2)]``; ``"episode:4,9"`` -> ``[("episode", 4),
    ("episode", 9)]``; ``"failed-at:3,7"`` -> ``[("failed-at", (3, 7))]`` (x, y: a heatmap pixel);
    ``"none"``/empty -> ``[]``."""
    if spec is None or str(spec).strip().lower() in ("", "none"):
        return []
    items: list[tuple[str, Any]] = []
    parts = [p.strip() for p in str(spec).split(",")]
    i = 0
    while i < len(parts):
        part = parts[i]
        kind, _, count = part.partition(":")
        kind = kind.strip().lower()
        if kind not in VIDEO_KINDS:
            from .errors import did_you_mean

            raise UsageError(
                f"--videos item {part!r}: {kind!r} is not a selection; use {', '.join(VIDEO_KINDS)} "
                f"as KIND:COUNT, e.g. 'first:1,worst:1', or episode:N[,M...] / failed-at:X,Y."
                f"{did_you_mean(kind, VIDEO_KINDS)}"
            )
        if kind == "failed-at":
            x, y = _whole(part, count), _whole(part, parts[i + 1] if i + 1 < len(parts) else "")
            items.append((kind, (x, y)))
            i += 2
            continue
        if kind == "episode":
            items.append((kind, _whole(part, count)))
            i += 1
            while i < len(parts) and parts[i].isdigit():  # episode:4,9,12
                items.append((kind, int(parts[i])))
                i += 1
            continue
        try:
            k = int(count) if count else 1
        except ValueError:
            raise UsageError(f"--videos item {part!r}: the count must be a whole number, e.g. 'worst:2'.") from None
        if k < 0:
            raise UsageError(f"--videos item {part!r}: the count must not be negative.")
        items.append((kind, k))
        i += 1
    return items


def _whole(part: str, text: str) -> int:
    """A non-negative whole number of an ``episode:`` / ``failed-at:`` item, or a UsageError saying the form."""
    if not text.strip().isdigit():
        raise UsageError(f"--videos item {part!r}: expected episode:N[,M...] (episode indices) or failed-at:X,Y "
                         "(a heatmap pixel: column, row), each a whole number >= 0.")
    return int(text)


def attention_value(att: Any) -> bool | str | None:
    """``attention`` normalised: None, True, False or a saliency method name."""
    if att is None or isinstance(att, bool):
        return att
    if isinstance(att, str) and att.lower() in ("on", "off", "none", "true", "false"):
        return att.lower() in ("on", "true")
    if isinstance(att, str):
        return choice("attention", att, SALIENCY_METHODS)
    raise UsageError(f"attention={att!r}; expected True, False, None, 'off' or a saliency method name.")


def camera_list(cameras: Any) -> tuple[str, ...]:
    """--camera: ``"track,0"`` (or ``["track", 0]``) as ``("track", "0")``; ``()`` for None or an empty text
    (the names are checked against the model by :mod:`rlviz.envs.cameras`)."""
    if cameras is None or cameras == "":
        return ()
    items = cameras.split(",") if isinstance(cameras, str) else [str(c) for c in cameras]
    names = tuple(str(c).strip() for c in items)
    if any(not n for n in names):
        raise UsageError(f"--camera {cameras!r} has an empty name; expected a comma list such as track,0 or default,0.")
    return names
