"""Each checkpoint of a run on the run's N seeds: ``rlviz render``'s rollout, statistics and diagnostics of that file.

A checkpoint's rollout is :func:`rlviz.jobs.rollouts.run_rollouts` with the checkpoint's
:meth:`TimelineConfig.render_config` (the same seeds, the same options), summarised and diagnosed by render's stage
(:func:`rlviz.jobs.stages.summarise`), so its row equals ``rlviz render FILE``.
``(checkpoint, episodes)`` is the unit of work for ``--workers`` / ``--ray`` (:class:`CheckpointTask`): the backend
is opened once for the whole run (:func:`rlviz.jobs.shards.open_backend`: its start-up is paid once) and every
checkpoint's tasks go to it at once, so no worker waits for another checkpoint to finish; a worker loads each
checkpoint it needs once (:class:`rlviz.jobs.shards.AgentSource`), plays its episodes with render's shard function
(:func:`rlviz.jobs.shards.run_shard`) and, for a checkpoint's first shard, measures the policy change against the
previous checkpoint there too. The driver only merges (exactly: :func:`rlviz.evaluate.backends.workers.merge_rollouts`), so
the results equal one process's.

:func:`policy_change` compares two consecutive checkpoints' action distributions on the later one's visited states
(the observations of its first episodes, replayed alone by :func:`rlviz.evaluate.replay_episode`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np

from .. import progress
from ..agent.capabilities import capabilities_of
from ..errors import CheckpointError, RlvizError, UsageError
from ..evaluate import replay_episode
from ..evaluate.backends.threads import torch_threads
from ..evaluate.backends.workers import merge_rollouts, shard_ranges
from ..evaluate.rollouts.rollout import RolloutPlan, episode_seed_for
from ..evaluate.statistics.distance import action_gap, action_l2
from ..evaluate.statistics.distance import tv_kl_categorical as _tv_kl_categorical
from ..evaluate.statistics.distance import tv_kl_gaussian as _tv_kl_gaussian
from ..jobs.jax_stages import is_jax_agent, run_kind
from ..jobs.rollouts import import_now, run_rollouts
from ..jobs.shards import AgentSource, ShardTask, run_shard, share_agent, source_for
from ..jobs.stages import load_flax_agent, summarise, wants_jax_agent
from ..sources import LoadedAgent
from ..sources.run_folders import TimelineCheckpoint, reason_line
from .jax_checkpoints import jax_action_probs, jax_checkpoint_rollout, jax_visited_states

__all__ = ["evaluate_checkpoint", "load_checkpoint", "evaluate_many", "checkpoint_config", "check_same_run", "visited_states",
           "policy_change", "CheckpointTask", "run_checkpoint", "task_ranges", "STATE_LIMIT"]

#: Visited states :func:`policy_change` compares the two policies on (the later checkpoint's first episodes; their
#: replay costs about a third of a 200-episode MinAtar rollout at 512).
STATE_LIMIT = 512


def checkpoint_config(cp: TimelineCheckpoint, config: Any) -> Any:
    """The RenderConfig ``rlviz render`` would run for this checkpoint (its own VecNormalize statistics unless
    ``--vecnormalize`` names some)."""
    rc = config.render_config(cp.path)
    if rc.vecnormalize is None and cp.vecnormalize is not None:
        rc = replace(rc, vecnormalize=cp.vecnormalize)
    return rc


def load_checkpoint(cp: TimelineCheckpoint, rc: Any) -> LoadedAgent:
    """The agent of ``cp`` as ``rlviz render`` of that file loads it (``rc``: its RenderConfig): a flax params file
    (``step_<N>.msgpack``) with ``--env gymnax:...``, ``--model`` and ``--critic`` by
    :func:`rlviz.jobs.stages.load_flax_agent`, any other by :meth:`TimelineCheckpoint.load`."""
    if cp.agent is None and wants_jax_agent(rc):
        return load_flax_agent(rc)
    return cp.load(rc)


def _identity(cp: TimelineCheckpoint) -> tuple[str, str] | None:
    """(env id, recipe JSON) of an evaluated checkpoint: what must match across a run (the env's actions with it)."""
    if cp.agent is not None:
        return cp.agent.recipe.env_id, cp.agent.recipe.to_json()
    if cp.result is not None:
        return cp.result.env_id, cp.result.recipe_json
    return None


def check_same_run(reference: TimelineCheckpoint, cp: TimelineCheckpoint) -> None:
    """A usage error unless ``cp`` runs on the reference checkpoint's env with the same actions."""
    ref, new = _identity(reference), _identity(cp)
    if ref is None or new is None or ref == new:
        return
    what = f"env {ref[0]!r} vs {new[0]!r}" if ref[0] != new[0] else f"different settings of {new[0]!r}"
    raise UsageError(f"RUN mixes checkpoints of different runs: {reference.name} and {cp.name} ({what}); a timeline "
                     "plays every checkpoint on the same seeds of one env: pass the checkpoints of one training run.")


def evaluate_checkpoint(cp: TimelineCheckpoint, config: Any,
                        reference: TimelineCheckpoint | None = None) -> TimelineCheckpoint:
    """``cp`` with its agent, rollout and summary (``rlviz render``'s); a checkpoint that fails to load or play comes
    back with ``error`` (one line naming the file) instead. ``reference``: an evaluated checkpoint of the run
    (a different env is a UsageError). In this process; :func:`evaluate_many` runs checkpoints in workers."""
    rc = checkpoint_config(cp, config)
    try:
        agent = load_checkpoint(cp, rc)
    except UsageError:
        raise
    except (Exception, RecursionError) as exc:  # a file that does not load is this checkpoint's failure alone
        return replace(cp, error=reason_line(cp.name, cp.path, exc))
    if reference is not None:
        check_same_run(reference, replace(cp, agent=agent))
    gamma = float(config.gamma if config.gamma is not None else agent.gamma)
    jax_kind = is_jax_agent(agent)  # a flax agent: the JAX engine plays the seeds (rlviz.training.jax_checkpoints)
    try:
        if jax_kind:
            result = jax_checkpoint_rollout(agent, config, gamma)
        else:
            with torch_threads(config.threads):
                result = run_rollouts(agent, rc, gamma)
    except UsageError:
        raise
    except RlvizError as exc:
        return replace(cp, agent=agent, error=reason_line(cp.name, cp.path, exc))
    summary = summarise(result, run_kind(agent, result) if jax_kind else agent.policy.kind).to_dict()
    return replace(cp, agent=agent, result=result, summary=summary, error=None)


class _Visited(gym.Wrapper):
    """Keeps the observations an episode's policy acts on (reset and each step's, but the last)."""

    def __init__(self, env: gym.Env, limit: int):
        super().__init__(env)
        self.seen: list = []
        self.limit = limit

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._keep(obs)
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, term, trunc, info = self.env.step(action)
        if not (term or trunc):
            self._keep(obs)
        return obs, reward, term, trunc, info

    def _keep(self, obs: Any) -> None:
        if len(self.seen) < self.limit:
            self.seen.append(np.array(obs, copy=True))


@dataclass(frozen=True)
class CheckpointTask:
    """A worker's unit: episodes ``[first_episode, first_episode + episodes)`` of one checkpoint (``source``), and
    for its first shard (``previous`` given) the policy change against the previous checkpoint on its states."""

    source: AgentSource
    gamma: float | None
    first_episode: int
    episodes: int
    num_envs: int
    previous: AgentSource | None = None

    def __str__(self) -> str:
        return f"episodes {self.first_episode}-{self.first_episode + self.episodes - 1} of {self.source.path}"


@dataclass(frozen=True)
class CheckpointPart:
    """What a worker returns for a :class:`CheckpointTask`: the shard's rollout (or ``error``, one line), the
    policy's kind, and the policy change (first shard only)."""

    result: Any = None
    kind: str = ""
    change: dict | None = None
    error: str | None = None


def run_checkpoint(task: CheckpointTask, progress: Any = None) -> CheckpointPart:
    """A worker's :class:`CheckpointTask` (top level, so workers can import it)."""
    try:
        try:
            agent = task.source.load()
        except (UsageError, RlvizError):
            raise
        except (Exception, RecursionError) as exc:  # the file's failure, said in one line by the driver
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise CheckpointError(f"cannot be read ({type(exc).__name__}: {first})") from None
        gamma = float(agent.gamma if task.gamma is None else task.gamma)
        result = run_shard(ShardTask(task.source, gamma, task.first_episode, task.episodes, num_envs=task.num_envs),
                           progress)
    except UsageError:
        raise
    except RlvizError as exc:
        return CheckpointPart(error=str(exc))
    change = None
    if task.previous is not None:
        try:
            earlier = task.previous.load()
        except RlvizError:  # a checkpoint that failed: the driver measures against the one before it
            earlier = None
        change = None if earlier is None else policy_change(earlier, agent, visited_states(agent, task.source.config))
    return CheckpointPart(result, agent.policy.kind, change)


def evaluate_many(cps: list[TimelineCheckpoint], config: Any, backend: Any, previous: TimelineCheckpoint | None,
                  reference: TimelineCheckpoint | None) -> list[TimelineCheckpoint]:
    """``cps`` (in step order, all after ``previous``) evaluated in ``backend``'s workers: each with its result,
    summary and ``policy_change`` against the checkpoint before it (``previous`` for the first), or its ``error``.
    The agents stay in the workers (``agent`` None: :meth:`TimelineCheckpoint.load` loads one here if needed)."""
    configs = [checkpoint_config(cp, config) for cp in cps]
    if getattr(backend, "put", None) is None:  # local workers forked from here inherit what the first load imports
        try:
            share_agent(configs[0], cps[0].load(configs[0]))
        except RlvizError:  # its worker says what is wrong with it
            pass
    sources = [source_for(rc, backend) for rc in configs]
    before = [None if previous is None else source_for(checkpoint_config(previous, config), backend), *sources[:-1]]
    size = int(getattr(backend, "size", 1))
    layout = task_ranges(len(cps), int(config.episodes), size, int(config.num_envs))
    # the queue: each checkpoint's first task (it also measures the policy change: the longer one), then the rest
    order = sorted(((k, i, r) for i, ranges in enumerate(layout) for k, r in enumerate(ranges)), key=lambda t: t[0] > 0)
    tasks = [CheckpointTask(sources[i], config.gamma, r.start, len(r), min(config.num_envs, len(r)),
                            before[i] if k == 0 else None) for k, i, r in order]
    owner = [i for _, i, _ in order]
    with progress.bar(int(config.episodes) * len(cps), "rollouts", unit="ep") as shown:
        parts = backend.map(run_checkpoint, tasks, progress=lambda ret: shown.update(1, ret=f"{ret:.1f}"),
                            what="the rollout of", meanwhile=lambda: import_now(("matplotlib.pyplot",)))  # (for timeline.png)
    out = []
    for i, cp in enumerate(cps):
        mine = [p for p, o in zip(parts, owner) if o == i]  # (its first task's part first: the policy change)
        failed = next((p.error for p in mine if p.error is not None), None)
        if failed is not None:
            out.append(replace(cp, error=reason_line(cp.name, cp.path, CheckpointError(failed))))
            continue
        result = merge_rollouts([p.result for p in mine], sum(p.result.wall_s for p in mine))  # its workers' time
        summary = summarise(result, mine[0].kind).to_dict()
        vs = cps[i - 1].step if i else (previous.step if previous is not None else None)
        change = None if mine[0].change is None or vs is None else {"vs_step": int(vs), **mine[0].change}
        done = replace(cp, result=result, summary=summary, policy_change=change, error=None)
        if reference is not None:
            check_same_run(reference, done)
        reference = reference or done
        out.append(done)
    return out


def task_ranges(checkpoints: int, episodes: int, workers: int, num_envs: int = 16) -> list[list[range]]:
    """Per checkpoint (in the order the workers take them), the episode ranges of its tasks. With fewer checkpoints
    than workers each is split (:func:`~rlviz.evaluate.backends.workers.shard_ranges`) so that every worker has work; else
    each is one task, but for the last ``workers`` checkpoints, split in ``workers`` parts each: the queue ends in
    short tasks, so the workers finish together (how long a checkpoint's episodes last is not known before they
    run). Results do not depend on the split (episode k always plays on its own seed)."""
    workers = max(1, int(workers))
    if workers == 1:
        return [[range(episodes)] for _ in range(checkpoints)]
    per = -(-workers // max(1, checkpoints))
    if per > 1:
        return [shard_ranges(episodes, per, num_envs) for _ in range(checkpoints)]
    tail = min(workers, episodes)
    split = [range(round(k * episodes / tail), round((k + 1) * episodes / tail)) for k in range(tail)]
    return [[range(episodes)] if i < checkpoints - workers else split for i in range(checkpoints)]


def visited_states(agent: LoadedAgent, config: Any, limit: int = STATE_LIMIT) -> np.ndarray | None:
    """float/uint8 ``[n <= limit, *obs_shape]``: the observations ``agent``'s policy acted on in the run's first
    episodes (episode k replayed alone on its seed, as in the rollout), or None when they are not plain arrays
    (dict/tuple observations). A recurrent policy's are its first episode's (from its start, at most ``limit``):
    ``policy.evaluate`` reads them as one episode, so each checkpoint is asked with its memory run along it."""
    if is_jax_agent(agent):
        return jax_visited_states(agent, config, limit)
    from ..envs import make_env

    recurrent = capabilities_of(agent.policy).recurrent
    gamma = float(config.gamma if config.gamma is not None else agent.gamma)
    env = _Visited(make_env(agent.recipe, render_mode="rgb_array"), limit)
    try:
        for k in range(1 if recurrent else int(config.episodes)):
            if len(env.seen) >= limit:
                break
            with torch_threads(config.threads):
                replay_episode(agent.recipe, agent.policy, episode_seed_for(config.seed, k),
                               RolloutPlan(1, greedy=bool(config.greedy), fail_on=config.fail_on, gamma=gamma), env=env)
    finally:
        env.close()
    if not env.seen or np.asarray(env.seen[0]).dtype == object:
        return None
    return np.stack(env.seen)


def policy_change(earlier: LoadedAgent, later: LoadedAgent, states: np.ndarray | None) -> dict | None:
    """How the policy changed from ``earlier`` to ``later`` on ``states`` (the later checkpoint's visited states):
    ``{"states", "tv_mean", "kl_mean", "kl_direction": "later||earlier", "distribution"}``; TV is the mean
    total-variation distance (0: the same actions, 1: disjoint); KL is in nats (Gaussian KL for Box actions; TV
    then its Pinsker bound). Deterministic actors: no TV or KL, but ``action_distance_mean`` (the actions' Euclidean
    distance) and ``action_gap_mean`` (scaled by the action bounds, as compare's disagreements measure them). None
    without states."""
    if states is None or len(states) == 0:
        return None
    if is_jax_agent(later):  # a flax agent's categorical policy (others: not measured)
        p_new, p_old = jax_action_probs(later, states), jax_action_probs(earlier, states)
        if p_new is None or p_old is None:
            return None
        tv, kl = _tv_kl_categorical(p_new, p_old, None)
        return {"states": int(len(states)), "tv_mean": float(tv.mean()), "kl_mean": float(kl.mean()),
                "kl_direction": "later||earlier", "distribution": "categorical"}
    with torch_threads(1):
        new, old = later.policy.evaluate(states), earlier.policy.evaluate(states)
    dist = new.dist
    if new.mean is not None and old.mean is not None and new.std is not None and old.std is not None:
        tv, kl = _tv_kl_gaussian(new.mean, new.std, old.mean, old.std)
    elif new.mean is not None and old.mean is not None:  # deterministic actors: the mean distance of the actions
        spec = getattr(later.policy, "action_spec", None)
        return {"states": int(len(states)), "tv_mean": None, "kl_mean": None, "distribution": dist,
                "action_distance_mean": float(action_l2(new.mean, old.mean).mean()),
                "action_gap_mean": float(action_gap(new.mean, old.mean, getattr(spec, "low", None),
                                                    getattr(spec, "high", None)).mean())}
    else:
        tv, kl = _tv_kl_categorical(new.probs.astype(np.float64), old.probs.astype(np.float64), new.nvec)
    finite = np.isfinite(tv) & np.isfinite(kl)
    if not finite.any():
        warnings.warn("policy_change: the action distributions are not finite on any visited state.", stacklevel=2)
        return None
    return {"states": int(finite.sum()), "tv_mean": float(tv[finite].mean()), "kl_mean": float(kl[finite].mean()),
            "kl_direction": "later||earlier", "distribution": dist}
