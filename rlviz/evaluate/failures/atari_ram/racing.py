"""RAM maps of racing and flying games: Freeway, Enduro, Skiing, BeamRider, Riverraid.

Addresses and offsets from OCAtari's RAM modules (Delfosse et al. 2023, https://github.com/k4ntz/OC_Atari, MIT
licence: ocatari/ram/freeway.py, enduro.py, skiing.py, beamrider.py, riverraid.py), re-checked here against
``ale.getScreenRGB()`` (see docs/atari-objects.md); the code is rlviz's own. Each map reads one RAM snapshot (no
history).
"""

from __future__ import annotations

import numpy as np

from .base import Box, RamGame, box_if
from .screen import blobs, colour_set

__all__ = ["Freeway", "Enduro", "Skiing", "BeamRider", "Riverraid"]

_CAR_COLOURS = ((167, 26, 26), (180, 231, 117), (105, 105, 15), (228, 111, 111), (24, 26, 167), (162, 98, 33),
                (84, 92, 214), (184, 50, 50), (135, 183, 84), (210, 210, 64))


class Freeway(RamGame):
    """The agent's chicken at (44, 193 - RAM[14]), 6x8; car i (0-9) at column RAM[117 - i] - 3, row 27 + 16 i, 8x10."""

    name = "freeway"
    categories = ("player", "car")
    colours = {"player": ((252, 252, 84),), "car": _CAR_COLOURS}

    def detect(self, ram: np.ndarray) -> list[Box]:
        return [Box("player", 44, 193 - int(ram[14]), 6, 8)] + [
            Box("car", int(ram[117 - i]) - 3, 27 + 16 * i, 8, 10) for i in range(10)]


#: the greys (hue 0): Enduro's road lines and the agent's car, in every light
_GREYS = colour_set(*range(0, 16, 2))


class Enduro(RamGame):
    """The agent's car at column 77 shifted by the drift RAM[46] (signed, halved) and row 89 + RAM[52], 16x11.
    The other cars, read from the screen (rows 52-157, below the mountains): what differs from its row's background
    (the grass, the snow, the night) and is not grey (the road's edges and the agent's car are greys in every
    light), joined across gaps of up to 4 px (a car at night is two tail lights)."""

    name = "enduro"
    categories = ("player", "car")
    colours = {"player": ((192, 192, 192),),
               "car": ((184, 70, 162), (66, 114, 194), (162, 162, 42), (66, 158, 130), (162, 134, 56), (198, 108, 58),
                       (110, 156, 66), (136, 146, 62), (72, 160, 72), (104, 72, 198), (66, 136, 176), (66, 72, 200),
                       (200, 72, 72))}
    screen_rows = (52, 158)

    def detect(self, ram: np.ndarray) -> list[Box]:
        d = int(ram[46])
        x = 77 + ((255 - d) >> 1) + 2 if d & 128 else 77 - (d >> 1)
        return [Box("player", x, 89 + int(ram[52]), 16, 11)]

    def read_screen(self, band: np.ndarray, ram: np.ndarray) -> list[Box]:
        return [Box("car", b.x, b.y, b.w, b.h) for b in blobs(band, self.screen_rows[0], _GREYS, gap=5)]


_TREE_COLOURS = ((110, 156, 66), (82, 126, 45), (158, 208, 101), (72, 160, 72))


class Skiing(RamGame):
    """Skier at (RAM[25], RAM[26] - 80), 10x18. Object slot i (0-7): type RAM[70 + i] (2 a pair of flags 32 px apart,
    5 a mogul, 85 a tree), column RAM[62 + i], row 178 - RAM[86 + i], height RAM[54 + i] (0 or 255: empty); a tree
    at row 172 or below is still under the bottom edge."""

    name = "skiing"
    categories = ("player", "flag", "tree", "mogul")
    colours = {"player": ((214, 92, 92),), "flag": ((66, 72, 200), (184, 50, 50)), "tree": _TREE_COLOURS,
               "mogul": ((192, 192, 192), (214, 214, 214))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[25]), int(ram[26]) - 80, 10, 18)]
        for i in range(8):
            kind, h, x, y = int(ram[70 + i]), int(ram[54 + i]), int(ram[62 + i]), 178 - int(ram[86 + i])
            if h in (0, 255) or not 0 <= y <= 177:
                continue
            if kind == 85:
                out += box_if("tree", x - 3, y + 4, 16, min(175 - y, h, 30), y < 172)  # 172+: not on screen yet
            elif kind == 5:
                out.append(Box("mogul", x + 2, y + 3, 16, min(176 - y, 7)))
            elif kind == 2:
                fh = min(173 - y, 14)
                out += [Box("flag", x + 1, y + 4, 5, fh), Box("flag", x + 33, y + 4, 5, fh)]
        return out


