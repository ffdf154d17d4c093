"""Objects read from the screen, for the games whose RAM formulas do not place them (Enduro's other cars,
BeamRider's saucers and the other craft): the rules of :meth:`RamGame.read_screen <.base.RamGame.read_screen>`.

The screen is ALE's ``getScreen()``: one byte a pixel, the 2600's colour (NTSC: the high nibble the hue, 0 the greys,
the low nibble the luminance), a 33.6 kB copy (1.4 us) where ``getScreenRGB()`` costs 50 times more. A game reads a
band of rows (``RamGame.screen_rows``); the extractor copies that band on every step beside the RAM, and the rules
run only on the steps the heatmap asks for.

:func:`blobs` is the rule the games share: a pixel is part of an object when it differs from its row's background
(the row's most common colour: the road, the grass, the sky of that row, whatever the time of day or a flash paints
it) and is none of the colours the game names as scenery; pixels closer than ``gap`` px in a row join one object
(Enduro's night cars are two tail lights), and each 8-connected group is one box with its most common colour.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Blob", "blobs", "colour_set", "row_background"]


class Blob(NamedTuple):
    """One object found on the screen: its box (``x`` column, ``y`` row on the 160x210 screen, ``w``, ``h``), its
    most common colour (a ``getScreen()`` byte) and its pixel count."""

    x: int
    y: int
    w: int
    h: int
    colour: int
    pixels: int


def row_background(band: np.ndarray) -> np.ndarray:
    """uint8 [rows]: each row's most common colour (``band`` uint8 [rows, columns])."""
    rows = band.shape[0]
    keys = np.arange(rows, dtype=np.int64)[:, None] * 256 + band
    counts = np.bincount(keys.ravel(), minlength=rows * 256).reshape(rows, 256)
    return counts.argmax(axis=1).astype(np.uint8)


def blobs(band: np.ndarray, top: int, scenery: np.ndarray, gap: int = 1, left: int = 8) -> list[Blob]:
    """The objects in ``band`` (uint8 [rows, 160]: rows ``top`` .. of ``getScreen()``): pixels that differ from their
    row's background and whose colour is not marked in ``scenery`` (bool [256]), from column ``left`` on (the 2600
    blanks columns 0-7 on lines it moves objects on), pixels up to ``gap`` - 1 px apart in a row joined."""
    import cv2  # (lazy: opencv is loaded only where a game reads the screen)

    band = np.asarray(band, dtype=np.uint8)
    mask = (band != row_background(band)[:, None]) & ~scenery[band]
    mask[:, :left] = False
    if not mask.any():
        return []
    joined = mask.astype(np.uint8)
    if gap > 1:
        joined = cv2.morphologyEx(joined, cv2.MORPH_CLOSE, np.ones((1, gap), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
    out = []
    for i in range(1, n):
        x, y, w, h, _ = (int(v) for v in stats[i])
        own = (labels[y:y + h, x:x + w] == i) & mask[y:y + h, x:x + w]
        colours = np.bincount(band[y:y + h, x:x + w][own], minlength=256)
        out.append(Blob(x, top + y, w, h, int(colours.argmax()), int(own.sum())))
    return out


def colour_set(*values: int) -> np.ndarray:
    """bool [256] marking ``values`` (``getScreen()`` bytes; the bit 0 twin of each too, which ALE never draws)."""
    out = np.zeros(256, dtype=bool)
    for v in values:
        out[int(v) & 0xFE] = out[int(v) | 1] = True
    return out
