"""The one progress mechanism: tqdm bars (rates and ETA) on stderr, for every phase that can take more than a
second or two (loading, rollouts, replays, saliency, encoding, logging).

The library is silent unless asked: bars show only inside ``with progress.enabled():`` (the CLI turns it on
when stderr is a terminal and ``--no-progress`` was not given; ``render(..., progress=True)`` turns it on for
its own work). Deep stages just call :func:`bar`; nothing is threaded through their signatures.

tqdm over rich (measured here): ~0.5 us per update and ~0.1 s to import, no refresh thread.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["enabled", "is_enabled", "bar", "phase", "Bar"]

_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("rlviz_progress", default=False)


@contextmanager
def enabled(on: bool = True) -> Iterator[None]:
    """Show progress bars (``on=True``) or hide them within the block."""
    token = _ON.set(bool(on))
    try:
        yield
    finally:
        _ON.reset(token)


def is_enabled() -> bool:
    return _ON.get()


class Bar:
    """A progress bar, or nothing when progress is off. ``update(n, **postfix)``, ``close()``; a context manager."""

    def __init__(self, total: int | None, desc: str, unit: str, show: bool):
        self._bar = None
        if show:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - a dependency; degrade to silence
                return
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                             mininterval=0.25, leave=True, smoothing=0.1)

    def update(self, n: int = 1, **postfix) -> None:
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def bar(total: int | None, desc: str, unit: str = "it", show: bool | None = None) -> Bar:
    """A bar for ``total`` units of work (None: unknown); shown when progress is on (or ``show=True``)."""
    return Bar(total, desc, unit, is_enabled() if show is None else bool(show))


@contextmanager
def phase(desc: str) -> Iterator[None]:
    """A one-step bar for a phase of unknown length (loading the agent, building envs...): it appears at once
    with its elapsed time and completes when the block ends."""
    with bar(1, desc, unit="step") as b:
        yield
        b.update(1)
