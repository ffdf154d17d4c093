"""Errors raised by rlviz.

Every message says what was received, what was expected and what to do about it
(in the manner of Stable-Baselines3). The CLI prints ``RlvizError`` messages on one
line without a traceback: exit code 2 for :class:`UsageError`, 1 for the others.
"""

from __future__ import annotations

import difflib
import importlib
from types import ModuleType

__all__ = [
    "RlvizError",
    "UsageError",
    "CheckpointError",
    "UnsafeCheckpointError",
    "EnvError",
    "VideoError",
    "StorageError",
    "WorkerError",
    "MissingDependencyError",
    "HubError",
    "Interrupted",
    "require",
    "did_you_mean",
]


class RlvizError(Exception):
    """Base class of every error rlviz raises on purpose (CLI exit code 1)."""

    exit_code = 1


class UsageError(RlvizError, ValueError):
    """The caller passed an argument that cannot work (CLI exit code 2)."""

    exit_code = 2


class CheckpointError(RlvizError):
    """A checkpoint file is missing, truncated, corrupt or of an unexpected kind."""


class UnsafeCheckpointError(CheckpointError):
    """Loading the file would unpickle arbitrary code and the caller did not opt in."""


class EnvError(RlvizError):
    """The environment cannot be built or does not provide what rlviz needs."""


class VideoError(RlvizError):
    """The video encoder failed."""


class StorageError(RlvizError):
    """A folder rlviz writes to (the temporary folder, the output folder) is full or not writable."""


class WorkerError(RlvizError):
    """A worker process (``--workers``) or Ray task died or failed in a way rlviz cannot recover from."""


class MissingDependencyError(RlvizError, ImportError):
    """An optional integration was used without its extra installed."""


class HubError(CheckpointError):
    """A Hugging Face Hub repo (``hf://ORG/REPO``) cannot be fetched (not found, gated or private without a token,
    offline and not cached) or holds no agent file rlviz loads."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C ended a job; the message (one line) says what it left: complete outputs, or none. A
    ``KeyboardInterrupt``, so code that stops on Ctrl-C stops on it too; the CLI prints it and exits 130."""


def require(module: str, extra: str, what: str | None = None) -> ModuleType:
    """Import an optional dependency lazily, or explain which extra installs it.

    >>> require("wandb", "wandb")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        purpose = f" for {what}" if what else ""
        raise MissingDependencyError(
            f"rlviz needs the package '{module.split('.')[0]}'{purpose}, but it is not installed "
            f"({exc}). Install it with: pip install \"rlviz[{extra}]\""
        ) from exc


def did_you_mean(received, choices, n: int = 3) -> str:
    """``" Did you mean 'x'?"`` for the closest of ``choices`` to ``received``, or ``""`` when none is close.
    Each suggestion appears once (a CLI lists a flag once per subcommand that has it)."""
    unique = list(dict.fromkeys(str(c) for c in choices))
    close = difflib.get_close_matches(str(received), unique, n=n, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"
