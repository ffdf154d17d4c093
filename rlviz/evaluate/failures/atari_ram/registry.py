"""Which RAM map an env id or ALE ROM name has: ``"ALE/SpaceInvaders-v5"``, ``"SpaceInvadersNoFrameskip-v4"``,
``"SpaceInvaders-v4"`` and the ROM name ``"space_invaders"`` all name :class:`~.shooters.SpaceInvaders`."""

from __future__ import annotations

import re

from ....envs.families import family_named, family_of
from .base import RamGame
from .maze import Frostbite, Kangaroo, MontezumaRevenge, MsPacman, Pitfall, Qbert, Venture
from .racing import BeamRider, Enduro, Freeway, Riverraid, Skiing
from .shooters import Asterix, Seaquest, SpaceInvaders
from .sports import Bowling, Boxing, Breakout, Pong, Tennis

__all__ = ["GAMES", "game_for_env_id", "game_for_rom", "rom_name"]

#: ALE ROM name -> the game's RAM map class
GAMES: dict[str, type[RamGame]] = {g.name: g for g in (
    Breakout, Pong, SpaceInvaders, Seaquest, MsPacman, Freeway, Boxing, Asterix, Qbert, Enduro, BeamRider, Riverraid,
    Tennis, Bowling, Kangaroo, Frostbite, MontezumaRevenge, Pitfall, Skiing, Venture)}

_ID = re.compile(r"^(?:ALE/)?([A-Za-z0-9]+?)(?:NoFrameskip|Deterministic)?-v\d+$")


def rom_name(env_id: str) -> str | None:
    """``"ALE/MsPacman-v5"`` -> ``"ms_pacman"``; None when the id is not an Atari-style id."""
    m = _ID.match(str(env_id))
    if m is None:
        return None
    return re.sub(r"(?<!^)(?=[A-Z])", "_", m.group(1)).lower()


def game_for_rom(rom: str) -> RamGame | None:
    """A fresh map for ALE's ROM name (``env.unwrapped._game``), or None."""
    cls = GAMES.get(str(rom))
    return cls() if cls is not None else None


def game_for_env_id(env_id: str) -> RamGame | None:
    """A fresh map for an ALE env id (v5 ``ALE/Name-v5`` and v4 ``NameNoFrameskip-v4`` alike), or None."""
    rom = rom_name(env_id)
    if rom is None or (family_of(env_id) is not family_named("ALE") and not re.search(r"-v[04]$", env_id)):
        return None
    return game_for_rom(rom)
