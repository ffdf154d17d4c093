"""flax's ``serialization.to_bytes`` files read with numpy alone: no jax, no flax, no msgpack package.

The format (flax 0.8 ``flax/serialization.py``, written by ``msgpack_serialize``): one msgpack value, a map of
string keys whose values are maps, arrays as msgpack *extension* values, and scalars. Python lists and tuples are
stored as maps keyed ``"0"``, ``"1"``, ... (``_tuple_to_dict``); they stay maps here. Extension types:

====  ==================  =========================================================================
code  what                payload (itself msgpack)
====  ==================  =========================================================================
1     ``np.ndarray``      a 3-array ``(shape: array of ints, dtype name: str/bin, data: bin)``, C order
2     Python complex      a 2-array ``(real, imag)``
3     numpy scalar        as 1, shape ``()``; returned as a 0-d array
====  ==================  =========================================================================

Arrays over 1 GiB would be split into ``{"__msgpack_chunked_array__": ...}`` maps; no network rlviz reads is that
large, so such a map is refused by the size caps. Every read is bounded: the nesting depth, the entries per map
and in all, each array's rank, size and bytes (which must match its shape and dtype exactly); anything else is one
:class:`~rlviz.errors.CheckpointError` naming the file. The decoder is written here (the msgpack spec, about 30
type bytes) so that those bounds hold and nothing but plain data can come out of a file.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ...errors import CheckpointError

__all__ = ["read_flax", "looks_like_flax", "describe_tree", "MAX_DEPTH", "MAX_ENTRIES", "MAX_ARRAY_BYTES"]

MAX_DEPTH = 32  #: maps and arrays nested deeper than this are refused
MAX_ENTRIES = 1 << 16  #: map entries, array items and arrays in one file, all together
MAX_ARRAY_BYTES = 1 << 30  #: one array's data
MAX_NDIM = 8
_DTYPES = {"float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "bool"}
_SIMPLE = {0xC0: None, 0xC2: False, 0xC3: True}
_FIXED = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
          0xD3: ">q"}
#: type byte -> (the length's struct format, what follows)
_SIZED = {0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"), 0xC7: (">B", "ext"), 0xC8: (">H", "ext"),
          0xC9: (">I", "ext"), 0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"), 0xDC: (">H", "array"),
          0xDD: (">I", "array"), 0xDE: (">H", "map"), 0xDF: (">I", "map")}
_MAP_START = set(range(0x81, 0x90)) | {0xDE, 0xDF}
_STR_START = set(range(0xA0, 0xC0)) | {0xD9, 0xDA, 0xDB}


class _Bad(Exception):
    """Malformed input (turned into one CheckpointError naming the file)."""


def looks_like_flax(data: bytes) -> bool:
    """True when ``data`` starts as flax's files do: a non-empty msgpack map whose first key is a string."""
    if len(data) < 2 or data[0] not in _MAP_START:
        return False
    skip = 1 + {0xDE: 2, 0xDF: 4}.get(data[0], 0)
    return len(data) > skip and data[skip] in _STR_START


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos, self.entries = memoryview(data), 0, 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise _Bad(f"it ends early (needs {n} more bytes at byte {self.pos} of {len(self.data)})")
        out, self.pos = self.data[self.pos:end], end
        return out

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self, n: int) -> int:
        self.entries += n
        if self.entries > MAX_ENTRIES:
            raise _Bad(f"it holds more than {MAX_ENTRIES} entries")
        if n > len(self.data) - self.pos:  # every entry takes at least one byte
            raise _Bad(f"a container claims {n} entries with {len(self.data) - self.pos} bytes left")
        return n

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _Bad(f"it nests deeper than {MAX_DEPTH} levels")
        b = self.take(1)[0]
        if b <= 0x7F or b >= 0xE0:  # positive / negative fixint
            return b if b <= 0x7F else b - 0x100
        if b <= 0xBF:  # fixmap, fixarray, fixstr
            kind, n = ("map", b & 0x0F) if b <= 0x8F else ("array", b & 0x0F) if b <= 0x9F else ("str", b & 0x1F)
            return self.sized(kind, n, depth)
        if b in _SIMPLE:
            return _SIMPLE[b]
        if b in _FIXED:
            return self.unpack(_FIXED[b])
        if b in _SIZED:
            fmt, kind = _SIZED[b]
            return self.sized(kind, self.unpack(fmt), depth)
        if 0xD4 <= b <= 0xD8:  # fixext 1, 2, 4, 8, 16
            return self.sized("ext", 1 << (b - 0xD4), depth)
        raise _Bad(f"byte {self.pos - 1} is 0x{b:02x}, which is no msgpack type")

    def sized(self, kind: str, n: int, depth: int) -> Any:
        if kind == "bin":
            return bytes(self.take(n))
        if kind == "str":
            return self.text(n)
        if kind == "array":
            return self.array(n, depth)
        if kind == "map":
            return self.mapping(n, depth)
        return self.ext(self.unpack(">b"), n, depth)

    def text(self, n: int) -> str:
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"a string before byte {self.pos} is not UTF-8") from None

    def array(self, n: int, depth: int) -> list:
        return [self.value(depth + 1) for _ in range(self.count(n))]

    def mapping(self, n: int, depth: int) -> dict:
        out: dict = {}
        for _ in range(self.count(n)):
            key = self.value(depth + 1)
            if not isinstance(key, str):
                raise _Bad(f"a map key before byte {self.pos} is {type(key).__name__}, not a string")
            out[key] = self.value(depth + 1)
        return out

    def ext(self, code: int, n: int, depth: int) -> Any:
        inner = _Reader(bytes(self.take(n)))
        inner.entries = self.entries
        payload = inner.value(depth + 1)
        if inner.pos != n:
            raise _Bad(f"extension type {code} has {n - inner.pos} stray bytes")
        self.entries = inner.entries
        if code == 2 and isinstance(payload, list) and len(payload) == 2 \
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in payload):
            return complex(payload[0], payload[1])
        if code in (1, 3):
            return _ndarray(payload, code)
        raise _Bad(f"extension type {code} is not one flax writes (1 ndarray, 2 complex, 3 numpy scalar)")


