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
