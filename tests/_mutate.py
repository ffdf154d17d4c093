"""A seeded mutator of checkpoint files for the fuzz test (tests/test_fuzz.py): every draw comes from one numpy
Generator, so a (seed, input index) pair rebuilds the same mutated file.

Mutations of a file's bytes: truncation, byte flips, random bytes inserted, emptied. Of a zip archive (an SB3 zip,
a ``.pt2``, a ``torch.save`` file): one member replaced by random bytes, emptied, removed, or mutated itself by
kind (JSON: one value replaced by one of another type, a key removed; pickles: the marker payload; a state_dict:
one tensor of another shape, dtype or rank, NaN, or dropped; anything else: bytes). Of a YAML file: one value replaced (by another type, or the payload tag). Payloads: a pickle whose
``__reduce__`` runs code, a YAML ``!!python/object/apply`` tag, an SB3 ``:serialized:`` entry holding that pickle;
each would create the file ``marker`` if anything ran it.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["mutate_file", "payload_pickle"]

_ODD_VALUES = [0, -1, 1, 2**63, -(2**70), 1e308, -1e-300, 0.5, float("nan"), float("inf"), True, False, None, "",
               "x", "CartPole-v1", "os:system", "<class 'os.system'>", [], [1, 2], [[1]], {}, {"a": 1}, {"__init__": 3},
               "1" * 200, [None] * 3]


class _Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def payload_pickle(marker: str | Path) -> bytes:
    """A pickle that, if unpickled, runs code creating ``marker``."""
    return pickle.dumps(_Payload(str(marker)), protocol=2)


def _yaml_payload(marker: str) -> str:
    return f"!!python/object/apply:builtins.exec [\"open({marker!r}, 'w').write('ran')\"]"


def _odd_value(rng: np.random.Generator, marker: str):
    if rng.random() < 0.1:
        return {":type:": "<class 'x.Y'>", ":serialized:": base64.b64encode(payload_pickle(marker)).decode()}
    return _ODD_VALUES[int(rng.integers(len(_ODD_VALUES)))]


def _nodes(doc, path=()):
    """Every (container, key) of a JSON document, depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield doc, k
        yield from _nodes(v, (*path, k))


def _mutate_json(data: bytes, rng: np.random.Generator, marker: str) -> bytes:
    try:
        doc = json.loads(data)
    except ValueError:
        return _mutate_bytes(data, rng)
    nodes = list(_nodes(doc))
    if not nodes:
        return json.dumps(_odd_value(rng, marker)).encode()
    parent, key = nodes[int(rng.integers(len(nodes)))]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[key]
    else:
        parent[key] = _odd_value(rng, marker)
    return json.dumps(doc).encode()


def _mutate_yaml(data: bytes, rng: np.random.Generator, marker: str) -> bytes:
    lines = data.decode("utf-8", "replace").splitlines()
    candidates = [i for i, ln in enumerate(lines) if ln.strip()]
    if not candidates:
        return _mutate_bytes(data, rng)
    i = candidates[int(rng.integers(len(candidates)))]
    ln = lines[i]
    head = ln[: ln.index(":") + 1] if ":" in ln and not ln.lstrip().startswith("- ") else ln[: len(ln) - len(ln.lstrip())] + "- "
    choice = int(rng.integers(6))
    value = (_yaml_payload(marker) if choice == 0 else json.dumps(_odd_value(rng, marker)) if choice < 4
             else ["{", "]", "!!binary x", "&a [*a]", "'", "!!float x"][int(rng.integers(6))])
    lines[i] = f"{head} {value}"
    return ("\n".join(lines) + "\n").encode()


def _mutate_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    kind = int(rng.integers(4))
    if kind == 0 or not data:  # truncate
        return data[: int(rng.integers(len(data) + 1))]
    if kind == 1:  # flip 1..8 bytes
        buf = bytearray(data)
        for at in rng.integers(len(buf), size=int(rng.integers(1, 9))):
            buf[at] ^= int(rng.integers(1, 256))
        return bytes(buf)
    if kind == 2:  # insert random bytes
        at = int(rng.integers(len(data) + 1))
        return data[:at] + rng.bytes(int(rng.integers(1, 64))) + data[at:]
    return b""


