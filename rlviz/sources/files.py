"""Checkpoint files as bytes: reading with clear errors, telling formats apart, writing atomically,
and ``torch.load`` that refuses pickled code unless asked (``weights_only=True`` first)."""

from __future__ import annotations

import io
import pickle
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import CheckpointError, RlvizError, UnsafeCheckpointError
from ..media.atomic import atomic_write
from .limits import check_zip_bytes

__all__ = ["read_file", "describe", "detect_format", "atomic_write", "torch_load", "quiet_torch_load",
           "require_safe_torch_load", "SAFE_TORCH", "EXPECTED", "META_NAME"]

META_NAME = "rlviz.json"
_TRUST_HINT = "pass trust=True (CLI: --trust-checkpoint)"


EXPECTED = ("an rlviz checkpoint (.pt2), a torch.export program, a torch.save file, a Stable-Baselines3 .zip or a "
            "CleanRL JAX (flax) .cleanrl_model")
_MAGIC = [(b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"%PDF", "a PDF document"), (b"\x1f\x8b", "a gzip file"), (b"\x93NUMPY", "a NumPy .npy file"),
          (b"\x89HDF", "an HDF5 file")]


def read_file(path) -> bytes:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{p}: no such file; expected {EXPECTED}.") from None
    except IsADirectoryError:
        raise CheckpointError(f"{p} is a directory; expected a checkpoint file ({EXPECTED}).") from None
    except OSError as exc:
        raise CheckpointError(f"{p}: cannot read it ({exc.strerror or exc}).") from None
    if not data:
        raise CheckpointError(f"{p} is empty (0 bytes); expected {EXPECTED}. Was it written completely?")
    return data


def describe(data: bytes) -> str:
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    try:
        data[:4096].decode("utf-8")
        return "a text file"
    except UnicodeDecodeError:
        return f"a file starting with bytes {data[:8].hex(' ')}"


def detect_format(data: bytes) -> str:
    """"rlviz" | "torch-export" | "sb3-zip" | "torch-save" | "flax-msgpack" | "zip" (unrecognised) | "corrupt-zip" |
    "unknown"."""
    if data[:2] == b"PK":
        import zipfile

        try:
            infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
        except Exception:
            return "corrupt-zip"
        # A truncated archive can expose the directory of a zip stored inside it (SB3 keeps torch.save zips
        # uncompressed): a genuine archive's first entry starts at byte 0.
        if not infos or min(i.header_offset for i in infos) != 0:
            return "corrupt-zip"
        names = [i.filename for i in infos]
        rel = {n.split("/", 1)[1] if "/" in n else n for n in names}
        if "archive_format" in rel and any(n.startswith("models/") for n in rel):
            return "rlviz" if f"extra/{META_NAME}" in rel else "torch-export"
        if "data" in names and "policy.pth" in names:
            return "sb3-zip"
        if "data.pkl" in rel:
            return "torch-save"
        return "zip"
    if data[:1] == b"\x80":  # a pickle: torch.save's legacy (non-zip) format
        return "torch-save"
    from .cleanrl.flax_msgpack import looks_like_flax

    if looks_like_flax(data):  # flax.serialization.to_bytes (CleanRL's JAX scripts)
        return "flax-msgpack"
    return "unknown"


#: the first torch release whose ``torch.load(weights_only=True)`` runs no code from the file (CVE-2025-32434)
SAFE_TORCH = (2, 6)


def _torch_version() -> tuple[int, int]:
    parts = str(torch.__version__).split("+")[0].split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):  # an unparseable local build: assume it is recent
        return SAFE_TORCH


def require_safe_torch_load(source: str) -> None:
    """Refuse to read ``source`` with ``torch.load(weights_only=True)`` under a torch that file can still run code
    in (before 2.6): rlviz needs no torch floor for recording, only for reading untrusted torch files."""
    if _torch_version() < SAFE_TORCH:
        raise UnsafeCheckpointError(
            f"{source}: torch {torch.__version__} runs code hidden in a torch file even with weights_only=True "
            f"(CVE-2025-32434), so rlviz does not read it with this torch; pip install 'torch>=2.6', or, if you trust "
            f"the file, {_TRUST_HINT}."
        )


@contextmanager
def quiet_torch_load() -> Iterator[None]:
    """torch.load without its own warnings about the file (e.g. "Detected pickle protocol N"): rlviz says in one
    line what is wrong with a file, and a file that loads needs no remark."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*(pickle protocol|weights_only|TorchScript archive)")
        yield


def torch_load(data: bytes, source: str, weights_only: bool):
    """``torch.load`` of a file's bytes (archive members checked against :mod:`.limits` first, and refused under a
    torch < 2.6 when ``weights_only``); one :class:`CheckpointError` line for anything wrong with it."""
    if weights_only:
        require_safe_torch_load(source)
    check_zip_bytes(data, source)
    try:
        with quiet_torch_load():
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=weights_only)
    except pickle.UnpicklingError as exc:
        if weights_only and "Weights only load failed" in str(exc):
            raise UnsafeCheckpointError(
                f"{source} is a full pickle (e.g. torch.save(model)), not plain weights: loading it runs whatever "
                f"code the file names, so a malicious file could take over this machine. If you trust its source, "
                f"{_TRUST_HINT}; or re-save it as torch.save(model.state_dict()) and load it with model=."
            ) from None
        raise CheckpointError(f"{source}: corrupt torch.save file ({str(exc).splitlines()[0][:200]}).") from None
    except (ModuleNotFoundError, AttributeError) as exc:
        raise CheckpointError(
            f"{source} pickles objects from code that is not importable here ({exc}); make that module importable."
        ) from None
    except RlvizError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CheckpointError(f"{source}: truncated or corrupt torch.save file ({first}).") from None
