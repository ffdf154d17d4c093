"""Explaining the agent: saliency methods (gradient, SmoothGrad, perturbation), batched, behind one
:func:`attribute` call and one registry of method names."""

from __future__ import annotations

from .layout import ObsLayout, detect_layout
from .saliency import METHODS, attribute, episode_saliency, saliency_label
from .scale import episode_scale, normalise_episode

__all__ = ["METHODS", "ObsLayout", "attribute", "detect_layout", "episode_saliency", "episode_scale", "normalise_episode", "saliency_label"]
