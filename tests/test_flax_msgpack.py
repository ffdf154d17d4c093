"""rlviz's own reader of flax's msgpack files (rlviz/sources/cleanrl/flax_msgpack.py): every value flax writes, and
bounded, one-line errors for what it does not. The files are encoded here by a small msgpack writer that follows
the msgpack spec (the fixtures in test_cleanrl_jax.py are files flax itself wrote)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from rlviz.errors import CheckpointError
from rlviz.sources.cleanrl.flax_msgpack import MAX_DEPTH, looks_like_flax, read_flax
from rlviz.sources.files import detect_format


def pack(x) -> bytes:
    """msgpack, as the ``msgpack`` package writes with ``use_bin_type=True`` (smallest encodings)."""
    if isinstance(x, (list, tuple)):
        return (bytes([0x90 | len(x)]) if len(x) < 16 else b"\xdc" + struct.pack(">H", len(x))) + b"".join(
            pack(v) for v in x)
    if isinstance(x, dict):
        head = bytes([0x80 | len(x)]) if len(x) < 16 else b"\xde" + struct.pack(">H", len(x))
        return head + b"".join(pack(k) + pack(v) for k, v in x.items())
    if isinstance(x, np.ndarray):
        return ext(1, pack([list(x.shape), x.dtype.name, x.tobytes()]))
    if isinstance(x, complex):
        return ext(2, pack([x.real, x.imag]))
    return pack_scalar(x)


def pack_scalar(x) -> bytes:
    if x is None:
        return b"\xc0"
    if isinstance(x, bool):
        return b"\xc3" if x else b"\xc2"
    if isinstance(x, int):
        if 0 <= x < 128:
            return bytes([x])
        if -32 <= x < 0:
            return struct.pack("b", x)
        return b"\xd3" + struct.pack(">q", x)
    if isinstance(x, float):
        return b"\xcb" + struct.pack(">d", x)
    if isinstance(x, str):
        b = x.encode()
        return (bytes([0xA0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(x, bytes):
        return b"\xc6" + struct.pack(">I", len(x)) + x
    raise TypeError(type(x))


def ext(code: int, payload: bytes) -> bytes:
    return b"\xc9" + struct.pack(">Ib", len(payload), code) + payload


def test_reads_every_value_flax_writes_in_file_order():
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    tree = {"params": {"Dense_0": {"bias": np.ones(4, np.float32), "kernel": w}},
            "args": {"env_id": "CartPole-v1", "seed": 1, "lr": 2.5e-4, "track": False, "entity": None,
                     "big": 1 << 40, "neg": -3, "name": "x" * 40},
            "list": {"0": np.full((), 7, np.int64), "1": 1 + 2j}}
    data = pack(tree)
    assert looks_like_flax(data) and detect_format(data) == "flax-msgpack"
    got = read_flax(data, "f")
    assert list(got["params"]["Dense_0"]) == ["bias", "kernel"]  # the file's order, not sorted
    np.testing.assert_array_equal(got["params"]["Dense_0"]["kernel"], w)
    assert got["params"]["Dense_0"]["kernel"].dtype == np.float32
    assert got["args"] == tree["args"] and got["list"]["1"] == 1 + 2j
    assert got["list"]["0"].shape == () and got["list"]["0"] == 7


def test_numpy_scalars_and_bfloat16():
    bits = (np.array([1.5, -2.0], np.float32).view(np.uint32) >> 16).astype("<u2")
    data = (b"\x82" + pack("s") + ext(3, pack([[], "float64", np.float64(3.25).tobytes()]))
            + pack("b") + ext(1, pack([[2], "bfloat16", bits.tobytes()])))
    tree = read_flax(data, "f")
    assert tree["s"].shape == () and float(tree["s"]) == 3.25
    np.testing.assert_array_equal(tree["b"], np.array([1.5, -2.0], np.float32))


@pytest.mark.parametrize("mutate, why", [
    (lambda d: d[:-3], "ends early"),
    (lambda d: d + b"\x00", "stray"),
    (lambda d: d.replace(b"float32", b"objectx"), "dtype"),
    (lambda d: d.replace(pack([3, 4]), pack([3, 5])), "holds"),
    (lambda d: b"\xdf\xff\xff\xff\xff" + d[1:], "entries"),
    (lambda d: d.replace(b"\xc9", b"\xc1", 1), "no msgpack type"),
])
def test_malformed_files_are_one_line_errors(mutate, why):
    data = pack({"params": {"kernel": np.zeros((3, 4), np.float32)}})
    with pytest.raises(CheckpointError, match=why) as info:
        read_flax(mutate(data), "model.cleanrl_model")
    assert "\n" not in str(info.value) and "model.cleanrl_model" in str(info.value)


def test_depth_and_size_bounds():
    deep = b"".join(b"\x81\xa1k" for _ in range(MAX_DEPTH + 5)) + b"\xc0"
    with pytest.raises(CheckpointError, match="deeper"):
        read_flax(deep, "deep")
    huge = pack({"a": 0}).replace(pack(0), ext(1, pack([[1 << 20, 1 << 20], "float32", b""])))
    with pytest.raises(CheckpointError, match="holds 0 bytes"):
        read_flax(huge, "huge")
    with pytest.raises(CheckpointError, match="not a dict|mapping at its top"):
        read_flax(pack([1, 2]), "list")
    assert not looks_like_flax(b"\x80") and not looks_like_flax(b"PK\x03\x04") and not looks_like_flax(b"\x81\x01")
