"""The jobs' work units for ``--workers N`` and ``--ray``: the agent's source, rollout shards, and the backend that
runs them (the video replays' unit is :class:`rlviz.jobs.videos.VideoTask`).

Each unit carries an :class:`AgentSource` (the checkpoint's path for local workers; its bytes through Ray's
object store for a cluster) and the job's :class:`~rlviz.config.RenderConfig`; a worker loads the agent once
and keeps it for its next units. Results come back to the driver: rollout shards as
:class:`~rlviz.evaluate.RolloutResult` (merged exactly, :func:`rlviz.evaluate.backends.workers.merge_rollouts`), videos
as bytes written under the driver's folder with :func:`~rlviz.media.atomic.atomic_path`.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.attention import attention_spec
from ..config import RenderConfig
from ..errors import RlvizError, require
from ..evaluate.backends.workers import Backend, WorkerPool, claimed_indices
from ..evaluate.rollouts.rollout import RolloutPlan, RolloutProbes, rollout
from ..sources import LoadedAgent, load_agent
from ..sources.huggingface.hub import is_hub_ref
from ..sources.stable_baselines3.vecnormalize import FILE_NAME as VECNORMALIZE_FILE
from ..sources.stable_baselines3.vecnormalize import find_vecnormalize
from ..sources.stable_baselines3.zoo import find_zoo_run
from .stages import agent_env

__all__ = ["AgentSource", "ShardTask", "run_shard", "open_backend", "share_agent", "source_for"]

_LOADED: dict[Any, LoadedAgent] = {}  # in a worker: the agents of the last sources, by key (forked workers inherit the driver's)
_SOURCES: dict[tuple[str, bool, str], AgentSource] = {}  # in the driver: the run's AgentSources (Ray: the checkpoint's bytes are put once)


@dataclass(frozen=True)
class AgentSource:
    """How a worker gets the agent: the file at ``path``, or its bytes (``data``, or ``ref`` in Ray's object
    store) with the VecNormalize statistics' bytes (``stats``) when the agent has any."""

    path: str
    config: RenderConfig
    data: bytes | None = None
    ref: object = None
    stats: bytes | None = None
    digest: str = ""

    @classmethod
    def for_config(cls, config: RenderConfig, put: Any = None) -> AgentSource:
        """The config's checkpoint; with ``put`` (Ray's), its bytes travel through the object store instead of
        its path. An rl-zoo3 run (a folder, or a model inside one) goes by path: it must exist on every node; an
        ``hf://`` id goes as it is (each node fetches the repo into its own Hugging Face cache)."""
        path = os.fspath(config.checkpoint)
        if put is None or is_hub_ref(path) or os.path.isdir(path) or (
                find_zoo_run(path, config.trust_checkpoint).folder is not None):
            return cls(path, config)
        data = Path(path).read_bytes()
        vecnormalize = config.vecnormalize if config.vecnormalize is not None else find_vecnormalize(path)
        stats = Path(vecnormalize).read_bytes() if vecnormalize is not None else None
        return cls(path, config, None, put(data), stats, hashlib.sha256(data).hexdigest())

    @property
    def key(self) -> tuple[Any, ...]:
        c = self.config
        return (self.path, self.digest, c.device, c.env, c.wrapper, c.model, c.trust_checkpoint,
                os.fspath(c.vecnormalize or ""))

    def load(self) -> LoadedAgent:
        """The agent (loaded once per worker process and source)."""
        if self.key not in _LOADED:
            if len(_LOADED) >= 2:  # compare's two agents
                _LOADED.clear()
            _LOADED[self.key] = self._load()
        return _LOADED[self.key]

    def _load(self) -> LoadedAgent:
        c = self.config
        kw: dict[str, Any] = dict(env=agent_env(c), model=c.model, trust=c.trust_checkpoint, device=c.device)
        if self.ref is None:
            return load_agent(self.path, vecnormalize=c.vecnormalize, **kw)
        data = require("ray", "ray", "--ray").get(self.ref)
        with tempfile.TemporaryDirectory(prefix="rlviz-agent-") as d:
            local = Path(d) / Path(self.path).name
            local.write_bytes(data)
            stats = None
            if self.stats is not None:
                stats = Path(d) / VECNORMALIZE_FILE
                stats.write_bytes(self.stats)
            return load_agent(local, vecnormalize=stats, **kw)