def _odd_tensor(t, rng: np.random.Generator):
    import torch

    kind = int(rng.integers(6))
    if kind == 0 and t.ndim > 0:  # another shape
        return torch.zeros(*[max(1, int(s) + int(rng.integers(-1, 2))) for s in t.shape])
    if kind == 1:
        return t.reshape(-1)
    if kind == 2:
        return t.to([torch.int64, torch.bool, torch.float16, torch.float64, torch.uint8][int(rng.integers(5))])
    if kind == 3:
        return torch.full_like(t, float("nan")) if t.is_floating_point() else t
    if kind == 4:
        return torch.zeros(0)
    return t[None]


def _mutate_state_dict(data: bytes, rng: np.random.Generator) -> bytes:
    """A torch.save'd state_dict with one tensor of another shape, dtype, rank or value, or one entry dropped."""
    import torch

    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:
        return _mutate_bytes(data, rng)
    if not isinstance(state, dict) or not state:
        return _mutate_bytes(data, rng)
    key = list(state)[int(rng.integers(len(state)))]
    if rng.random() < 0.15:
        del state[key]
    elif isinstance(state[key], torch.Tensor):
        state[key] = _odd_tensor(state[key], rng)
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _is_torch_save(data: bytes) -> bool:
    if data[:2] != b"PK":
        return False
    try:
        return any(n.endswith("data.pkl") for n in zipfile.ZipFile(io.BytesIO(data)).namelist())
    except zipfile.BadZipFile:
        return False


def _is_pickle(name: str, data: bytes) -> bool:
    return name.endswith((".pkl", ".pth", ".pt")) or data[:1] == b"\x80"


def _mutate_member(name: str, data: bytes, rng: np.random.Generator, marker: str) -> bytes | None:
    """A member's new bytes (None: remove it)."""
    kind = int(rng.integers(6))
    if kind == 0:
        return rng.bytes(max(1, len(data)))
    if kind == 1:
        return b""
    if kind == 2:
        return None
    if name.endswith(".json") or name == "data" or data[:1] in (b"{", b"["):
        return _mutate_json(data, rng, marker)
    if _is_pickle(name, data) and kind == 3:
        return payload_pickle(marker)
    if _is_torch_save(data):
        return _mutate_state_dict(data, rng)
    if data[:2] == b"PK":
        return _mutate_zip(data, rng, marker)
    return _mutate_bytes(data, rng)


def _mutate_zip(data: bytes, rng: np.random.Generator, marker: str) -> bytes:
    try:
        src = zipfile.ZipFile(io.BytesIO(data))
        infos = src.infolist()
    except zipfile.BadZipFile:
        return _mutate_bytes(data, rng)
    if not infos:
        return _mutate_bytes(data, rng)
    # members worth aiming at more often than the bulk of weights: the ones a reader parses
    weights = np.array([5.0 if i.filename.endswith((".json", ".pkl", "data", "archive_format", "version")) else 1.0
                        for i in infos])
    target = infos[int(rng.choice(len(infos), p=weights / weights.sum()))]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in infos:
            blob = src.read(info)
            if info.filename == target.filename:
                blob = _mutate_member(info.filename, blob, rng, marker)
                if blob is None:
                    continue
            dst.writestr(info, blob)  # same name, compression and alignment-free layout as zipfile writes it
    return out.getvalue()


def mutate_file(path: Path, rng: np.random.Generator, marker: str | Path) -> str:
    """Rewrite ``path`` mutated in place; returns what was done (for the failure report)."""
    data, marker = path.read_bytes(), str(marker)
    name = path.name
    if rng.random() < 0.3:
        how, new = "bytes", _mutate_bytes(data, rng)
    elif _is_torch_save(data) and rng.random() < 0.5:
        how, new = "tensor", _mutate_state_dict(data, rng)
    elif data[:2] == b"PK":
        how, new = "zip member", _mutate_zip(data, rng, marker)
    elif name.endswith((".yml", ".yaml")):
        how, new = "yaml value", _mutate_yaml(data, rng, marker)
    elif _is_pickle(name, data):
        how, new = "pickle payload", payload_pickle(marker) if rng.random() < 0.5 else _mutate_bytes(data, rng)
    elif data[:1] in (b"{", b"["):
        how, new = "json value", _mutate_json(data, rng, marker)
    else:
        how, new = "bytes", _mutate_bytes(data, rng)
    path.write_bytes(new)
    return f"{how} of {name}"
