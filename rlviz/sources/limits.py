"""Bounded reading of untrusted files: archive members, JSON and YAML, each refused by one :class:`CheckpointError`
line naming the file and the limit *before* the expensive step (inflating, expanding, recursing).

The limits and why:

* :data:`MAX_META_BYTES` (64 MiB): a JSON/YAML/text member or file (an SB3 zip's ``data``, a .pt2's
  ``extra/rlviz.json`` or ``models/model.json``, rl-zoo3's YAML, a model card). The largest seen in practice is an SB3
  Atari ``data`` with its base64 ``_last_obs`` (under 2 MiB for 16 envs); 64 MiB leaves 30x room and parses in
  well under a second.
* :data:`MAX_MEMBER_BYTES` (4 GiB) and :data:`MAX_ARCHIVE_BYTES` (8 GiB): one archive member (weights) and all of
  them together, as declared by the archive's directory. A Nature-CNN Atari policy is 7 MB and the largest policies
  users render are under 1 GB; beyond that the machine, not rlviz, should say no.
* :data:`MAX_RATIO` (200:1) for members declared over :data:`RATIO_FROM_BYTES` (16 MiB): deflated network weights
  shrink by less than 2:1 (torch and SB3 store them uncompressed), while a deflate bomb reaches ~1000:1; a 1 MB
  file that claims 1 GiB is refused from its directory without inflating a byte.
* :data:`MAX_JSON_DEPTH` (100): torch.export's program nests ~20 levels, an SB3 ``data`` under 10; 100 leaves room and
  keeps every recursive walk of a parsed document (vetting, schema checks) far from Python's recursion limit.
* :data:`MAX_YAML_NODES` (100,000): the nodes a YAML document would have once its aliases are expanded, counted on
  the composed graph (aliases shared, so counting costs the size of the file, not of the expansion). rl-zoo3's files
  hold under 200 nodes; a 478-byte alias bomb expands to billions.

Every reader that parses JSON or YAML from a file goes through :func:`loads_json` / :func:`load_yaml`; every archive
member is read with :func:`read_member` after :func:`check_archive`.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from typing import Any

from ..errors import CheckpointError

__all__ = ["MAX_META_BYTES", "MAX_MEMBER_BYTES", "MAX_ARCHIVE_BYTES", "MAX_RATIO", "RATIO_FROM_BYTES",
           "MAX_JSON_DEPTH", "MAX_YAML_NODES", "check_archive", "check_zip_bytes", "read_member", "loads_json",
           "json_depth", "load_yaml", "read_text_capped", "mib"]

MAX_META_BYTES = 64 << 20
MAX_MEMBER_BYTES = 4 << 30
MAX_ARCHIVE_BYTES = 8 << 30
MAX_RATIO = 200
RATIO_FROM_BYTES = 16 << 20
MAX_JSON_DEPTH = 100
MAX_YAML_NODES = 100_000

_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, ValueError, RuntimeError)


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):,.1f} GiB"


def _bomb(source: object, name: str, why: str) -> CheckpointError:
    return CheckpointError(f"{source}: archive member {name!r} {why}; rlviz refuses it unread (a damaged file or a "
                           "zip bomb): replace the file with an intact copy.")


def check_archive(archive: zipfile.ZipFile, source: object, cap: int = MAX_MEMBER_BYTES) -> None:
    """Refuse an archive whose directory declares a member over ``cap`` bytes, members over
    :data:`MAX_ARCHIVE_BYTES` in all, or a large member compressed more than :data:`MAX_RATIO`:1."""
    total = 0
    for info in archive.infolist():
        size = int(info.file_size)
        total += size
        if size > cap:
            raise _bomb(source, info.filename, f"declares {mib(size)}, over the limit of {mib(cap)}")
        if size > RATIO_FROM_BYTES and size > MAX_RATIO * max(int(info.compress_size), 1):
            raise _bomb(source, info.filename, f"inflates {info.compress_size:,} bytes to {mib(size)} (over "
                                               f"{MAX_RATIO}:1; weights compress by less than 2:1)")
    if total > MAX_ARCHIVE_BYTES:
        raise _bomb(source, "*", f"(all members) declare {mib(total)}, over the limit of {mib(MAX_ARCHIVE_BYTES)}")


def check_zip_bytes(data: bytes, source: object) -> None:
    """:func:`check_archive` for the bytes of a file that starts as a zip (anything else passes unchecked: the
    reader that opens it says what is wrong)."""
    if data[:2] != b"PK":
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS:
        return
    with archive:
        check_archive(archive, source)


def read_member(archive: zipfile.ZipFile, name: str, source: object, cap: int = MAX_META_BYTES) -> bytes:
    """The bytes of member ``name`` (KeyError when absent), refused when it declares more than ``cap`` bytes, and
    read with that cap (a member whose data runs past its declared size is refused, never read to its end)."""
    info = archive.getinfo(name)
    if info.file_size > cap:
        raise _bomb(source, name, f"declares {mib(info.file_size)}, over the limit of {mib(cap)} for this member")
    with archive.open(info) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:  # pragma: no cover - zipfile stops at the declared size
        raise _bomb(source, name, f"holds more than {mib(cap)}")
    return data


def json_depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value (a scalar: 0), walked without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if items is None:
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 <= MAX_JSON_DEPTH:  # (deeper than that is refused anyway: no need to walk it)
            stack.extend((v, depth + 1) for v in items)
    return deepest


def loads_json(raw: bytes | str, source: object, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` of a file's (or member's) text, refused in one line when it is not JSON, is larger than
    :data:`MAX_META_BYTES` or nests deeper than ``max_depth``."""
    if len(raw) > MAX_META_BYTES:
        raise CheckpointError(f"{source}: {what} is {mib(len(raw))}, over the limit of {mib(MAX_META_BYTES)} for "
                              "JSON; the file is damaged or not what it claims to be.")
    try:
        doc = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except RecursionError:
        doc = None
        depth = max_depth + 1
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{source}: {what} is not valid JSON ({str(exc)[:160]}).") from None
    else:
        depth = json_depth(doc)
    if depth > max_depth:
        raise CheckpointError(f"{source}: {what} nests deeper than {max_depth} levels (the limit for JSON rlviz "
                              "reads); the file is damaged or crafted.")
    return doc


