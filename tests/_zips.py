"""Tampered SB3 zips for the safety tests: the same file with its ``data`` JSON edited."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path


def rewrite_sb3_data(path, out: Path, edit) -> Path:
    """Copy the SB3 zip ``path`` to ``out`` with ``edit(doc)`` applied to its ``data`` JSON (in place); returns ``out``."""
    with zipfile.ZipFile(path) as src:
        doc = json.loads(src.read("data"))
        edit(doc)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as dst:
            for member in src.namelist():
                dst.writestr(member, json.dumps(doc) if member == "data" else src.read(member))
    out.write_bytes(buf.getvalue())
    return out
