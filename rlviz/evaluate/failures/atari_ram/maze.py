"""RAM maps of maze and platform games: MsPacman, Qbert, MontezumaRevenge, Pitfall, Venture, Kangaroo, Frostbite.

Addresses and offsets from OCAtari's RAM modules (Delfosse et al. 2023, https://github.com/k4ntz/OC_Atari, MIT
licence: ocatari/ram/mspacman.py, qbert.py, montezumarevenge.py, pitfall.py, venture.py, kangaroo.py,
frostbite.py), re-checked here against ``ale.getScreenRGB()`` (see docs/atari-objects.md); the code is rlviz's own.
Each map reads one RAM snapshot (no history): objects OCAtari can only follow across steps (Q*bert's balls and Sam,
the room objects of Montezuma's Revenge and Pitfall) are left out, as the docs page lists.
"""

from __future__ import annotations

import numpy as np

from .base import Box, RamGame, box_if
from .screen import blobs, colour_set, row_background

__all__ = ["MsPacman", "Qbert", "MontezumaRevenge", "Pitfall", "Venture", "Kangaroo", "Frostbite"]


class MsPacman(RamGame):
    """Ms. Pac-Man at (RAM[10] - 13, RAM[16] + 1), 9x10. Ghost k (0-3) at (RAM[6 + k] - 13, RAM[12 + k] + 1) while
    RAM[47] > 0, the second to fourth only while RAM[19] >= k (not drawn while RAM[25] is 0: Ms. Pac-Man's death);
    the fruit at (RAM[11] - 13, RAM[17] + 1) while RAM[11] and RAM[17] are not 0."""

    name = "ms_pacman"
    categories = ("player", "ghost", "fruit")
    colours = {"player": ((210, 164, 74),),
               "ghost": ((200, 72, 72), (198, 89, 179), (84, 184, 153), (180, 122, 48), (66, 114, 194),
                         (214, 214, 214)),
               "fruit": ((184, 50, 50), (198, 89, 179), (180, 122, 48), (162, 162, 42), (184, 70, 162),
                         (135, 183, 84), (184, 50, 50), (214, 214, 214))}
    flicker = ("ghost", "fruit")

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[10]) - 13, int(ram[16]) + 1, 9, 10)]
        if ram[47] > 0:
            shown = ram[25] != 0  # 0: Ms. Pac-Man's death, the ghosts gone from the screen
            for k in range(4):
                if k == 0 or ram[19] >= k:
                    out.append(Box("ghost", int(ram[6 + k]) - 13, int(ram[12 + k]) + 1, 9, 10, bool(shown)))
        return out + box_if("fruit", int(ram[11]) - 13, int(ram[17]) + 1, 9, 10, ram[11] > 0 and ram[17] > 0)


def _qbert_column(v: int) -> int:
    """Q*bert's enemy column: 13 px for the first two steps of the RAM counter, 16 for the seventh, else 12."""
    return sum(13 if i <= 1 else 16 if i == 6 else 12 for i in range(v + 1))


class Qbert(RamGame):
    """Q*bert at (RAM[43] - 3, RAM[67] - 8/7/6) (by height: rows < 70, < 100, else), 8x20, while 16 < RAM[67] < 210
    and not falling off (RAM[59] != 255). Coily (the snake, or its egg) at (column of RAM[71], 30 RAM[39] + 6..11)
    while RAM[39] != 255, its height by its animation RAM[56]."""

    name = "qbert"
    categories = ("player", "enemy")
    colours = {"player": ((181, 83, 40),), "enemy": ((146, 70, 192),)}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out: list[Box] = []
        y = int(ram[67])
        if 16 < y < 210 and ram[59] != 255:
            out.append(Box("player", int(ram[43]) - 3, y - (8 if y < 70 else 7 if y < 100 else 6), 8, 20))
        if ram[39] != 255:
            a = int(ram[56])
            dy, h = (6, 21) if a > 8 or a == 1 else (9, 18) if a > 6 or a <= 3 else (11, 16)
            out.append(Box("enemy", _qbert_column(int(ram[71])), 30 * int(ram[39]) + dy, 8, h))
        return out