def read_text_capped(path: object, source: object, cap: int = MAX_META_BYTES) -> str:
    """A text file read with a cap (a larger file is refused unread beyond the cap)."""
    try:
        with open(path, "rb") as fh:  # type: ignore[call-overload]
            raw = fh.read(cap + 1)
    except OSError as exc:
        raise CheckpointError(f"{source}: cannot read it ({exc.strerror or exc}).") from None
    if len(raw) > cap:
        raise CheckpointError(f"{source}: over {mib(cap)}, the limit for a text file rlviz reads; the file is "
                              "damaged or not what it claims to be.")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{source}: not UTF-8 text ({exc}).") from None


def _expanded_nodes(yaml: Any, root: Any, source: object) -> None:
    """Refuse a composed YAML graph that expands to more than :data:`MAX_YAML_NODES` nodes or nests deeper than
    :data:`MAX_JSON_DEPTH` (aliases are shared nodes here: each is counted once per use without expanding it)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [c for pair in node.value for c in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_YAML_NODES:
                raise CheckpointError(f"{source}: its YAML expands (through anchors and aliases) to more than "
                                      f"{MAX_YAML_NODES:,} nodes, the limit for a YAML file rlviz reads; the file is "
                                      "crafted (an alias bomb) or not a config file.")
            if depth[key] > MAX_JSON_DEPTH:
                raise CheckpointError(f"{source}: its YAML nests deeper than {MAX_JSON_DEPTH} levels, the limit for "
                                      "a YAML file rlviz reads; the file is damaged or crafted.")
            continue
        if key in size:
            continue
        if key in on_path:  # a recursive alias (an anchor used inside itself)
            raise CheckpointError(f"{source}: its YAML refers to itself (a recursive alias); the file is crafted or "
                                  "not a config file.")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


_QUOTED = re.compile(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"|#[^\n]*")


def _flow_depth(text: str, source: object) -> None:
    """Refuse YAML whose flow collections (``[`` ``{``) nest deeper than :data:`MAX_JSON_DEPTH`, from the text
    alone: PyYAML's scanner is quadratic in that depth (100,000 brackets: seconds) before its composer recurses."""
    depth = 0
    for bracket in re.findall(r"[\[\]{}]", _QUOTED.sub("", text)):
        depth = depth + 1 if bracket in "[{" else max(depth - 1, 0)
        if depth > MAX_JSON_DEPTH:
            raise CheckpointError(f"{source}: its YAML nests deeper than {MAX_JSON_DEPTH} levels, the limit for a "
                                  "YAML file rlviz reads; the file is damaged or crafted.")


def load_yaml(yaml: Any, loader_cls: Any, text: str, source: object) -> Any:
    """One YAML document of ``text`` built by ``loader_cls`` (a SafeLoader subclass), after its composed node graph
    passed :func:`_expanded_nodes`: an alias bomb is refused before anything is expanded. YAML errors propagate."""
    if len(text) > MAX_META_BYTES:
        raise CheckpointError(f"{source}: over {mib(MAX_META_BYTES)}, the limit for a YAML file rlviz reads.")
    _flow_depth(text, source)
    loader = loader_cls(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_nodes(yaml, node, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()
