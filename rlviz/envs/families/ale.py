"""ALE (Atari, through ale-py): ``ALE/<Game>-v5`` ids, registered by rlviz on any id (ROMs ship in ale-py), the
usual DQN/PPO Atari stack as their default recipe (:func:`atari_recipe_dict`, which
:func:`rlviz.envs.recipe.atari_recipe` makes a recipe of). The v4 ids (``BreakoutNoFrameskip-v4``) have no prefix:
the heatmap's RAM maps know them by name (:mod:`rlviz.evaluate.failures.atari_ram`). Snapshots save the emulator's
state (:mod:`rlviz.envs.snapshot`, told by the env itself: :func:`rlviz.envs.ale_seed.is_ale`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from .family import Family

__all__ = ["FAMILY", "atari_recipe_dict"]


def _register() -> None:
    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:  # pragma: no cover - ale-py is a dependency
        pass


def atari_recipe_dict(env_id: str = "ALE/Breakout-v5", frame_skip: int = 4, screen_size: int = 84, stack: int = 4,
                      noop_max: int = 30, clip_reward: bool = True, **env_kwargs: Any) -> dict:
    """The usual DQN/PPO Atari stack, as :meth:`EnvRecipe.to_dict <rlviz.envs.recipe.EnvRecipe.to_dict>` writes it:
    grey 84x84, frame skip 4 (max-pooled), no-op starts, frame stack 4; reward clipping during training only. (Life
    loss as a training signal belongs in the training loop: a terminating wrapper would make a vector env reset the
    whole game on every life.)"""
    kwargs = {"frameskip": 1, "repeat_action_probability": 0.25, **env_kwargs}
    wrappers = [{"name": "atari", "kwargs": {"frame_skip": frame_skip, "screen_size": screen_size,
                                             "noop_max": noop_max}, "training_only": False}]
    if clip_reward:
        wrappers.append({"name": "clip_reward", "kwargs": {}, "training_only": True})
    wrappers.append({"name": "frame_stack", "kwargs": {"stack_size": stack}, "training_only": False})
    return {"env_id": env_id, "env_kwargs": kwargs, "wrappers": wrappers, "saliency_mode": "linear"}


FAMILY = Family("ALE", prefixes=("ALE/",), register=_register, always=True, pip="ale-py", recipe=atari_recipe_dict)