#: BeamRider's scenery (the beams' blue) and the agent's own shots: the lariat (purple 0x68) and the yellows
#: (hue 1: the torpedoes, and the yellow chirpers, which do no harm)
_BEAM_SCENERY = colour_set(0xA4, 0x68, *range(0x10, 0x20, 2))


class BeamRider(RamGame):
    """The agent's ship at column 1.5 RAM[41] - 115, row 167, 15x13 (it moves between five beams; its wreck is red
    for the 61 decisions from the hit to the life's loss). Read from the screen (rows 46-163, between the horizon
    and the agent's ship): the white saucers (greys: grey while far away, white when near) as ``saucer``, and every
    other craft and shot (orange, pink, red: not the beams' blue, not the agent's purple lariat nor the yellows) as
    ``enemy``; what differs from its row's background, so the full-screen flashes (a hit, a new sector) are
    background, not objects."""

    name = "beam_rider"
    categories = ("player", "saucer", "enemy")
    colours = {"player": ((210, 210, 64), (200, 72, 72)),  # (red: the wreck, until the life is taken)
               "saucer": ((74, 74, 74), (111, 111, 111), (142, 142, 142), (170, 170, 170), (192, 192, 192),
                          (214, 214, 214), (236, 236, 236)),
               "enemy": ((198, 108, 58), (184, 70, 162), (180, 122, 48), (181, 83, 40), (144, 28, 0), (163, 57, 21),
                         (213, 130, 74), (167, 26, 26), (184, 50, 50), (200, 72, 72), (214, 92, 92))}
    screen_rows = (46, 164)

    def detect(self, ram: np.ndarray) -> list[Box]:
        return [Box("player", int(int(ram[41]) * 1.5) - 115, 167, 15, 13)]

    def read_screen(self, band: np.ndarray, ram: np.ndarray) -> list[Box]:
        return [Box("saucer" if b.colour < 16 else "enemy", b.x, b.y, b.w, b.h)
                for b in blobs(band, self.screen_rows[0], _BEAM_SCENERY)]


#: River Raid's object types (RAM[32 + i]) -> (category, width, height, rows above the slot's anchor)
_RIVER_OBJECTS = {4: ("enemy", 9, 6, 15), 5: ("enemy", 8, 10, 16), 6: ("enemy", 8, 10, 16), 7: ("enemy", 17, 9, 13),
                  8: ("bridge", 33, 23, 21), 10: ("fuel", 7, 24, 23)}


def _nibble(v: int) -> int:
    """A 4-bit two's complement value."""
    return v - 16 if v & 8 else v


class Riverraid(RamGame):
    """The agent's jet at (RAM[51] + 1, 145), 7x13, while RAM[58] != 0; its missile at (RAM[117] - 1, 162 - RAM[50]),
    1x8, while RAM[117] != 0. Six object slots i (0 the lowest), each 32 rows apart, scrolled by RAM[11]: type
    RAM[32 + i] (4 jet, 5-6 helicopter, 7 tanker: enemies; 8 bridge; 10 fuel depot; houses are scenery), column
    15 RAM[20 + i] - (high nibble of RAM[26 + i], signed) + 6, row 32 (5 - i) + RAM[11] - the type's offset."""

    name = "riverraid"
    categories = ("player", "missile", "enemy", "fuel", "bridge")
    colours = {"player": ((232, 232, 74),), "missile": ((232, 232, 74),),
               "enemy": ((117, 181, 239), (0, 64, 48), (84, 160, 197)),
               "fuel": ((214, 92, 92),), "bridge": ((134, 134, 29), (105, 105, 15))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = box_if("player", int(ram[51]) + 1, 145, 7, 13, ram[58] != 0)
        out += box_if("missile", int(ram[117]) - 1, 162 - int(ram[50]), 1, 8, ram[117] != 0 and ram[50] <= 162)
        for i in range(6):
            kind = _RIVER_OBJECTS.get(int(ram[32 + i]))
            if kind is None:
                continue
            cat, w, h, off = kind
            x = 15 * int(ram[20 + i]) - _nibble(int(ram[26 + i]) >> 4) + 6
            y = 32 * (5 - i) + int(ram[11]) - off
            top, bottom = max(y, 2), min(y + h, 163)
            out += box_if(cat, x, top, w, bottom - top, bottom > top)
        return out
