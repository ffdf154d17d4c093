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

__all__ = [*_EXPORTS]  # the public surface: _EXPORTS, listed once


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .attribution import ATTRIBUTIONS as ATTRIBUTIONS
    from .attribution import Attribution as Attribution
    from .attribution import Gradient as Gradient
    from .attribution import Perturbation as Perturbation
    from .attribution import SaliencyMethod as SaliencyMethod
    from .attribution import SmoothGrad as SmoothGrad
    from .attribution import attribution_class as attribution_class
    from .given_state import GivenState as GivenState
    from .given_state import carried_states as carried_states
    from .layout import ObsLayout as ObsLayout
    from .layout import detect_layout as detect_layout
    from .memory import MemoryGradient as MemoryGradient
    from .memory import MemoryPerturbation as MemoryPerturbation
    from .memory import MemorySaliency as MemorySaliency
    from .saliency import METHODS as METHODS
    from .saliency import AttributionOptions as AttributionOptions
    from .saliency import attribute as attribute
    from .saliency import episode_saliency as episode_saliency
    from .saliency import saliency_label as saliency_label
    from .scale import episode_scale as episode_scale
    from .scale import normalise_episode as normalise_episode
