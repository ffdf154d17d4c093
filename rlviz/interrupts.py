"""Ctrl-C at any moment: the few steps that must not be cut in half run with SIGINT deferred.

:func:`deferred_sigint` holds a Ctrl-C that arrives inside its block and raises it (``KeyboardInterrupt``) when the
block ends: for renames that publish a set of files together, and for imports of libraries that swallow
``KeyboardInterrupt`` (MinAtar wraps its optional imports in a bare ``except``). :func:`remembered_sigint` is for a
loop that runs until Ctrl-C (``rlviz timeline --follow``): a Ctrl-C is raised as usual and also remembered, so one
that landed where Python cannot raise it (inside a finalizer, ``__del__``: "Exception ignored in ...") or that a
library swallowed still stops the loop at its next check. Outside the main thread, or when SIGINT is not Python's
default handler (a caller's own), neither changes anything.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["deferred_sigint", "remembered_sigint"]


class _Latch:
    """A SIGINT handler that raises ``KeyboardInterrupt`` as Python's default one does, and counts the Ctrl-Cs."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: Any) -> None:
        self.count += 1
        signal.default_int_handler(signum, frame)


def _ours(handler: Any) -> bool:
    return handler is signal.default_int_handler or isinstance(handler, _Latch)


@contextmanager
def remembered_sigint() -> Iterator[Callable[[], bool]]:
    """Run the block with Ctrl-C raised as usual and remembered; yields ``came()``: whether one arrived in the block
    (the loop raises ``KeyboardInterrupt`` when it did, even if the first one was swallowed)."""
    if threading.current_thread() is not threading.main_thread() or not _ours(signal.getsignal(signal.SIGINT)):
        yield lambda: False
        return
    latch = _Latch()
    previous = signal.signal(signal.SIGINT, latch)
    try:
        yield lambda: latch.count > 0
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred_sigint() -> Iterator[None]:
    """Run the block with SIGINT held; a Ctrl-C that came meanwhile is raised as ``KeyboardInterrupt`` after it."""
    if threading.current_thread() is not threading.main_thread() or not _ours(signal.getsignal(signal.SIGINT)):
        yield
        return
    caught: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if isinstance(previous, _Latch):  # (remembered too)
            previous.count += 1
        raise KeyboardInterrupt
