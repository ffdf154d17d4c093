"""Evaluation over many episodes: seeded rollouts and replays, the failure heatmap and its object
extractors, statistics, diagnostics; shards of a rollout and their exact merge, worker processes (``--workers``)
and Ray tasks (``--ray``, :mod:`rlviz.evaluate.backends.ray_pool`, imported on use)."""

from __future__ import annotations

from .backends.workers import WorkerPool, merge_rollouts, shard_ranges
from .failures.heatmap import FailureHeatmap
from .failures.objects import Extractor, FunctionExtractor, extractor_for
from .rollouts.plan import RolloutPlan, RolloutProbes
from .rollouts.rollout import FAIL_ON, EpisodeRecord, RolloutResult, episode_seed_for, replay_episode, rollout
from .statistics.diagnostics import Finding, diagnose
from .statistics.stats import Summary, explained_variance, format_table, iqm, summarize

__all__ = ["EpisodeRecord", "Extractor", "FAIL_ON", "FailureHeatmap", "Finding", "diagnose", "FunctionExtractor", "RolloutPlan", "RolloutProbes", "RolloutResult", "Summary", "episode_seed_for", "explained_variance", "extractor_for", "format_table", "iqm", "replay_episode", "rollout", "summarize", "WorkerPool", "merge_rollouts", "shard_ranges"]
