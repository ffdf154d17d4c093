"""The documentation site: every ```python block of docs/*.md runs as pasted (as the README's do, in
tests/test_readme.py: a fresh interpreter, an empty folder with the repository's samples/ beside it), and
``mkdocs build --strict`` passes (a broken link or anchor, a page missing from the nav, an API entry that does not
resolve fails it) with an entry for each of the main names."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
_README_BLOCKS = set(_FENCE.findall((ROOT / "README.md").read_text()))
#: (page:N, code) for each python block of the pages, those the README also holds left to tests/test_readme.py
BLOCKS = [(f"{page.name}:{i + 1}", code)
          for page in sorted(DOCS.glob("*.md"))
          for i, code in enumerate(_FENCE.findall(page.read_text()))
          if code not in _README_BLOCKS]
#: the API reference's entries the issue asks for (render and compare under their modules' names: the package
#: root's ``rlviz.render`` is also a module path, which mkdocstrings would document instead)
API_IDS = ("rlviz.RecordEpisode", "rlviz.jobs.render.render", "rlviz.jobs.compare.compare", "rlviz.load_agent",
           "rlviz.save_checkpoint")


def run_snippet(snippets, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a user would paste it: ``cwd`` holds a link to samples/, rlviz comes from this checkout (its
    own process, forked from one that imported torch & co: tests/_snippets.py)."""
    (cwd / "samples").symlink_to(ROOT / "samples")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return snippets.run(code, cwd, env, timeout=300)


def test_the_pages_have_python_blocks():
    assert len(BLOCKS) >= 8, [name for name, _ in BLOCKS]


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_docs_python_block_runs_as_pasted(name, code, tmp_path, snippets):
    proc = run_snippet(snippets, code, tmp_path)
    assert proc.returncode == 0, f"{name} failed:\n{code}\n{proc.stderr[-2000:]}"


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == set(re.findall(r":\s*([\w-]+\.md)\s*$", nav, flags=re.M)), pages


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings")),
                    reason='mkdocs, mkdocs-material or mkdocstrings[python] not installed: pip install -e ".[docs]"')
def test_mkdocs_build_strict_passes_with_the_api_entries(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    api = (site / "api" / "index.html").read_text()
    for name in API_IDS:
        assert f'id="{name}"' in api, name
    assert (site / "img" / "still.png").stat().st_size == (ROOT / "samples" / "still.png").stat().st_size
