"""The quiet import of a package rlviz imports on the user's behalf (an env family's, :mod:`rlviz.envs.families`)."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator

__all__ = ["quiet_import"]


@contextlib.contextmanager
def quiet_import() -> Iterator[None]:
    """A package rlviz imports on the user's behalf says nothing: Shimmy imports the old ``gym`` when it is
    installed, which prints its end-of-life banner (``gym_notices``) on stderr; GLFW warns of a missing display.
    What is printed or warned during the import is dropped (an error still raises)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield
