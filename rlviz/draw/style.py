"""Colours, font and text drawing shared by every panel (OpenCV Hershey fonts, ASCII only)."""

from __future__ import annotations

import unicodedata

import cv2
import numpy as np

__all__ = ["COLORS", "FONT", "put_text", "text_width", "short", "ceil16", "wrap_text"]

#: Panel colours (RGB).
COLORS = {
    "background": (22, 24, 30),
    "plot": (34, 37, 46),
    "grid": (70, 74, 86),
    "text": (225, 228, 235),
    "dim": (140, 146, 160),
    "bar": (92, 132, 200),
    "chosen": (255, 176, 40),
    "track": (48, 52, 64),
    "value": (90, 200, 255),
    "return": (255, 120, 200),
    "reward": (120, 230, 120),
    "cursor": (200, 200, 200),
    "entropy": (180, 140, 255),
    "mean": (250, 250, 250),
    "masked": (150, 44, 56),
    "quantile": (150, 255, 200),
}
#: Colours of the user's extra curves, in order.
EXTRA_COLORS = ((255, 210, 80), (120, 230, 120), (255, 120, 120), (150, 220, 220))
FONT = cv2.FONT_HERSHEY_SIMPLEX
_ASCII = str.maketrans({"\u00b7": "-", "\u2022": "-", "\u03b3": "gamma", "\u2013": "-", "\u2014": "-"})

__all__ += ["EXTRA_COLORS"]


def ceil16(n: int) -> int:
    return -(-int(n) // 16) * 16


def short(name: str, n: int = 12) -> str:
    return str(name) if len(str(name)) <= n else str(name)[: n - 1] + "."


def text_width(s: str, scale: float) -> int:
    return cv2.getTextSize(s, FONT, scale, 1)[0][0]


def put_text(img: np.ndarray, s: str, x, y, color="text", scale: float = 0.45) -> None:
    """Draw ``s`` with its baseline at (x, y); ``color`` a COLORS key or an RGB tuple."""
    if not s.isascii():  # Hershey fonts draw ASCII only
        s = unicodedata.normalize("NFKD", s.translate(_ASCII)).encode("ascii", "ignore").decode()
    rgb = COLORS[color] if isinstance(color, str) else color
    cv2.putText(img, s, (int(x), int(y)), FONT, scale, rgb, 1, cv2.LINE_AA)


def wrap_text(s: str, width: int, scale: float, max_lines: int = 3) -> list[str]:
    """``s`` broken at spaces into lines at most ``width`` pixels wide at ``scale`` (a word longer than a line is cut;
    text beyond ``max_lines`` lines ends the last one with "...")."""
    lines: list[str] = []
    for word in str(s).split():
        while text_width(word, scale) > width and len(word) > 1:  # (a word wider than a line: cut to fit)
            word = word[:-1]
        if lines and text_width(lines[-1] + " " + word, scale) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        while last and text_width(last + "...", scale) > width:
            last = last[:-1]
        lines = lines[: max_lines - 1] + [last + "..."]
    return lines
