"""Environments: recipes that rebuild the env an agent was trained on (:mod:`.trust`: the rule for names read
from a file), rlviz's wrappers by name, cheap seeded ALE resets, and the one converter from whatever
``env.render()`` returns to an RGB uint8 frame."""

from __future__ import annotations

from .cameras import CameraTiles, with_cameras
from .frames import to_rgb_frame
from .recipe import WRAPPERS, EnvRecipe, WrapperSpec, atari_recipe, make_env, make_vec_env, register_envs

__all__ = ["CameraTiles", "EnvRecipe", "WRAPPERS", "WrapperSpec", "atari_recipe", "make_env", "make_vec_env", "register_envs", "to_rgb_frame", "with_cameras"]
