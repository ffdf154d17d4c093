"""rlviz: see what your reinforcement-learning agent does and why.

The pipeline, one subpackage per stage (see ARCHITECTURE.md)::

    agent (the Policy contract) <-- sources (checkpoints, SB3, rl-zoo3, CleanRL, the Hub) --> envs (recipe, wrappers)
    record (RecordEpisode) --> explain (saliency) --> draw (panels) --> media (H.264) --> sinks
    evaluate (rollouts, + attention per object) --> heatmap + stats --> sinks
    render(): everything ``rlviz render`` does, as one call; compare(): ``rlviz compare A B``;
    timeline(): ``rlviz timeline RUN`` (its package: rlviz.training)

The stages' dependency order is declared once, in ``rlviz/_layers.py``.

The names below are imported on first use, so ``import rlviz`` (and the CLI's argument checks) stay fast and
``import rlviz.media`` loads only what that stage needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _deprecated
from ._lazy import lazy_exports
from ._version import __version__

_deprecated.install()

#: public name -> the module that defines it
_EXPORTS = {
    "CallablePolicy": "agent", "LoadedAgent": "sources", "Policy": "agent", "PolicyOutput": "agent", "TorchPolicy": "agent",
    "load_agent": "sources", "load_checkpoint": "sources", "save_checkpoint": "sources",
    "CompareConfig": "config", "RenderConfig": "config", "TimelineConfig": "config",
    "ComposeOptions": "draw", "Compositor": "draw", "write_episode_video": "draw",
    "EnvRecipe": "envs", "atari_recipe": "envs", "make_env": "envs", "make_vec_env": "envs",
    "EpisodeInternals": "episode", "EpisodeResult": "episode", "EpisodeTrace": "episode",
    "CheckpointError": "errors", "EnvError": "errors", "MissingDependencyError": "errors", "RlvizError": "errors",
    "UnsafeCheckpointError": "errors", "UsageError": "errors", "VideoError": "errors",
    "EpisodeRecord": "evaluate", "FailureHeatmap": "evaluate", "RolloutResult": "evaluate", "Summary": "evaluate",
    "RolloutPlan": "evaluate", "RolloutProbes": "evaluate",
    "format_table": "evaluate", "replay_episode": "evaluate", "rollout": "evaluate", "summarize": "evaluate",
    "attribute": "explain", "episode_saliency": "explain", "normalise_episode": "explain",
    "VideoWriter": "media", "probe_video": "media", "read_video": "media",
    "RecordEpisode": "record", "RecordOptions": "record", "run_episode": "record",
    "RecordVectorEpisode": "record.vector",
    "CompareOutputs": "jobs", "RenderOutputs": "jobs", "compare": "jobs", "render": "jobs",
    "timeline": "training.job", "TimelineOutputs": "training.outputs",
    "TorchPolicyOptions": "agent", "AttributionOptions": "explain",
    "RecurrentModule": "agent", "RecurrentTorchPolicy": "agent",
}

__all__ = [
    "CallablePolicy", "CheckpointError", "CompareConfig", "CompareOutputs", "ComposeOptions", "Compositor", "EnvError", "EnvRecipe", "EpisodeInternals", "EpisodeRecord",
    "EpisodeResult", "EpisodeTrace", "FailureHeatmap", "LoadedAgent", "MissingDependencyError", "Policy",
    "PolicyOutput", "RecordEpisode", "RecordOptions", "RecordVectorEpisode", "RenderConfig", "RenderOutputs", "RlvizError", "RolloutResult", "Summary",
    "TorchPolicy", "UnsafeCheckpointError", "UsageError", "VideoError", "VideoWriter", "atari_recipe", "attribute",
    "compare", "episode_saliency", "format_table", "load_agent", "load_checkpoint", "make_env", "make_vec_env",
    "normalise_episode", "probe_video", "read_video", "render", "replay_episode", "rollout", "run_episode",
    "save_checkpoint", "summarize", "write_episode_video", "__version__",
    "timeline", "TimelineConfig", "TimelineOutputs", "RolloutPlan", "RolloutProbes",
    "TorchPolicyOptions", "AttributionOptions", "RecurrentModule", "RecurrentTorchPolicy",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .agent import (
        CallablePolicy,
        Policy,
        PolicyOutput,
        RecurrentModule,
        RecurrentTorchPolicy,
        TorchPolicy,
        TorchPolicyOptions,
    )
    from .config import CompareConfig, RenderConfig, TimelineConfig
    from .draw import ComposeOptions, Compositor, write_episode_video
    from .envs import EnvRecipe, atari_recipe, make_env, make_vec_env
    from .episode import EpisodeInternals, EpisodeResult, EpisodeTrace
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
        RolloutPlan,
        RolloutProbes,
        RolloutResult,
        Summary,
        format_table,
        replay_episode,
        rollout,
        summarize,
    )
    from .explain import AttributionOptions, attribute, episode_saliency, normalise_episode
    from .jobs import CompareOutputs, RenderOutputs, compare, render  # type: ignore[no-redef]
    from .media import VideoWriter, probe_video, read_video
    from .record import RecordEpisode, RecordOptions, run_episode
    from .record.vector import RecordVectorEpisode
    from .sources import LoadedAgent, load_agent, load_checkpoint, save_checkpoint
    from .training.job import timeline
    from .training.outputs import TimelineOutputs