class MontezumaRevenge(RamGame):
    """Panama Joe at (RAM[42] - 1, 308 - RAM[43]), 8x20. Room RAM[3]. Enemies: in the first room (1) the rolling
    skull at (RAM[47] + 32, 406 - RAM[46]) while bit 1 of RAM[67] is set; in other rooms below 16, while
    4 < RAM[49] < 11 (5 a skull, 6-8 snakes, 9-10 a spider), one at (RAM[44] - 1, base + 255 - RAM[45], 4 or 8 rows
    lower when RAM[45] < 216; base 55 in room 0, 54 in room 7, 53 elsewhere) and a second 16, 32 or 64 px right by
    RAM[84]'s bits 0-2. (Items, lasers and ropes: per-room tables in OCAtari; not mapped here.)"""

    name = "montezuma_revenge"
    categories = ("player", "enemy")
    colours = {"player": ((210, 164, 74), (228, 111, 111), (200, 72, 72), (92, 186, 92)),
               "enemy": ((236, 236, 236), (192, 192, 192), (92, 186, 92))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[42]) - 1, 308 - int(ram[43]), 8, 20)]
        room, kind = int(ram[3]), int(ram[49])
        if room == 1:
            out += box_if("enemy", int(ram[47]) + 32, 406 - int(ram[46]), 7, 13, int(ram[67]) & 2 != 0)
        elif room < 16 and 4 < kind < 11:
            x = int(ram[44]) - 1 + (1 if 5 < kind < 9 else 0)
            y = {0: 55, 7: 54}.get(room, 53) + 255 - int(ram[45]) + (8 if ram[45] < 216 else 0)
            out.append(Box("enemy", x, y, 8, 13))
            pair = int(ram[84])
            for bit, dx in ((1, 16), (2, 32), (4, 64)):
                if pair & bit:
                    out.append(Box("enemy", x + dx, y, 8, 13))
        return out


#: Pitfall's hazards, read from the screen: category -> (``getScreen()`` colours, first row, least width, least
#: height): logs (brown), pits (tar black or water blue with the crocodiles in it, at least 16 px wide: the ladder
#: holes are 8-12 px and lead underground, which costs no life), crocodiles (dark green, in the water), the
#: scorpion (white, below row 150)
_PITFALL_HAZARDS = {"log": ((0x12,), 0, 1, 1), "pit": ((0x00, 0xA4, 0xD0), 0, 16, 1), "crocodile": ((0xD0,), 0, 1, 1),
                    "scorpion": ((0x0E,), 150, 1, 5)}
_PITFALL_SCENERY = {c: ~colour_set(*colours) for c, (colours, *_) in _PITFALL_HAZARDS.items()}
_HIDDEN = 0xFF  # (a colour ALE never draws: Harry's pixels are painted over with it before the logs are read)


