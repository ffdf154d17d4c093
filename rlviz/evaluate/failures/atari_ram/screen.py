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
    keys = (np.arange(rows, dtype=np.int32) << 8)[:, None] + band
    counts = np.bincount(keys.ravel(), minlength=rows << 8).reshape(rows, 256)
    return counts.argmax(axis=1).astype(np.uint8)


def blobs(band: np.ndarray, top: int, scenery: np.ndarray, gap: int = 1, left: int = 8,
          background: np.ndarray | None = None) -> list[Blob]:
    """The objects in ``band`` (uint8 [rows, 160]: rows ``top`` .. of ``getScreen()``): pixels that differ from their
    row's background and whose colour is not marked in ``scenery`` (bool [256]), from column ``left`` on (the 2600
    blanks columns 0-7 on lines it moves objects on), pixels up to ``gap`` - 1 px apart in a row joined.
    ``background``: :func:`row_background` of ``band``, when the caller has it already."""
    import cv2  # (lazy: opencv is loaded only where a game reads the screen)

    band = np.ascontiguousarray(band, dtype=np.uint8)
    if background is None:
        background = row_background(band)
    objects = cv2.LUT(band, (~scenery).view(np.uint8)).view(bool)  # (a table look-up: faster than scenery[band])
    mask = (band != background[:, None]) & objects
    mask[:, :left] = False
    rows = np.flatnonzero(mask.any(axis=1))
    if not len(rows):
        return []
    r0 = int(rows[0])
    mask, band = mask[r0:int(rows[-1]) + 1], band[r0:int(rows[-1]) + 1]  # (the rows with objects only)
    joined = np.ascontiguousarray(mask).view(np.uint8)
    closed = cv2.morphologyEx(joined, cv2.MORPH_CLOSE, np.ones((1, gap), np.uint8)) if gap > 1 else joined
    n, labels, stats, _ = cv2.connectedComponentsWithStats(closed, connectivity=8)
    # each object's most common colour and pixel count, over its own pixels (not the gaps joined), in one pass
    counts = np.bincount((labels[mask] << 8) + band[mask], minlength=n << 8).reshape(n, 256)
    colours, pixels = counts.argmax(axis=1), counts.sum(axis=1)
    return [Blob(int(x), top + r0 + int(y), int(w), int(h), int(colours[i]), int(pixels[i]))
            for i, (x, y, w, h, _) in enumerate(stats) if i]


def colour_set(*values: int) -> np.ndarray:
    """bool [256] marking ``values`` (``getScreen()`` bytes; the bit 0 twin of each too, which ALE never draws)."""
    out = np.zeros(256, dtype=bool)
    for v in values:
        out[int(v) & 0xFE] = out[int(v) | 1] = True
    return out
