"""Ctrl-C at any moment: the few steps that must not be cut in half run with SIGINT deferred.

:func:`deferred_sigint` holds a Ctrl-C that arrives inside its block and raises it (``KeyboardInterrupt``) when the
block ends: for renames that publish a set of files together, and for imports of libraries that swallow
``KeyboardInterrupt`` (MinAtar wraps its optional imports in a bare ``except``). Outside the main thread, or when
SIGINT is not Python's default handler (a caller's own), it changes nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["deferred_sigint"]


@contextmanager
def deferred_sigint() -> Iterator[None]:
    """Run the block with SIGINT held; a Ctrl-C that came meanwhile is raised as ``KeyboardInterrupt`` after it."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
