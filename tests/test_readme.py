"""The README's Python snippets run as pasted: each ```python block, in a fresh interpreter, in an empty folder
that has the repository's samples/ beside it (as a user who cloned the repository and cd'd into it would)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M)


def test_the_readme_has_python_snippets():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_snippet_runs_as_pasted(index, tmp_path, snippets):
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = snippets.run(BLOCKS[index], tmp_path, env, timeout=300)  # (forked from a preloaded one: tests/_snippets.py)
    assert proc.returncode == 0, f"README snippet {index + 1} failed:\n{BLOCKS[index]}\n{proc.stderr[-2000:]}"
