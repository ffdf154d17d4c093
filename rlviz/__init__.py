"""rlviz: see what your reinforcement-learning agent does and why.

Library map (one way through)::

    env + agent -> RecordEpisode (EpisodeTrace) -> internals (policy, saliency; batched)
        -> compose (panels, overlay) -> video (H.264 MP4) / sinks (W&B, TensorBoard, folder)
    rollout (many episodes) -> FailureHeatmap + summarize -> sinks
    render(): everything `rlviz render` does, as one call
"""

from .checkpoint import LoadedAgent, load_agent, load_checkpoint, save_checkpoint
from .compose import ComposeOptions, Compositor, write_episode_video
from .envs import EnvRecipe, atari_recipe, make_env, make_vec_env
from .errors import (
    CheckpointError,
    EnvError,
    MissingDependencyError,
    RlvizError,
    UnsafeCheckpointError,
    UsageError,
    VideoError,
)
from .heatmap import FailureHeatmap
from .policy import Policy, PolicyOutput, TorchPolicy
from .record import EpisodeResult, RecordEpisode, run_episode
from .render import RenderConfig, RenderOutputs, render
from .rollout import EpisodeRecord, RolloutResult, replay_episode, rollout
from .saliency import attribute, episode_saliency, normalise_episode
from .stats import Summary, format_table, summarize
from .trace import EpisodeInternals, EpisodeTrace
from .video import VideoWriter, probe_video, read_video

__version__ = "0.1.0"

__all__ = [
    "CheckpointError", "ComposeOptions", "Compositor", "EnvError", "EnvRecipe", "EpisodeInternals",
    "EpisodeRecord", "EpisodeResult", "EpisodeTrace", "FailureHeatmap", "LoadedAgent", "MissingDependencyError",
    "Policy", "PolicyOutput", "RecordEpisode", "RenderConfig", "RenderOutputs", "RlvizError", "RolloutResult",
    "Summary", "TorchPolicy", "UnsafeCheckpointError", "UsageError", "VideoError", "VideoWriter", "atari_recipe",
    "format_table", "load_agent", "load_checkpoint", "make_env", "make_vec_env", "probe_video", "read_video",
    "render", "replay_episode", "rollout", "run_episode", "save_checkpoint", "summarize", "write_episode_video",
    "attribute", "episode_saliency", "normalise_episode", "__version__",
]
