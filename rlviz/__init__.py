"""rlviz: see what your reinforcement-learning agent does and why.

The pipeline, one subpackage per stage (see ARCHITECTURE.md)::

    agent (checkpoint, adapters, policy) --> envs (recipe, wrappers)
    record (RecordEpisode) --> explain (saliency) --> draw (panels) --> media (H.264) --> sinks
    evaluate (rollouts) --> heatmap + stats --> sinks
    render(): everything ``rlviz render`` does, as one call
"""

from . import _deprecated
from ._version import __version__
from .agent import LoadedAgent, Policy, PolicyOutput, TorchPolicy, load_agent, load_checkpoint, save_checkpoint
from .config import RenderConfig
from .draw import ComposeOptions, Compositor, write_episode_video
from .envs import EnvRecipe, atari_recipe, make_env, make_vec_env
from .episode import EpisodeInternals, EpisodeTrace
from .errors import (
    CheckpointError,
    EnvError,
    MissingDependencyError,
    RlvizError,
    UnsafeCheckpointError,
    UsageError,
    VideoError,
)
from .evaluate import (
    EpisodeRecord,
    FailureHeatmap,
    RolloutResult,
    Summary,
    format_table,
    replay_episode,
    rollout,
    summarize,
)
from .explain import attribute, episode_saliency, normalise_episode
from .media import VideoWriter, probe_video, read_video
from .record import EpisodeResult, RecordEpisode, run_episode
from .render import RenderOutputs, render

_deprecated.install()

__all__ = [
    "CheckpointError", "ComposeOptions", "Compositor", "EnvError", "EnvRecipe", "EpisodeInternals",
    "EpisodeRecord", "EpisodeResult", "EpisodeTrace", "FailureHeatmap", "LoadedAgent", "MissingDependencyError",
    "Policy", "PolicyOutput", "RecordEpisode", "RenderConfig", "RenderOutputs", "RlvizError", "RolloutResult",
    "Summary", "TorchPolicy", "UnsafeCheckpointError", "UsageError", "VideoError", "VideoWriter", "atari_recipe",
    "format_table", "load_agent", "load_checkpoint", "make_env", "make_vec_env", "probe_video", "read_video",
    "render", "replay_episode", "rollout", "run_episode", "save_checkpoint", "summarize", "write_episode_video",
    "attribute", "episode_saliency", "normalise_episode", "__version__",
]
