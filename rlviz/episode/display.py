"""HTML for notebooks: a video that plays in the cell and a small table (standard library only).

Used by the ``_repr_html_`` of :class:`~rlviz.episode.EpisodeResult` and of the jobs' outputs. A video under
:data:`INLINE_LIMIT` bytes is embedded as a ``data:`` URI (it plays in Jupyter, in nbconvert's HTML and in a
notebook moved elsewhere); a larger one is referenced by its path relative to the working directory.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

__all__ = ["INLINE_LIMIT", "video_html", "table_html"]

#: Videos up to this size are embedded in the notebook; larger ones are linked by relative path.
INLINE_LIMIT = 8 * 1024 * 1024


def video_html(path: str | os.PathLike, width: int = 480) -> str:
    """A ``<video controls>`` element for an MP4 (a data URI when small enough, else a relative path)."""
    p = Path(path)
    if not p.is_file():
        return f"<p><i>video {html.escape(str(p))} not found</i></p>"
    if p.stat().st_size <= INLINE_LIMIT:
        src = "data:video/mp4;base64," + base64.b64encode(p.read_bytes()).decode("ascii")
    else:
        src = html.escape(os.path.relpath(p).replace(os.sep, "/"))
    return (f'<video controls loop muted playsinline width="{int(width)}" src="{src}" '
            f'title="{html.escape(p.name)}"></video>')


def table_html(rows: list[tuple[str, object]]) -> str:
    """A two-column HTML table of (name, value) rows; floats get 4 significant digits."""
    cells = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
        for k, v in rows
    )
    return f"<table>{cells}</table>"


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)
