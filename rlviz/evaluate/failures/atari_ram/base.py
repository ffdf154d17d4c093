"""The RAM object extractor: where an Atari game's objects are, read from the console's 128 bytes of RAM.

A game is a :class:`RamGame`: its object categories (named as players name them: player, enemy, ball, missile, ...),
the colours each category is drawn in (used by the screen check in tests/test_atari_objects.py and the docs), and
``detect(ram) -> [Box]``: every object on screen as a box in the 160x210 screen (x = column, y = row of the top-left
corner, w, h), a pure function of one RAM snapshot, so detection needs no history and runs only on the steps the
heatmap asks for (the lookback before failures). ``ram`` is ``int64 [128]`` (cast once from the emulator's uint8,
so arithmetic never wraps under numpy 1 or 2).

:class:`RamExtractor` is the :class:`~rlviz.evaluate.failures.objects.Extractor`: ``capture`` copies the RAM (128 bytes, on
every step; the RAM is the same ALE's under frame skip, sticky actions, AtariPreprocessing and frame stacking),
``masks`` runs detection and paints each category's boxes into a bool ``[210, 160]`` mask (scaled to the rendered
frame when it has another size).

Where the RAM formulas do not place a game's objects (Enduro's other cars, BeamRider's saucers), the game reads them
from the screen: ``screen_rows`` names the band of rows it reads, ``capture`` then also copies that band of
``ale.getScreen()`` (one colour byte a pixel: 160 bytes a row), and :meth:`RamGame.read_screen` finds the objects in
it (rules in :mod:`.screen`), again only on the steps the heatmap asks for. Games without ``screen_rows`` capture
the RAM alone, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ....errors import UsageError
from ..extractor import Extractor

__all__ = ["Box", "RamGame", "RamExtractor", "SCREEN", "box_if"]

#: (rows, columns) of the ALE screen
SCREEN = (210, 160)


class Box(NamedTuple):
    """One object: ``category`` and its box on the 160x210 screen (``x`` column and ``y`` row of the top-left
    corner, width ``w`` and height ``h`` in pixels; may reach past the screen's edges, painted clipped).
    ``drawn``: False when the RAM says the object is there but not drawn on this frame (a blink after a new life,
    a death animation, a flicker phase): the masks still hold it (the heatmap wants where the player was when the
    life was lost), and the screen check counts it apart, as *hidden*, requiring that it misses its colour."""

    category: str
    x: int
    y: int
    w: int
    h: int
    drawn: bool = True


class RamGame:
    """One game's RAM map. Subclasses set ``name`` (ALE's ROM name, e.g. ``"space_invaders"``), ``categories``
    (panel order), ``colours`` ({category: RGB triples it is drawn in}) and implement :meth:`detect`.
    ``flicker``: categories drawn only on some frames (the screen check counts them as documented in the docs page).
    ``substitute``: the game this map stands in for, when a requested game has no published map.
    ``screen_rows``: (first, end) rows of the screen that :meth:`read_screen` reads; None (most games): RAM only."""

    name: str = ""
    categories: tuple[str, ...] = ()
    colours: dict[str, tuple[tuple[int, int, int], ...]] = {}
    flicker: tuple[str, ...] = ()
    screen_rows: tuple[int, int] | None = None

    def detect(self, ram: np.ndarray) -> list[Box]:
        """``ram``: int64 [128] -> the objects on screen."""
        raise NotImplementedError

    def read_screen(self, band: np.ndarray, ram: np.ndarray) -> list[Box]:
        """The objects read from the screen: ``band`` uint8 [rows, 160], rows ``screen_rows`` of ``ale.getScreen()``
        (colour bytes), ``ram`` as in :meth:`detect`; boxes in screen coordinates. Only games with ``screen_rows``."""
        return []

    def band(self, screen: np.ndarray) -> np.ndarray | None:
        """The rows of ``screen`` (``ale.getScreen()``, uint8 [210, 160]) that :meth:`read_screen` reads, copied;
        None for a game that reads none."""
        if self.screen_rows is None:
            return None
        return np.array(screen[self.screen_rows[0]:self.screen_rows[1]], dtype=np.uint8, copy=True)

    def objects(self, ram: np.ndarray, band: np.ndarray | None = None) -> list[Box]:
        """All the game's objects: :meth:`detect` on the RAM, then :meth:`read_screen` on the band (when given)."""
        out = self.detect(ram)
        if band is not None and self.screen_rows is not None:
            out += self.read_screen(band, ram)
        return out


