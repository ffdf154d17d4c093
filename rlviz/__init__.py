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

__all__ = [*_EXPORTS, "__version__"]  # the public surface: _EXPORTS, listed once


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .agent import CallablePolicy as CallablePolicy
    from .agent import Policy as Policy
    from .agent import PolicyOutput as PolicyOutput
    from .agent import RecurrentModule as RecurrentModule
    from .agent import RecurrentTorchPolicy as RecurrentTorchPolicy
    from .agent import TorchPolicy as TorchPolicy
    from .agent import TorchPolicyOptions as TorchPolicyOptions
    from .config import CompareConfig as CompareConfig
    from .config import RenderConfig as RenderConfig
    from .config import TimelineConfig as TimelineConfig
    from .draw import ComposeOptions as ComposeOptions
    from .draw import Compositor as Compositor
    from .draw import write_episode_video as write_episode_video
    from .envs import EnvRecipe as EnvRecipe
    from .envs import atari_recipe as atari_recipe
    from .envs import make_env as make_env
    from .envs import make_vec_env as make_vec_env
    from .episode import EpisodeInternals as EpisodeInternals
    from .episode import EpisodeResult as EpisodeResult
    from .episode import EpisodeTrace as EpisodeTrace
    from .errors import CheckpointError as CheckpointError
    from .errors import EnvError as EnvError
    from .errors import MissingDependencyError as MissingDependencyError
    from .errors import RlvizError as RlvizError
    from .errors import UnsafeCheckpointError as UnsafeCheckpointError
    from .errors import UsageError as UsageError
    from .errors import VideoError as VideoError
    from .evaluate import EpisodeRecord as EpisodeRecord
    from .evaluate import FailureHeatmap as FailureHeatmap
    from .evaluate import RolloutPlan as RolloutPlan
    from .evaluate import RolloutProbes as RolloutProbes
    from .evaluate import RolloutResult as RolloutResult
    from .evaluate import Summary as Summary
    from .evaluate import format_table as format_table
    from .evaluate import replay_episode as replay_episode
    from .evaluate import rollout as rollout
    from .evaluate import summarize as summarize
    from .explain import AttributionOptions as AttributionOptions
    from .explain import attribute as attribute
    from .explain import episode_saliency as episode_saliency
    from .explain import normalise_episode as normalise_episode
    from .jobs import CompareOutputs as CompareOutputs
    from .jobs import RenderOutputs as RenderOutputs
    from .jobs import compare as compare  # (the functions, not the submodules of those names)
    from .jobs import render as render
    from .media import VideoWriter as VideoWriter
    from .media import probe_video as probe_video
    from .media import read_video as read_video
    from .record import RecordEpisode as RecordEpisode
    from .record import RecordOptions as RecordOptions
    from .record import run_episode as run_episode
    from .record.vector import RecordVectorEpisode as RecordVectorEpisode
    from .sources import LoadedAgent as LoadedAgent
    from .sources import load_agent as load_agent
    from .sources import load_checkpoint as load_checkpoint
    from .sources import save_checkpoint as save_checkpoint
    from .training.job import timeline as timeline
    from .training.outputs import TimelineOutputs as TimelineOutputs
