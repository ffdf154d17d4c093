"""MinAtar: ``MinAtar/<Game>-v1`` ids, registered by rlviz (``minatar.gym.register_envs``: a seconds-long import,
only for a MinAtar id; Ctrl-C kept, seaborn deferred: :mod:`rlviz.envs.minatar_import`). One cell per block of
frame pixels (nearest saliency); its heatmap objects are the game's state channels."""

from __future__ import annotations

import gymnasium as gym

from .family import Family

__all__ = ["FAMILY"]


def _register() -> None:
    try:
        from ..minatar_import import import_minatar_gym

        import_minatar_gym().register_envs()
    except (ImportError, gym.error.Error):
        pass


def _recipe(env_id: str) -> dict:
    return {"env_id": env_id, "saliency_mode": "nearest"}


FAMILY = Family("MinAtar", prefixes=("MinAtar/",), register=_register, pip='"rlviz[minatar]"', recipe=_recipe,
                # MinAtar renders float64 [0, 1] frames and declares no fps: known, handled by rlviz (the recorders
                # convert frames), so gymnasium's checker would only print noise
                make_kwargs=(("disable_env_checker", True),),
                objects=lambda env_id: "minatar")
