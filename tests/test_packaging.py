"""Packaging: the project's pyproject.toml gives setuptools nothing to warn about, and the version is one string."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import rlviz

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_applies_without_warnings():
    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import apply_configuration

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist = apply_configuration(setuptools.Distribution(), str(ROOT / "pyproject.toml"))
    assert dist.get_name() == "rlviz"
    assert dist.get_version() == rlviz.__version__
    assert dist.metadata.license_expression == "MIT"


def test_the_wheel_ships_py_typed_and_the_report_assets(tmp_path):
    """Type checkers read rlviz's annotations only when rlviz/py.typed is installed (PEP 561)."""
    import subprocess
    import sys
    import zipfile

    pytest.importorskip("setuptools")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "--wheel-dir", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("rlviz-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "rlviz/py.typed" in names
    assert {"rlviz/report/page.js", "rlviz/report/page.css"} <= names
