"""The screen check of a RAM map: does each box the map reports cover pixels of its category's colour on the
screen the emulator drew (``ale.getScreenRGB()``)? Categories a game reads from the screen (``RamGame.read_screen``,
on ``ale.getScreen()``'s colour bytes) are checked the same way: their boxes must land on one of the category's
RGB colours, so a box on scenery, on the player or on a colour the map does not list misses. Used by tests/test_atari_objects.py (the hit rates it asserts)
and scripts/bench_atari_objects.py (the table in docs/atari-objects.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .base import Box, RamGame

__all__ = ["ScreenCheck", "box_hits", "check_game"]


@dataclass
class ScreenCheck:
    """Per category: ``hits`` (drawn boxes covering a pixel of the category's colour within ``margin`` px),
    ``boxes`` (drawn boxes reported), ``hidden`` (boxes the map reports as not drawn on that frame,
    ``Box.drawn`` False), ``hidden_hits`` (of those, how many held the colour all the same: the map's visibility
    was wrong) and ``steps`` checked."""

    game: str
    steps: int = 0
    hits: dict[str, int] = field(default_factory=dict)
    boxes: dict[str, int] = field(default_factory=dict)
    hidden: dict[str, int] = field(default_factory=dict)
    hidden_hits: dict[str, int] = field(default_factory=dict)

    def rate(self, category: str) -> float | None:
        """Hit rate of the drawn boxes (None when there were none)."""
        n = self.boxes.get(category, 0)
        return self.hits.get(category, 0) / n if n else None

    def hidden_share(self, category: str) -> float:
        """Share of the category's boxes reported as not drawn."""
        n = self.boxes.get(category, 0) + self.hidden.get(category, 0)
        return self.hidden.get(category, 0) / n if n else 0.0


def box_hits(screen: np.ndarray, box: Box, colours, margin: int = 1) -> bool:
    """True when ``box`` widened by ``margin`` px holds a pixel of one of ``colours`` on ``screen`` uint8 [210, 160, 3]."""
    h, w = screen.shape[:2]
    r0, r1 = max(box.y - margin, 0), min(box.y + box.h + margin, h)
    c0, c1 = max(box.x - margin, 0), min(box.x + box.w + margin, w)
    if r0 >= r1 or c0 >= c1:
        return False
    sub = screen[r0:r1, c0:c1].astype(np.int32)
    packed = (sub[..., 0] << 16) | (sub[..., 1] << 8) | sub[..., 2]
    want = np.array([(r << 16) | (g << 8) | b for r, g, b in colours], dtype=np.int32)
    return bool(np.isin(packed, want).any())


def check_game(game: RamGame, env, steps: int, act: Callable[[int], int], margin: int = 1, repeat: int = 4) -> ScreenCheck:
    """Step ``env`` (an ALE env without frame skip, reset by the caller) ``steps`` decisions of ``act(t)``, each
    repeated ``repeat`` frames (as frame skip 4 does), resetting when an episode ends, and check every box on each
    decision's last frame. Categories in ``game.flicker`` (drawn on alternate frames) hit when the box covers their
    colour on that frame or the one before. Boxes the map reports as not drawn (``Box.drawn`` False) are counted
    in ``hidden``, and in ``hidden_hits`` when the frame shows the category's colour in them all the same."""
    ale = env.unwrapped.ale
    out = ScreenCheck(game.name)
    for t in range(steps):
        a, prev, ended = act(t), None, False
        for k in range(repeat):
            if k == repeat - 1:
                prev = ale.getScreenRGB()
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                env.reset()
                ended = True
                break
        if ended:
            continue
        screen = ale.getScreenRGB()
        for b in game.objects(np.asarray(ale.getRAM(), dtype=np.int64), game.band(ale.getScreen())):
            colours = game.colours[b.category]
            if not b.drawn:
                out.hidden[b.category] = out.hidden.get(b.category, 0) + 1
                if box_hits(screen, b, colours, margin):
                    out.hidden_hits[b.category] = out.hidden_hits.get(b.category, 0) + 1
                continue
            out.boxes[b.category] = out.boxes.get(b.category, 0) + 1
            if box_hits(screen, b, colours, margin) or (
                    b.category in game.flicker and prev is not None and box_hits(prev, b, colours, margin)):
                out.hits[b.category] = out.hits.get(b.category, 0) + 1
        out.steps += 1
    return out
