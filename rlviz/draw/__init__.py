"""Drawing: the episode frame (game, saliency overlay, panels). numpy in, numpy out."""

from __future__ import annotations

from .compose import COLORS, ComposeOptions, Compositor
from .overlay import ACTOR_COLOR, CRITIC_COLOR, blend, saliency_to_frame
from .panels_continuous import GaussianPanel
from .panels_discrete import BarsPanel
from .video import video_timing, write_episode_video

__all__ = ["ACTOR_COLOR", "BarsPanel", "COLORS", "CRITIC_COLOR", "ComposeOptions", "Compositor", "GaussianPanel",
           "blend", "saliency_to_frame", "video_timing", "write_episode_video"]