def box_if(category: str, x: int, y: int, w: int, h: int, visible: bool, drawn: bool = True) -> list[Box]:
    """``[Box(...)]`` when ``visible``, else ``[]`` (a helper for objects that come and go)."""
    return [Box(category, int(x), int(y), int(w), int(h), bool(drawn))] if visible else []


class RamExtractor(Extractor):
    """Objects of an ALE game from its RAM (no rendering). ``game``: a :class:`RamGame`, or None to pick the game
    from the env on the first capture (``env.unwrapped._game``, ALE's ROM name). ``frame_shape`` (set by the
    rollout from a rendered frame): masks are painted at that size when frames are not 210x160."""

    needs_frame = False

    def __init__(self, game: RamGame | None = None, lookup: Callable[[str], RamGame | None] | None = None):
        self.game = game
        self.lookup = lookup  # ALE's ROM name -> a fresh map (registry.game_for_rom), for game=None
        self.frame_shape: tuple[int, int] | None = None

    @property
    def names(self) -> tuple[str, ...]:  # type: ignore[override]  # read-only: the game's categories
        return self.game.categories if self.game is not None else ()

    def _resolve(self, env) -> RamGame:
        if self.game is None:
            rom = str(getattr(getattr(env, "unwrapped", env), "_game", ""))
            game = self.lookup(rom) if self.lookup is not None else None
            if game is None:
                raise UsageError(f"--objects ram: {env!r} (ROM {rom!r}) has no RAM object map in rlviz; "
                                 "see docs/atari-objects.md for the games that have one, or use --objects pixels.")
            self.game = game
        return self.game

    def capture(self, frame, env):
        game = self._resolve(env)
        ale = getattr(getattr(env, "unwrapped", env), "ale", None)
        if ale is None:
            raise UsageError(f"{env!r} is not an ALE env (no unwrapped.ale); the RAM object extractor reads ALE's RAM.")
        ram = np.array(ale.getRAM(), dtype=np.uint8, copy=True)  # 128 bytes a step
        if game.screen_rows is None:
            return ram
        return ram, game.band(ale.getScreen())  # and the band of screen rows the game reads (160 bytes a row)

    def boxes(self, ram: np.ndarray, band: np.ndarray | None = None) -> list[Box]:
        """The game's objects in one RAM snapshot (uint8 [128]) and, for a game that reads the screen, the band of
        screen rows captured with it."""
        if self.game is None:
            raise UsageError("RamExtractor.boxes() before the game is known; capture a frame of the env first.")
        return self.game.objects(np.asarray(ram, dtype=np.int64), band)

    def masks(self, captured) -> dict[str, np.ndarray]:
        shape = tuple(self.frame_shape[:2]) if self.frame_shape is not None else SCREEN
        out = {c: np.zeros(shape, dtype=bool) for c in self.names}
        fy, fx = shape[0] / SCREEN[0], shape[1] / SCREEN[1]
        ram, band = captured if isinstance(captured, tuple) else (captured, None)
        for b in self.boxes(ram, band):
            if b.category not in out or b.w <= 0 or b.h <= 0:
                continue
            r0, r1 = max(round(b.y * fy), 0), min(round((b.y + b.h) * fy), shape[0])
            c0, c1 = max(round(b.x * fx), 0), min(round((b.x + b.w) * fx), shape[1])
            if r0 < r1 and c0 < c1:
                out[b.category][r0:r1, c0:c1] = True
        return out
