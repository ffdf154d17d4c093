"""Benchmarks time trees as they are installed: with their modules compiled.

pip compiles a package's modules when it installs it, so a user's ``import rlviz`` reads ``.pyc`` files. A checkout
run under ``PYTHONDONTWRITEBYTECODE=1`` (this machine sets it) never writes them, and every benchmarked process would
compile each module it imports again: CPU and wall time no installed rlviz spends, and more of it for the tree with
more source (this one: ~1.75 MB of rlviz against 0.4.0's ~1.33 MB). :func:`compile_trees` writes the ``__pycache__``
folders first, as ``pip install`` does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["compile_trees"]


def compile_trees(*folders: Path) -> None:
    """``python -m compileall -q`` over each folder (a tree's ``rlviz/``, or any package folder)."""
    for folder in folders:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], capture_output=True, check=False)