def _ndarray(payload: Any, code: int) -> np.ndarray:
    if not (isinstance(payload, list) and len(payload) == 3):
        raise _Bad(f"an array (extension {code}) is not (shape, dtype, data)")
    shape, dtype, raw = payload
    dtype = dtype.decode("ascii", "replace") if isinstance(dtype, bytes) else dtype
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_ARRAY_BYTES for d in shape):
        raise _Bad(f"an array's shape {str(shape)[:60]} is not up to {MAX_NDIM} sizes >= 0")
    if dtype not in _DTYPES and dtype != "bfloat16":
        raise _Bad(f"an array's dtype {str(dtype)[:40]!r} is not one of {sorted(_DTYPES | {'bfloat16'})}")
    if not isinstance(raw, bytes):
        raise _Bad("an array's data is not bytes")
    count = int(np.prod(shape, dtype=np.float64))
    itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    if count * itemsize > MAX_ARRAY_BYTES or count * itemsize != len(raw):
        raise _Bad(f"an array of shape {tuple(shape)} and dtype {dtype} holds {len(raw)} bytes, "
                   f"not {count * itemsize}")
    if dtype == "bfloat16":  # the upper half of a float32's bits
        arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        arr = np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(np.dtype(dtype))
    return arr.reshape(shape)


def read_flax(data: bytes, source: str) -> dict:
    """``data`` (a flax ``to_bytes`` file) as nested dicts of numpy arrays and plain values."""
    reader = _Reader(data)
    try:
        tree = reader.value(0)
        if reader.pos != len(data):
            raise _Bad(f"{len(data) - reader.pos} stray bytes follow the data")
    except _Bad as exc:
        raise CheckpointError(f"{source}: not a readable flax (msgpack) file: {exc}.") from None
    except RecursionError:
        raise CheckpointError(f"{source}: not a readable flax (msgpack) file: it nests too deeply.") from None
    if not isinstance(tree, dict):
        raise CheckpointError(f"{source}: a flax file holds a mapping at its top, not a {type(tree).__name__}.")
    return tree


def describe_tree(tree: Any, depth: int = 3, limit: int = 400) -> str:
    """A short text of what a tree holds (keys, array shapes), for error messages."""
    def show(node: Any, level: int) -> str:
        if isinstance(node, np.ndarray):
            return f"{node.dtype}{list(node.shape)}"
        if isinstance(node, dict):
            if level >= depth:
                return "{...}"
            items = [f"{k}: {show(v, level + 1)}" for k, v in list(node.items())[:12]]
            return "{" + ", ".join(items) + (", ..." if len(node) > 12 else "") + "}"
        return type(node).__name__
    text = show(tree, 0)
    return text if len(text) <= limit else text[: limit - 3] + "..."
