"""RAM maps of shooters: SpaceInvaders, Seaquest, Asterix.

Addresses and offsets from OCAtari's RAM modules (Delfosse et al. 2023, https://github.com/k4ntz/OC_Atari, MIT
licence: ocatari/ram/spaceinvaders.py, seaquest.py, asterix.py), re-checked here
against ``ale.getScreenRGB()`` (see docs/atari-objects.md); the code is rlviz's own. OCAtari tracks these games'
objects across steps; the maps here read one RAM snapshot each (no history), keeping only what one snapshot tells.
"""

from __future__ import annotations

import numpy as np

from .base import Box, RamGame, box_if

__all__ = ["SpaceInvaders", "Seaquest", "Asterix"]


class SpaceInvaders(RamGame):
    """Cannon at column RAM[28] - 1, row 185 (7x10); while a new cannon waits (RAM[42] == 1: the start of a game
    and after a life is lost) it blinks, drawn while bit 3 of its countdown RAM[74] is set. Aliens: a 6x6 grid whose
    row bitmaps are RAM[23] (top) to RAM[18] (bottom), bit 0 the leftmost column (the lowest bit set in any row is
    the leftmost column present), the grid's top-left at column RAM[26] - 1 and row 31 + 2 RAM[16], 16 px and 18 px
    apart, 8x10 each. Shots: the cannon's at (RAM[87] - 2, 2 RAM[85] + 3), the aliens' bombs at (RAM[83 + i] - 2,
    2 RAM[81 + i] + 3) (1x10; shown while the row is within 20-195). UFO at column RAM[30] - 1, row 12, while
    RAM[30] is neither 0 nor 180."""

    name = "space_invaders"
    categories = ("player", "alien", "shot", "bomb", "ufo")
    colours = {"player": ((50, 132, 50),), "alien": ((134, 134, 29),), "shot": ((142, 142, 142),),
               "bomb": ((142, 142, 142),), "ufo": ((151, 25, 122),)}
    flicker = ("shot", "bomb")

    def detect(self, ram: np.ndarray) -> list[Box]:
        blink_off = ram[42] == 1 and not int(ram[74]) & 8
        out = [Box("player", int(ram[28]) - 1, 185, 7, 10, not blink_off)]
        rows = [int(v) & 63 for v in ram[23:17:-1]]  # top row first: RAM[23] is the top row, RAM[18] the bottom
        union = 0
        for bits in rows:
            union |= bits
        empty_left = (union & -union).bit_length() - 1 if union else 0  # columns gone from the left shift the anchor
        x0, y0 = int(ram[26]) - 1, 31 + 2 * int(ram[16])
        for i, bits in enumerate(rows):
            for j in range(6):
                if bits >> j & 1:
                    out.append(Box("alien", x0 + (j - empty_left) * 16, y0 + i * 18, 8, 10))
        for cat, xa, ya in (("shot", 87, 85), ("bomb", 83, 81), ("bomb", 84, 82)):
            y = 2 * int(ram[ya]) + 3
            out += box_if(cat, int(ram[xa]) - 2, y, 1, min(10, 195 - y), 20 < y < 195)
        return out + box_if("ufo", int(ram[30]) - 1, 12, 7, 8, ram[30] not in (0, 180))


