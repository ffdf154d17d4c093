"""Environments: recipes that rebuild the env an agent was trained on (:mod:`.trust`: the rule for names read
from a file), rlviz's wrappers by name, cheap seeded ALE resets, and the one converter from whatever
``env.render()`` returns to an RGB uint8 frame.

Names load on first use (:mod:`rlviz._lazy`): the recorders import :mod:`.frames` and :mod:`.render_modes` without
the recipes, the name rules and the PettingZoo dispatch behind :mod:`.recipe`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: public name -> the module of this package that defines it
_EXPORTS = {
    "CameraTiles": "cameras", "with_cameras": "cameras", "to_rgb_frame": "frames",
    "WRAPPERS": "recipe", "EnvRecipe": "recipe", "WrapperSpec": "recipe", "atari_recipe": "recipe",
    "make_env": "recipe", "make_vec_env": "recipe", "register_envs": "recipe",
}

__all__ = [*_EXPORTS]  # the public surface: _EXPORTS, listed once

# the package's names on first use
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .cameras import CameraTiles as CameraTiles
    from .cameras import with_cameras as with_cameras
    from .frames import to_rgb_frame as to_rgb_frame
    from .recipe import WRAPPERS as WRAPPERS
    from .recipe import EnvRecipe as EnvRecipe
    from .recipe import WrapperSpec as WrapperSpec
    from .recipe import atari_recipe as atari_recipe
    from .recipe import make_env as make_env
    from .recipe import make_vec_env as make_vec_env
    from .recipe import register_envs as register_envs