@dataclass(frozen=True)
class ShardTask:
    """Episodes ``[first_episode, first_episode + episodes)`` of the config's rollout; with ``shared``, those this
    worker claims of them as its envs free up (:func:`~rlviz.evaluate.backends.workers.claimed_indices`: every worker
    of the pool gets such a task); with ``indices``, those episodes only (a dead worker's, re-run).
    ``num_envs``: the worker's envs (default: the config's, at most the episodes)."""

    source: AgentSource
    gamma: float
    first_episode: int
    episodes: int
    shared: bool = False
    indices: tuple[Any, ...] | None = None
    num_envs: int | None = None

    def __str__(self) -> str:
        if self.indices is not None:
            shown = ", ".join(map(str, self.indices[:5])) + (" ..." if len(self.indices) > 5 else "")
            return f"episodes {shown} (a re-run)"
        return f"episodes {self.first_episode}-{self.first_episode + self.episodes - 1}"


def run_shard(task: ShardTask, progress: Any = None) -> Any:
    """A worker's rollout of one shard: its RolloutResult (merge with :func:`merge_rollouts`)."""
    agent, c = task.source.load(), task.source.config
    if task.shared:
        indices, most = claimed_indices(task.first_episode + task.episodes), task.episodes
    else:
        indices, most = task.indices, task.episodes if task.indices is None else len(task.indices)
    envs = task.num_envs or min(c.num_envs, most)
    plan = RolloutPlan.for_config(c, task.gamma, episodes=task.episodes, num_envs=envs,
                                  first_episode=task.first_episode, indices=indices, progress=progress or False)
    return rollout(agent.recipe, agent.policy, plan, RolloutProbes(attention=attention_spec(c)))


@contextlib.contextmanager
def open_backend(config: Any) -> Any:
    """A context giving None (this process), a :class:`WorkerPool` (``--workers N``) or a Ray pool (``--ray``)
    for a config with ``workers``, ``ray`` and ``threads`` (a RenderConfig or a CompareConfig). Ray and
    spawned workers start now (open it before loading the agent: they start meanwhile); forked workers (Linux)
    start at the first shard and inherit the agents given to :func:`share_agent`."""
    if config.ray is not None:
        from ..evaluate.backends.ray_pool import RayPool

        pool: Any = RayPool(config.ray, workers=config.workers if config.workers > 1 else None, threads=config.threads)
    elif config.workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        pool = WorkerPool(config.workers, threads=config.threads, start="fork")
    elif config.workers > 1:
        pool = WorkerPool(config.workers, threads=config.threads, preload=(__name__,))
    else:
        pool = contextlib.nullcontext(None)
    try:
        with pool as backend:
            if hasattr(backend, "warm") and isinstance(config, RenderConfig):  # Ray: its workers load the agent now
                try:
                    backend.warm(_load_only, source_for(config, backend))
                except (OSError, RlvizError):  # a missing or bad checkpoint: the driver's load says so in a moment
                    pass
            yield backend
    finally:
        _LOADED.clear()  # the agents shared with forked workers
        _SOURCES.clear()


def source_for(config: RenderConfig, backend: Backend | None) -> AgentSource:
    """The AgentSource of ``config`` for ``backend``: with Ray, the checkpoint's bytes go into its object store
    once per run (:meth:`AgentSource.for_config`)."""
    put = getattr(backend, "put", None)
    key = (os.fspath(config.checkpoint), put is not None, os.fspath(config.vecnormalize or ""))
    if key not in _SOURCES:
        _SOURCES[key] = AgentSource.for_config(config, put=put)
    return _SOURCES[key]


def _load_only(source: AgentSource, progress: Any = None) -> None:
    source.load()


def share_agent(config: RenderConfig, agent: LoadedAgent) -> None:
    """Workers forked from now on use ``agent`` (loaded here) for ``config``'s checkpoint instead of loading it."""
    _LOADED[AgentSource.for_config(config).key] = agent
