"""Procgen: ``procgen-*`` ids (the procgen package's own gym registration) and ``procgen/*`` ids (procgen-gym's
gymnasium port), each registered by importing its package."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("procgen", prefixes=("procgen-",), package="procgen", pip="procgen")
