"""MiniGrid and BabyAI: ``MiniGrid-*`` / ``BabyAI-*`` ids, registered by ``import minigrid``. Agents are trained on
its observation wrappers (``ImgObsWrapper``...), which a recipe from a file may name without trust; the ``image``
key is the agent's own view; its heatmap objects are the agent's cell."""

from __future__ import annotations

from .family import Family

__all__ = ["FAMILY"]

FAMILY = Family(
    "MiniGrid", prefixes=("MiniGrid-", "BabyAI-"), package="minigrid", pip="minigrid",
    wrappers=frozenset(f"minigrid.wrappers:{c}" for c in (
        "ImgObsWrapper", "FlatObsWrapper", "RGBImgObsWrapper", "RGBImgPartialObsWrapper", "FullyObsWrapper",
        "OneHotPartialObsWrapper", "DictObservationSpaceWrapper", "DirectionObsWrapper", "ReseedWrapper",
        "ActionBonus", "PositionBonus", "SymbolicObsWrapper", "ViewSizeWrapper")),
    objects=lambda env_id: "grid", view_key="image")
