"""RAM maps of ball and sports games: Breakout, Pong, Tennis, Boxing, Bowling.

Addresses and offsets from OCAtari's RAM modules (Delfosse et al. 2023, "OCAtari: Object-Centric Atari 2600
Reinforcement Learning Environments", https://github.com/k4ntz/OC_Atari, MIT licence: ocatari/ram/breakout.py,
pong.py, tennis.py, boxing.py, bowling.py), re-checked here against ``ale.getScreenRGB()`` (see
docs/atari-objects.md); the code is rlviz's own.
"""

from __future__ import annotations

import numpy as np

from .base import Box, RamGame, box_if

__all__ = ["Breakout", "Pong", "Tennis", "Boxing", "Bowling"]


class Breakout(RamGame):
    """Paddle column RAM[72] - 47 (row 189, 16x4); ball at (RAM[99] - 49, RAM[101] + 9), 2x4, absent while
    RAM[101] is 0 or the ball is below row 196."""

    name = "breakout"
    categories = ("ball", "paddle")
    colours = {"ball": ((200, 72, 72),), "paddle": ((200, 72, 72),)}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("paddle", int(ram[72]) - 47, 189, 16, 4)]
        by = int(ram[101]) + 9
        return out + box_if("ball", int(ram[99]) - 49, by, 2, 4, ram[101] != 0 and by <= 196)


class Pong(RamGame):
    """Own (right, green) paddle at column 140, row RAM[51] - 13; the opponent's at column 16, row RAM[50] - 15
    (4x15, cut at the court's walls, rows 34-193); ball at (RAM[49] - 49, RAM[54] - 14), 2x4, while RAM[54] != 0."""

    name = "pong"
    categories = ("ball", "paddle", "enemy")
    colours = {"ball": ((236, 236, 236),), "paddle": ((92, 186, 92),), "enemy": ((213, 130, 74),)}

    @staticmethod
    def _paddle(category: str, x: int, y: int) -> list[Box]:
        top, bottom = max(y, 34), min(y + 15, 194)
        return box_if(category, x, top, 4, bottom - top, bottom > top)

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = self._paddle("paddle", 140, int(ram[51]) - 13) + self._paddle("enemy", 16, int(ram[50]) - 15)
        return out + box_if("ball", int(ram[49]) - 49, int(ram[54]) - 14, 2, 4, ram[54] != 0 and ram[49] > 49)


class Tennis(RamGame):
    """Players at (RAM[26] - 1, 166 - RAM[24]) and (RAM[27] - 1, 166 - RAM[25]), 13x23; RAM[80] says which is the
    agent's (0: the first). Ball at (RAM[16] - 2, 189 - RAM[54]) and its shadow at row 189 - RAM[55], 2x2, while
    RAM[16] > 2; the ball is hidden behind the net in rows 99-112 (not reported), and reported as not drawn above
    row 17, below row 185 and on the baselines (see ``_ball_drawn``)."""

    name = "tennis"
    categories = ("player", "enemy", "ball", "shadow")
    colours = {"player": ((240, 128, 128),), "enemy": ((117, 128, 240),), "ball": ((236, 236, 236),),
               "shadow": ((74, 74, 74),)}

    @staticmethod
    def _ball_drawn(y: int) -> bool:
        """The ball is not drawn above row 17 nor below row 185 (out of the court, the point over) nor on the
        baselines (rows 48-49, 177-178: the court's lines are drawn over it)."""
        return not (y < 17 or y > 185 or 46 < y < 50 or 174 < y < 179)

    def detect(self, ram: np.ndarray) -> list[Box]:
        a = (int(ram[26]) - 1, 166 - int(ram[24]))
        b = (int(ram[27]) - 1, 166 - int(ram[25]))
        me, them = (a, b) if ram[80] == 0 else (b, a)
        out = [Box("player", *me, 13, 23), Box("enemy", *them, 13, 23)]
        if ram[16] > 2:
            x, by, sy = int(ram[16]) - 2, 189 - int(ram[54]), 189 - int(ram[55])
            out += box_if("ball", x, by, 2, 2, not 98 < by < 113, self._ball_drawn(by))
            out += box_if("shadow", x, sy, 2, 2, not 100 < sy < 113 and sy != by and ram[55] != 189)
        return out


class Boxing(RamGame):
    """The agent's (white) boxer at (RAM[32] + 5, RAM[34] + 38), the opponent (black) at (RAM[33] + 4, RAM[35] + 38);
    14x46 each (arms in)."""

    name = "boxing"
    categories = ("player", "enemy")
    colours = {"player": ((214, 214, 214),), "enemy": ((0, 0, 0),)}

    def detect(self, ram: np.ndarray) -> list[Box]:
        return [Box("player", int(ram[32]) + 5, int(ram[34]) + 38, 14, 46),
                Box("enemy", int(ram[33]) + 4, int(ram[35]) + 38, 14, 46)]


class Bowling(RamGame):
    """Bowler at (RAM[29] + 8, 139 - 2 (RAM[40] - 1)), 8x32; ball at (RAM[30] + 7, 161 - 2 (RAM[41] - 1)), 4x10;
    pin i (0-9) standing while RAM[57 + i] <= 120, at (135 - 2 RAM[57 + i], 169 - 2 RAM[47 + i]), 2x4."""

    name = "bowling"
    categories = ("player", "ball", "pin")
    colours = {"player": ((84, 92, 214),), "ball": ((45, 50, 184),), "pin": ((45, 50, 184),)}

    def detect(self, ram: np.ndarray) -> list[Box]:
        out = [Box("player", int(ram[29]) + 8, 139 - 2 * (int(ram[40]) - 1), 8, 32),
               Box("ball", int(ram[30]) + 7, 161 - 2 * (int(ram[41]) - 1), 4, 10)]
        for i in range(10):
            out += box_if("pin", 135 - 2 * int(ram[57 + i]), 169 - 2 * int(ram[47 + i]), 2, 4, ram[57 + i] <= 120)
        return out