class Pitfall(RamGame):
    """Pitfall Harry at (RAM[97], (RAM[105] + 72) mod 256), 8x21 (after a life is lost he drops in from the
    treetops: RAM[105] 225-255, rows 41-71); not drawn while RAM[30], the death countdown (drowned, eaten), is
    not 0. The hazards, read from the screen (rows 100-184): ``log`` (Harry's box left out: his trousers are the logs'
    brown), ``pit`` (tar pits, water holes, quicksand), ``crocodile`` and ``scorpion``, each by its colour
    (``_PITFALL_HAZARDS``; OCAtari's per-scene RAM tables are not needed). (Fire and snakes: not mapped.)"""

    name = "pitfall"
    categories = ("player", "log", "pit", "crocodile", "scorpion")
    colours = {"player": ((53, 95, 24), (92, 186, 92), (105, 105, 15), (228, 111, 111), (214, 214, 214)),
               "log": ((105, 105, 15),), "pit": ((0, 0, 0), (45, 109, 152)), "crocodile": ((20, 60, 0),),
               "scorpion": ((236, 236, 236),)}
    screen_rows = (100, 185)

    def detect(self, ram: np.ndarray) -> list[Box]:
        return [Box("player", int(ram[97]), (int(ram[105]) + 72) % 256, 8, 21, ram[30] == 0)]

    def read_screen(self, band: np.ndarray, ram: np.ndarray) -> list[Box]:
        top = self.screen_rows[0]
        logs = np.array(band, copy=True)  # Harry's trousers are the logs' brown: his box is left out of the logs
        x, y = int(ram[97]), (int(ram[105]) + 72) % 256 - top
        logs[max(y - 1, 0):max(y + 22, 0), max(x - 1, 0):max(x + 9, 0)] = _HIDDEN
        out, background = [], row_background(band)
        for category, (_, first, min_w, min_h) in _PITFALL_HAZARDS.items():
            found = blobs(logs if category == "log" else band, top, _PITFALL_SCENERY[category], background=background)
            out += [Box(category, b.x, b.y, b.w, b.h) for b in found if b.y >= first and b.w >= min_w and b.h >= min_h]
        return out


#: Venture's room monsters by room (RAM[90] 0-7), as ``getScreen()`` colours: the skeleton (grey), the goblins
#: (purple), the serpents (green), the moving walls (orange), the two-headed (red), the troll (grey), the dragon
#: (yellow), the spider (orange) (OCAtari's venture.py); the hall monster (green) follows Winky into every room
_VENTURE_ROOM_MONSTERS = {0: (0x04,), 1: (0x74,), 2: (0xD4,), 3: (0x34,), 4: (0x44,), 5: (0x04,), 6: (0x14,),
                          7: (0x34,)}
_HALL_MONSTER = 0xD4
#: per room, the colours that are not a monster (everything else on the screen is scenery there)
_VENTURE_SCENERY = {room: ~colour_set(*c, _HALL_MONSTER) for room, c in _VENTURE_ROOM_MONSTERS.items()}


class Venture(RamGame):
    """Winky: a dot at (RAM[85] - 1, 2 RAM[26] + 25), 1x2, in the hallway (RAM[90] 8 or 9) and in the rooms (RAM[90]
    0-7) alike (OCAtari's 8x12 Winky at slot 0 in the rooms is not where the screen shows him). Monsters: in the
    hallway three, from the RAM: slot k (3-5) at column RAM[79 + k] - 1 (- 7 for the third), row 2 RAM[20 + k] + 26
    (+ 27 for the second and third), 5x8, while RAM[20 + k] < 81 (a monster shot is gone). In a room the RAM slots
    follow no formula that holds, so the monsters are read from the screen (rows 20-189): the blobs in the room's
    monster colour or the hall monster's green (the treasures have other colours)."""

    name = "venture"
    categories = ("player", "monster")
    colours = {"player": ((168, 48, 143),),
               "monster": ((82, 126, 45), (111, 111, 111), (78, 50, 181), (181, 83, 40), (184, 50, 50),
                           (134, 134, 29))}
    screen_rows = (20, 190)

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[85]) - 1, 2 * int(ram[26]) + 25, 1, 2)]
        if ram[90] not in (8, 9):
            return out
        for k, dx, dy in ((3, 1, 26), (4, 1, 27), (5, 7, 27)):
            out += box_if("monster", int(ram[79 + k]) - dx, 2 * int(ram[20 + k]) + dy, 5, 8, ram[20 + k] < 81)
        return out

    def read_screen(self, band: np.ndarray, ram: np.ndarray) -> list[Box]:
        scenery = _VENTURE_SCENERY.get(int(ram[90]))
        if scenery is None:  # the hallway: from the RAM
            return []
        return [Box("monster", b.x, b.y, b.w, b.h) for b in blobs(band, self.screen_rows[0], scenery, left=0)]


