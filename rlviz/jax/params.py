"""A flax agent's parameters read from a file, never unpickled, every read bounded
(:mod:`rlviz.sources.limits`' sizes):

* a flax msgpack file (``flax.serialization.to_bytes`` of a params tree, or of ``{"actor": ..., "critic": ...}``):
  read by rlviz's own bounded msgpack decoder (:func:`rlviz.sources.cleanrl.flax_msgpack.read_flax`: depth, entries,
  array sizes checked against the file before any allocation; plain data only);
* an Orbax checkpoint folder (``orbax.checkpoint`` ``PyTreeCheckpointer`` / ``StandardCheckpointer``), restored
  without a target (Orbax keeps its tree's metadata as JSON/msgpack and its arrays in tensorstore, never pickles);
* a ``.npz`` of the flattened tree, keys joined with ``/`` (``np.load(allow_pickle=False)``, its zip directory
  checked first by :func:`rlviz.sources.limits.check_archive`).

Each returns nested dicts of numpy arrays; anything unreadable is one :class:`~rlviz.errors.CheckpointError` line.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..sources.cleanrl.flax_msgpack import looks_like_flax, read_flax
from ..sources.limits import MAX_ARCHIVE_BYTES, MAX_MEMBER_BYTES, check_archive, mib

__all__ = ["read_params", "params_format", "flatten_tree", "unflatten_tree", "MAX_PARAMS_FILES"]

#: files in an Orbax checkpoint folder (a policy's checkpoint holds a few dozen)
MAX_PARAMS_FILES = 10_000


def params_format(path: str | Path) -> str | None:
    """"orbax" | "npz" | "msgpack" for a file (folder) in one of the three formats, else None; reads at most a few
    bytes."""
    p = Path(path)
    if p.is_dir():
        names = {c.name for c in p.iterdir()} if p.exists() else set()
        return "orbax" if names & {"_METADATA", "_CHECKPOINT_METADATA", "manifest.ocdbt", "checkpoint"} or any(
            (p / n).is_dir() and (p / n / "_METADATA").exists() for n in names) else None
    if not p.is_file():
        return None
    with open(p, "rb") as f:
        head = f.read(16)
    if head[:4] == b"PK\x03\x04" and p.suffix == ".npz":
        return "npz"
    if looks_like_flax(head):
        return "msgpack"
    return None


def flatten_tree(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """{"a/b/kernel": array} of nested dicts (the ``.npz`` layout)."""
    out: dict[str, np.ndarray] = {}
    if hasattr(tree, "items"):
        for k, v in tree.items():
            out.update(flatten_tree(v, f"{prefix}{k}/"))
    else:
        out[prefix[:-1]] = np.asarray(tree)
    return out


def unflatten_tree(flat: dict[str, Any], source: str = "") -> dict:
    """Nested dicts from {"a/b/kernel": array}; a key both a leaf and a folder is refused."""
    tree: dict = {}
    for key, value in flat.items():
        parts = key.split("/")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise CheckpointError(f"{source}: key {key!r} puts a folder under the array {part!r}.")
        if parts[-1] in node:
            raise CheckpointError(f"{source}: key {key!r} is both an array and a folder of arrays.")
        node[parts[-1]] = value
    return tree


def read_params(path: str | Path) -> tuple[dict, str]:
    """(the params tree: nested dicts of numpy arrays, the format: "msgpack" | "orbax" | "npz") of ``path``."""
    p = Path(path)
    fmt = params_format(p)
    if fmt is None:
        raise CheckpointError(f"{p}: not a flax params file; expected a flax msgpack file (flax.serialization."
                              "to_bytes), an Orbax checkpoint folder or a .npz of the flattened tree.")
    if fmt == "msgpack":
        size = p.stat().st_size
        if size > MAX_MEMBER_BYTES:
            raise CheckpointError(f"{p}: {mib(size)} is over rlviz's {mib(MAX_MEMBER_BYTES)} limit for a params file.")
        return read_flax(p.read_bytes(), str(p)), fmt
    if fmt == "npz":
        return _read_npz(p), fmt
    return _read_orbax(p), fmt


def _read_npz(p: Path) -> dict:
    try:
        with zipfile.ZipFile(p) as zf:
            check_archive(zf, str(p))
        with np.load(p, allow_pickle=False) as z:
            flat = {k: np.asarray(z[k]) for k in z.files}
    except CheckpointError:
        raise
    except Exception as exc:  # zipfile / numpy's errors on a damaged file (pickled arrays: ValueError)
        raise CheckpointError(f"{p}: not a readable .npz of params ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}).") from None
    if any(a.dtype == object for a in flat.values()):  # pragma: no cover - allow_pickle=False refuses them first
        raise CheckpointError(f"{p}: holds object arrays; rlviz reads numeric arrays only.")
    return unflatten_tree(flat, str(p))


def _read_orbax(p: Path) -> dict:
    files = [f for f in p.rglob("*") if f.is_file()]
    if len(files) > MAX_PARAMS_FILES:
        raise CheckpointError(f"{p}: {len(files)} files, over rlviz's {MAX_PARAMS_FILES} for an Orbax checkpoint.")
    total = sum(f.stat().st_size for f in files)
    if total > MAX_ARCHIVE_BYTES:
        raise CheckpointError(f"{p}: {mib(total)}, over rlviz's {mib(MAX_ARCHIVE_BYTES)} for an Orbax checkpoint.")
    try:
        import orbax.checkpoint as ocp  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise CheckpointError(f'{p} is an Orbax checkpoint; reading it needs orbax-checkpoint: pip install '
                              '"rlviz[jax]".') from None
    target = p
    if not any((p / n).exists() for n in ("_METADATA", "manifest.ocdbt", "_CHECKPOINT_METADATA")):
        subs = [c for c in p.iterdir() if c.is_dir() and (c / "_METADATA").exists()]
        if len(subs) == 1:  # a CheckpointManager step folder ("default/" inside)
            target = subs[0]
    try:
        with ocp.PyTreeCheckpointer() as ckptr:
            tree = ckptr.restore(target.resolve())
    except Exception as exc:
        raise CheckpointError(f"{p}: not a readable Orbax checkpoint ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''}).") from None
    import jax

    tree = jax.tree_util.tree_map(np.asarray, tree)
    if not isinstance(tree, dict):
        raise CheckpointError(f"{p}: the Orbax checkpoint holds a {type(tree).__name__}; expected a params tree.")
    return tree
