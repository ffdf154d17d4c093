"""Crafted hostile files for the hardening tests (importable as ``_bombs`` from tests/): a zip whose member inflates
from ~1 MB to 1 GiB (written without compressing a GiB), a YAML alias bomb, JSON and YAML nested 100,000 deep, and
a subprocess runner that measures a call's wall time and the memory it added."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

__all__ = ["zip_with_bomb", "YAML_BOMB", "DEEP_JSON", "DEEP_YAML", "measured"]

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

#: 9 levels of 9 aliases: 9**9 (387 million) strings once expanded, 342 bytes on disk
YAML_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_YAML = "env: CartPole-v1\nenv_kwargs: {k: " + "[" * 100_000 + "]" * 100_000 + "}\n"


def _zeros_deflated(size: int) -> tuple[bytes, int]:
    """A raw deflate stream of ``size`` zero bytes (a multiple of 1 MiB) and its CRC-32, built from one compressed
    MiB repeated (a full flush makes each MiB's bytes independent of the ones before)."""
    chunk = 1 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH) == block
    crc, zeros = 0, bytes(chunk)
    for _ in range(size // chunk):
        crc = zlib.crc32(zeros, crc)
    return block * (size // chunk) + c.flush(zlib.Z_FINISH), crc


def zip_with_bomb(path: Path, members: dict[str, bytes], bomb: str, size: int = GIB) -> Path:
    """A zip at ``path`` holding ``members`` (stored) and ``bomb``: ``size`` zero bytes deflated (~1 MB per GiB)."""
    entries = [(name, 0, data, zlib.crc32(data), len(data)) for name, data in members.items()]
    stream, crc = _zeros_deflated(size)
    entries.append((bomb, 8, stream, crc, size))
    out, central = bytearray(), bytearray()
    for name, method, data, crc32, usize in entries:
        raw = name.encode()
        offset = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc32, len(data), usize, len(raw), 0)
        out += raw + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc32, len(data),
                               usize, len(raw), 0, 0, 0, 0, 0, offset) + raw
    start = len(out)
    out += central + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), start, 0)
    path.write_bytes(bytes(out))
    return path


_MEASURE = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
{setup}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
try:
    value = {call}
    outcome = "returned " + repr(value)[:300]
except BaseException as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"s": wall, "cpu": cpu, "mb": (after - before) / 1024, "outcome": outcome}}))
"""


def measured(setup: str, call: str, timeout: float = 120, pythonpath: str | None = None) -> dict:
    """Run ``call`` (an expression) after ``setup`` (imports: not measured) in a fresh interpreter; returns
    {"s": wall seconds, "cpu": the process's CPU seconds (what tests bound: other processes' load does not count),
    "mb": peak memory added (MB, ru_maxrss), "outcome": "returned ..." or "Error: message"}."""
    env = {**os.environ, "PYTHONPATH": pythonpath or str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _MEASURE.format(setup=setup, call=call)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
