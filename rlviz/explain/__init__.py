"""Explaining the agent: saliency methods as types (:mod:`rlviz.explain.attribution`: the :class:`Attribution`
protocol, one class per method, the registry :data:`ATTRIBUTIONS` from the names a user chooses to the classes),
batched, with :func:`attribute` as their functional front. Recurrent policies: each frame given the state it carried
(:mod:`.given_state`), and memory saliency over the last W observations (:mod:`.memory`).

Names load on first use: the registry and the classes import no torch (the recorder checks its options with
them); the computations load it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: public name -> the module of this package that defines it
_EXPORTS = {
    "Attribution": "attribution", "SaliencyMethod": "attribution", "Gradient": "attribution",
    "SmoothGrad": "attribution", "Perturbation": "attribution", "ATTRIBUTIONS": "attribution",
    "attribution_class": "attribution",
    "METHODS": "saliency", "AttributionOptions": "saliency", "attribute": "saliency", "episode_saliency": "saliency", "saliency_label": "saliency",
    "GivenState": "given_state", "carried_states": "given_state", "MemoryGradient": "memory",
    "MemoryPerturbation": "memory", "MemorySaliency": "memory",
    "ObsLayout": "layout", "detect_layout": "layout", "episode_scale": "scale", "normalise_episode": "scale",
}

__all__ = ["ATTRIBUTIONS", "Attribution", "AttributionOptions", "GivenState", "Gradient", "METHODS", "MemoryGradient",
           "MemoryPerturbation", "MemorySaliency", "carried_states", "ObsLayout", "Perturbation", "SaliencyMethod",
           "SmoothGrad", "attribute", "attribution_class", "detect_layout", "episode_saliency", "episode_scale",
           "normalise_episode", "saliency_label"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .attribution import (
        ATTRIBUTIONS,
        Attribution,
        Gradient,
        Perturbation,
        SaliencyMethod,
        SmoothGrad,
        attribution_class,
    )
    from .given_state import GivenState, carried_states
    from .layout import ObsLayout, detect_layout
    from .memory import MemoryGradient, MemoryPerturbation, MemorySaliency
    from .saliency import METHODS, AttributionOptions, attribute, episode_saliency, saliency_label
    from .scale import episode_scale, normalise_episode