class Seaquest(RamGame):
    """Submarine (player) at (RAM[70], RAM[97] + 33), 16x11, also while it is destroyed (RAM[105] counts the death
    animation down from 22: it blinks black at 22-15, drawn in its colour on odd counts, and is gone at 14-1;
    reported there as not drawn, since the heatmap wants where it was when the life was lost). Lane i (0 bottom ..
    3 top, rows 141 - 24 i): three slots, slot j present when bit 2 - j of RAM[36 + i] is set, at column
    RAM[30 + i] + 16 j; the lane holds submarines when 3 < RAM[89 + i] % 8 < 7, else sharks (8x7, row + RAM[93] - 4).
    RAM[71 + i] (lane 3 - i) is the column of that lane's enemy torpedo (submarine lanes) or diver. The player's
    torpedo at (RAM[103], RAM[97] + 40) while 0 < RAM[103] < 160; the surface submarine at (RAM[118], 45)."""

    name = "seaquest"
    categories = ("player", "shark", "submarine", "diver", "missile", "enemy_missile")
    colours = {"player": ((187, 187, 53), (236, 236, 236)), "submarine": ((170, 170, 170),), "diver": ((66, 72, 200),),
               "missile": ((187, 187, 53),), "enemy_missile": ((66, 72, 200),),
               "shark": ((92, 186, 92), (160, 171, 79), (213, 130, 74), (170, 170, 170), (210, 210, 64),
                         (24, 26, 167), (198, 108, 58), (160, 107, 50), (72, 160, 72), (66, 72, 200),
                         (101, 111, 228), (84, 138, 210), (181, 83, 40), (168, 48, 143), (200, 72, 72),
                         (111, 210, 111), (236, 236, 236), (214, 92, 92), (227, 151, 89), (45, 109, 152))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        dying = int(ram[105])
        out = [Box("player", int(ram[70]), int(ram[97]) + 33, 16, 11, dying == 0 or (dying > 14 and dying % 2 == 1))]
        for i in range(4):
            sub = 3 < int(ram[89 + i]) % 8 < 7
            for j in range(3):
                if int(ram[36 + i]) >> (2 - j) & 1:
                    x = (int(ram[30 + i]) + 16 * j) % 256
                    if 8 <= x < 160:  # (columns 0-7: under the black border; 160-255: off the right edge)
                        if sub:
                            out.append(Box("submarine", x, 141 - 24 * i, 8, 11))
                        else:
                            out.append(Box("shark", x, 141 - 24 * i + int(ram[93]) - 4, 8, 7))
            lane = 3 - i
            col = int(ram[74 - i])
            if 0 < col < 160:
                if 3 < int(ram[89 + lane]) % 8 < 7:
                    out.append(Box("enemy_missile", col + 3, 145 - lane * 24, 6, 4))
                else:
                    out.append(Box("diver", col, 141 - lane * 24, 8, 11))
        out += box_if("missile", int(ram[103]), int(ram[97]) + 40, 8, 1, 0 < ram[103] < 160)
        return out + box_if("submarine", int(ram[118]), 45, 8, 11, ram[60] >= 2 and ram[118] < 160)


class Asterix(RamGame):
    """Player at (RAM[41], 26 + 16 RAM[39]), 8x11. Lane i (0-7, row 26 + 16 i), column RAM[42 + i]: empty when
    RAM[18 - i] is 11; a reward when RAM[73 + i] != 0; an enemy (lyre) when RAM[29 + i] is odd; else an item
    (cauldron, helmet, ...) to collect."""

    name = "asterix"
    categories = ("player", "enemy", "item")
    colours = {"player": ((187, 187, 53),), "enemy": ((228, 111, 111),),
               "item": ((200, 200, 200), (214, 92, 92), (184, 50, 50), (198, 108, 58), (210, 210, 64),
                        (84, 138, 210), (236, 236, 236), (187, 187, 53), (135, 183, 84), (160, 171, 79), (170, 170, 170),
                        (198, 89, 179), (127, 92, 213))}
    flicker = ("enemy", "item")

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[41]), 26 + 16 * int(ram[39]), 8, 11)]
        for i in range(8):
            if ram[18 - i] == 11:
                continue
            x, y = int(ram[42 + i]), 26 + 16 * i
            if ram[73 + i]:
                out.append(Box("item", x, y, 8, 11))
            elif int(ram[29 + i]) % 2 == 1:
                out.append(Box("enemy", x, y, 7, 11))
            else:
                out.append(Box("item", x + 1, y + 1, 7, 11))
        return out