class Kangaroo(RamGame):
    """Mother kangaroo at (RAM[17] + 15, 8 RAM[16] + 4), 8x24 (16 ducking, 23/15 jumping by RAM[18]); not drawn while
    RAM[16] > 20 (between lives). Monkey i (0-3)
    at (RAM[15 - i] + 16, 8 RAM[11 - i] + 5), 6x15, while RAM[3 - i] is neither 0 nor 212 and RAM[7 - i] is not 255
    (a monkey waiting to come down the right edge). Coconuts: the falling one
    at (RAM[34] + 14, 8 (RAM[33] - 22 RAM[36]) + 9) while RAM[33] != 255, thrown ones at (RAM[28 + i] + 15,
    8 RAM[25 + i] + 1) while RAM[25 + i] != 255; 2x3."""

    name = "kangaroo"
    categories = ("player", "monkey", "coconut")
    colours = {"player": ((223, 183, 85),), "monkey": ((227, 151, 89),), "coconut": ((162, 98, 33), (227, 151, 89))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        pose = int(ram[18])
        h = 16 if pose in (20, 28) else 15 if pose in (66, 74) else 23 if pose in (65, 73) else 24
        out = box_if("player", int(ram[17]) + 15, 8 * int(ram[16]) + 4, 8, h, ram[16] <= 20)  # row 21+: gone
        for i in range(4):
            out += box_if("monkey", int(ram[15 - i]) + 16, 8 * int(ram[11 - i]) + 5, 6, 15,
                          ram[3 - i] not in (0, 212) and ram[7 - i] != 255)  # 255: waiting off the screen
        out += box_if("coconut", int(ram[34]) + 14, 8 * (int(ram[33]) - 22 * int(ram[36])) + 9, 2, 3, ram[33] != 255)
        for i in range(3):
            out += box_if("coconut", int(ram[28 + i]) + 15, 8 * int(ram[25 + i]) + 1, 2, 3, ram[25 + i] != 255)
        return out


class Frostbite(RamGame):
    """Frostbite Bailey at (RAM[102], RAM[100] + 29), 8x18, sinking by RAM[107] rows (gone at 18), absent while
    RAM[106] is 26. The bear at (RAM[104] + 3, 58), 14x16, unless RAM[104] is 140. Lane i (0-3, row 160 - 26 i):
    a creature (bird, crab, clam, fish: 8x7) at column RAM[84 + i] and a second 32 px right when RAM[88 + i] != 0.
    Ice floes of lane i (row 174 - 26 i, 7 high): three 24 px floes 32 px apart from column RAM[31 + i] - 8 when
    RAM[30] is 8, else six 16 px halves."""

    name = "frostbite"
    categories = ("player", "enemy", "floe")
    colours = {"player": ((198, 108, 58), (162, 98, 33)), "floe": ((214, 214, 214), (84, 138, 210)),
               "enemy": ((132, 144, 252), (213, 130, 74), (210, 210, 64), (111, 210, 111), (111, 111, 111))}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out: list[Box] = []
        sink = int(ram[107])
        if ram[106] != 26 and sink < 18:
            out.append(Box("player", int(ram[102]), int(ram[100]) + 29 + sink, 8, 18 - sink))
        out += box_if("enemy", int(ram[104]) + 3, 58, 14, 16, ram[104] != 140)
        for i in range(4):
            x = int(ram[84 + i])
            if 0 < x < 160 or ram[88 + i]:
                out.append(Box("enemy", x, 160 - 26 * i, 8, 7))
                out += box_if("enemy", x + 32, 160 - 26 * i, 8, 7, ram[88 + i] != 0)
            base, y = int(ram[31 + i]), 174 - 26 * i
            if ram[30] == 8:
                out += [Box("floe", (base + p * 32 - 8) % 160, y, 24, 7) for p in range(3)]
            else:
                space = abs(int(ram[30]) - 8)
                for p in range(6):
                    off = -8 - max(0, space - 4) if p % 2 == 0 else -16 + min(space, 4)
                    out.append(Box("floe", (base + p * 16 + off) % 160, y, 16, 7))
        return out
