"""procgen-gym, Procgen's gymnasium port: ``procgen/*`` ids, registered by ``import procgen_gym``."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family("procgen-gym", prefixes=("procgen/",), package="procgen_gym", pip="procgen-gym")
