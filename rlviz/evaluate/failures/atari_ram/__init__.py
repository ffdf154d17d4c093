"""Objects of Atari games read from the console's RAM: one map per game (:class:`RamGame`), the extractor the
heatmap and attention use (:class:`RamExtractor`), the registry by env id, and the screen check. Where the RAM
formulas do not place the objects (Enduro's cars, BeamRider's saucers, Pitfall's hazards, Venture's room monsters),
the game reads them from the screen (:mod:`.screen`). The games, their
categories, hit rates and cost: docs/atari-objects.md."""

from .base import Box, RamExtractor, RamGame
from .check import ScreenCheck, check_game
from .registry import GAMES, game_for_env_id, game_for_rom, rom_name

__all__ = ["Box", "RamExtractor", "RamGame", "ScreenCheck", "check_game", "GAMES", "game_for_env_id",
           "game_for_rom", "rom_name", "ram_extractor_for"]


def ram_extractor_for(env_id: str | None = None) -> RamExtractor | None:
    """A :class:`RamExtractor` for the env id's game, or None when rlviz has no RAM map for it; with no env id, one
    that reads the game from the env on its first capture (``--objects ram``)."""
    if env_id is None:
        return RamExtractor(lookup=game_for_rom)
    game = game_for_env_id(env_id)
    return RamExtractor(game) if game is not None else None
