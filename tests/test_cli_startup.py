"""The CLI's start-up: modules that dependencies import only for viewers rlviz never opens are imported on first
use (:func:`rlviz.cli.prepare_imports`), without changing any output."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlviz.cli import prepare_imports
from rlviz.jobs.render import render

ROOT = Path(__file__).resolve().parents[1]
MINATAR = ROOT / "samples" / "minatar_breakout_ppo.pt2"


@pytest.fixture
def heavy_package(tmp_path, monkeypatch):
    """A package ``heavypkg`` with a module ``heavypkg.plot`` that writes a marker file when it is imported."""
    pkg = tmp_path / "heavypkg"
    pkg.mkdir()
    marker = tmp_path / "imported"
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('pkg ')\nVALUE = 7\n")
    (pkg / "plot.py").write_text(f"open({str(marker)!r}, 'a').write('plot ')\ndef palette(n):\n    return [n] * n\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    for name in ("heavypkg", "heavypkg.plot"):
        sys.modules.pop(name, None)


def test_a_deferred_module_is_imported_at_its_first_use(heavy_package):
    prepare_imports(("heavypkg", "no_such_module_here"))
    assert "no_such_module_here" not in sys.modules  # not installed: left for its importer to fail on
    import heavypkg as h  # (as MinAtar imports seaborn)

    inspect.getframeinfo(sys._getframe())  # walks sys.modules (as torch's import does): imports nothing
    assert importlib.util.find_spec("heavypkg").origin == str(heavy_package.parent / "heavypkg" / "__init__.py")
    assert not heavy_package.exists()
    assert h.VALUE == 7  # first use: the real module, which replaces the stand-in
    assert heavy_package.read_text() == "pkg " and type(sys.modules["heavypkg"]) is type(sys)


def test_a_deferred_submodule_is_imported_at_its_first_use(heavy_package):
    import heavypkg

    prepare_imports(("heavypkg.plot",))
    from heavypkg import plot  # (as MinAtar imports matplotlib's pyplot)

    assert heavy_package.read_text() == "pkg "
    assert plot.palette(2) == [2, 2]
    assert heavy_package.read_text() == "pkg plot " and heavypkg.plot is sys.modules["heavypkg.plot"]


def test_an_already_imported_module_is_left_alone(heavy_package):
    import heavypkg

    prepare_imports(("heavypkg",))
    assert sys.modules["heavypkg"] is heavypkg and heavy_package.read_text() == "pkg "


def _cli(args: list[str]) -> str:
    """Run the CLI in a fresh interpreter; return which deferred modules it really imported."""
    code = ("import sys; from rlviz.cli import main, DEFERRED_IMPORTS\n"
            f"assert main({args!r}) == 0\n"
            "print(sorted(n for n in DEFERRED_IMPORTS if type(sys.modules.get(n)).__name__ == 'module'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_minatar_without_frames_never_imports_seaborn_and_with_them_draws_the_same(tmp_path):
    plain = ["render", str(MINATAR), "--episodes", "3", "--videos", "none", "--no-progress", "--out"]
    assert _cli(plain + [str(tmp_path / "a")]) == "[]"
    assert _cli(plain + [str(tmp_path / "b"), "--heatmap"]) == "['matplotlib.pyplot', 'seaborn']"  # the background frame, the plot
    # the same run in this process, seaborn imported as MinAtar does it: the same background and counts
    pytest.importorskip("seaborn")
    render(checkpoint=str(MINATAR), episodes=3, videos="none", heatmap=True, out=str(tmp_path / "c"))
    b, c = np.load(tmp_path / "b" / "heatmap.npz"), np.load(tmp_path / "c" / "heatmap.npz")
    assert sorted(b.files) == sorted(c.files) and b["background"].any()
    for key in b.files:
        assert np.array_equal(b[key], c[key]), key
    assert (tmp_path / "b" / "episodes.csv").read_bytes() == (tmp_path / "c" / "episodes.csv").read_bytes()
