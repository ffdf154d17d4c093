"""The job skeleton's stages for a flax agent on a JAX env (``gymnax:...``, ``craftax:...``, ``brax:...``,
``jumanji:...``): its episodes rolled out by the JAX engine (:func:`jax_rollouts`, stage 2) and a chosen episode
replayed alone into its video and ``.npz`` (:func:`record_jax_episode`, stage 4). The shared stages call them when the
agent's env is a JAX env id (:func:`is_jax_agent`): :func:`rlviz.jobs.rollouts.run_rollouts`,
:func:`rlviz.jobs.videos.record_episode` / :func:`~rlviz.jobs.videos.record_videos`; so render's JAX job, ``compare``
(each agent, paired on the same episode keys) and the explorer's replays make the same files from the same episodes.

One :class:`~rlviz.jax.rollout.JaxEngine` per (policy, env, greedy, fail_on, heatmap) is kept (:func:`jax_engine_for`):
its compiled functions serve the rollout and every video of the agent. The worker backends are not used: the batch
runs on the accelerator (or is sharded over devices by the engine). Nothing here imports jax at module import."""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..choices import DEFAULT_NUM_ENVS
from ..config import RenderConfig
from ..envs.jax_ids import is_jax_env_id
from ..envs.recipe import EnvRecipe
from ..episode import EpisodeResult
from ..episode.trace import EpisodeInternals, EpisodeTrace, returns_to_go
from ..errors import UsageError

__all__ = ["is_jax_agent", "jax_engine_for", "jax_rollouts", "record_jax_episode", "write_jax_video", "run_kind",
           "parse_json_kwargs", "with_env_kwargs", "jax_batch", "JAX_BATCH", "jax_internals", "write_trace_video"]

#: the JAX engine's batch when --num-envs is left at its default (the gymnasium path's 16 envs is a tiny batch here)
JAX_BATCH = 1024
#: engines kept (each holds its compiled functions): compare's two agents, an explorer's few
_KEPT = 4
_ENGINES: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def is_jax_agent(agent: Any) -> bool:
    """The agent plays a JAX env (its recipe's id has a JAX family prefix): the JAX engine runs its stages."""
    return is_jax_env_id(getattr(getattr(agent, "recipe", None), "env_id", None))


def parse_json_kwargs(text: str | dict[str, Any] | None, flag: str) -> dict[str, Any]:
    """``--env-kwargs`` / ``--model-kwargs``: a JSON object (or a dict from Python) -> dict."""
    if text is None or text == "":
        return {}
    if isinstance(text, dict):
        return dict(text)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r} is not JSON ({exc}); expected an object such as '{{\"key\": 1}}'.") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} {text!r} is a JSON {type(value).__name__}; expected an object.")
    return value


def with_env_kwargs(recipe: Any, config: RenderConfig) -> Any:
    """``recipe`` with ``--env-kwargs`` over its own env kwargs (the run's recipe records them)."""
    kwargs = parse_json_kwargs(config.env_kwargs, "--env-kwargs")
    if not kwargs:
        return recipe
    return EnvRecipe(recipe.env_id, {**recipe.env_kwargs, **kwargs}, recipe.wrappers, recipe.saliency_mode)


def jax_engine_for(agent: Any, config: RenderConfig) -> Any:
    """The :class:`~rlviz.jax.rollout.JaxEngine` of ``agent`` on its recipe's JAX env (the same one, compiled
    functions and all, for the same policy object and options; for another policy of equal modules, e.g. another
    checkpoint of the run, a copy playing that policy's params with the same compiled functions)."""
    import copy

    from ..jax.policy import policy_key

    recipe = with_env_kwargs(agent.recipe, config)
    key = (policy_key(agent.policy), recipe.to_json(), bool(config.greedy), str(config.fail_on),
           bool(config.heatmap))
    engine = _ENGINES.get(key)
    if engine is not None:
        _ENGINES.move_to_end(key)
        if engine.policy is not agent.policy:
            engine = copy.copy(engine)  # (shallow: its compiled functions shared; they take the params)
            engine.policy = agent.policy
        return engine
    from ..jax.envs import make_jax_env
    from ..jax.rollout import JaxEngine

    env = make_jax_env(recipe.env_id, recipe.env_kwargs)
    if env.discrete and len(agent.policy.action_names) not in (0, len(env.action_names)):
        raise UsageError(f"The policy has {len(agent.policy.action_names)} actions; {env.env_id} has "
                         f"{len(env.action_names)} ({', '.join(env.action_names)}).")
    engine = JaxEngine(env, agent.policy, greedy=config.greedy, fail_on=config.fail_on, heatmap=bool(config.heatmap))
    _ENGINES[key] = engine  # (the engine holds the policy: its id stays this policy's while kept)
    while len(_ENGINES) > _KEPT:
        _ENGINES.popitem(last=False)
    return engine


def jax_batch(config: RenderConfig) -> int:
    """The batch of the JAX rollout: ``--num-envs`` when given, else :data:`JAX_BATCH` (the episodes do not depend on
    it: :mod:`rlviz.jax.rollout`)."""
    return int(config.num_envs) if config.num_envs != DEFAULT_NUM_ENVS else min(int(config.episodes), JAX_BATCH)


def jax_rollouts(agent: Any, config: RenderConfig, gamma: float, indices: Any = None) -> Any:
    """Stage 2 on the JAX engine: the config's episodes of ``agent`` (``indices``: only those, each as in the whole
    run), as a :class:`~rlviz.evaluate.RolloutResult` (statistics; the heatmap with ``config.heatmap``)."""
    from ..jax.rollout import jax_rollout

    engine = jax_engine_for(agent, config)
    count = config.episodes if indices is None else len(set(indices))
    with progress.bar(count, "rollouts", unit="ep", show=config.progress) as bar:
        return jax_rollout(engine, config.episodes, seed=config.seed, num_envs=jax_batch(config), gamma=gamma,
                           progress=bar.update, indices=indices)


def run_kind(agent: Any, result: Any) -> str:
    """The run record's policy kind ("actor_critic" | "logits" | "q") of a JAX agent's rollout."""
    if agent.policy.kind == "q":
        return "q"
    return "actor_critic" if any(e.value_sums is not None for e in result.episodes) else "logits"


def record_jax_episode(agent: Any, record: EpisodeResult, folder: Path, name_prefix: str, config: RenderConfig,
                       gamma: float, min_seconds: float) -> tuple[EpisodeResult, float]:
    """Stage 4 on the JAX engine: episode ``record`` replayed alone into ``folder`` as
    ``<name_prefix>-episode-0.mp4`` + ``.npz`` (the names a gymnasium run's video has): (its result with
    ``video_path``, the env's frame rate). ``min_seconds``: as :func:`rlviz.jobs.videos.record_episode`'s."""
    engine = jax_engine_for(agent, config)
    with progress.phase(f"video {name_prefix.replace('-', ':', 1)} ({record.length} steps)"):
        done = write_jax_video(engine, record, folder, name_prefix, config, gamma, min_seconds)
    return done, float(engine.env.fps)


def write_jax_video(engine: Any, record: EpisodeResult, folder: Path, name_prefix: str, config: RenderConfig,
                    gamma: float, min_seconds: float = 2.0) -> EpisodeResult:
    """Episode ``record`` replayed alone (:func:`rlviz.jax.replay.replay_jax_episode`), drawn on the host and written
    as ``<name_prefix>-episode-0.mp4`` + ``.npz`` in ``folder``: its result with ``video_path``."""
    import jax

    from ..jax.replay import replay_jax_episode, saliency_maps

    env, policy = engine.env, engine.policy
    rep = replay_jax_episode(engine, int(record.seed or 0))
    frames = np.stack([np.asarray(env.frame(jax.tree_util.tree_map(lambda a, t=t: a[t], rep.states)))
                       for t in range(rep.length + 1)])
    actions = rep.actions.astype(np.int64) if env.discrete else rep.actions.astype(np.float32)
    trace = EpisodeTrace(frames, rep.observations, actions, rep.rewards, None, rep.terminated, rep.truncated,
                         tuple(env.action_names), int(record.index), record.seed, float(env.fps), env.env_id)
    internals = jax_internals(policy, rep, gamma, env)
    if config.saliency:
        maps = saliency_maps(config.saliency, policy, rep.observations)
        internals = replace(internals, saliency=maps, saliency_label=f"{config.saliency} (actor)")
    path = write_trace_video(trace, internals, folder / f"{name_prefix}-episode-0.mp4", min_seconds)
    ret = float(np.add.accumulate(rep.rewards.astype(np.float64))[-1])
    if not np.isclose(ret, record.ret):
        warnings.warn(f"Replaying episode {record.index} (seed {record.seed}) gave return {ret:g}; the rollout gave "
                      f"{record.ret:g}: the env or the policy is not a function of the episode's key alone, so this video may "
                      "differ from the statistics.", stacklevel=2)
    return replace(record, ret=ret, length=rep.length, terminated=rep.terminated, truncated=rep.truncated,
                   video_path=path)


def write_trace_video(trace: EpisodeTrace, internals: EpisodeInternals, path: Path,
                      min_seconds: float = 2.0) -> Path:
    """The episode's panel video at ``path`` (``.mp4``, lasting at least ``min_seconds``) and its per-step ``.npz``
    beside it, at the trace's frame rate: what every JAX video is written by (render, compare, explore, and
    :func:`rlviz.jax_loop.recording.record_batch`)."""
    from ..draw.compose import ComposeOptions
    from ..draw.video import video_timing, write_episode_video
    from ..record.internals import save_episode_data

    path.parent.mkdir(parents=True, exist_ok=True)
    compose = ComposeOptions(min_seconds=min_seconds)
    write_episode_video(trace, internals, path, options=compose, fps=trace.fps)
    rate, _ = video_timing(trace.num_steps + 1, float(trace.fps), compose.min_seconds)
    save_episode_data(trace, internals, path.with_suffix(".npz"), fps=rate)
    return path


def jax_internals(policy: Any, rep: Any, gamma: float, env: Any = None) -> EpisodeInternals:
    """The panels' numbers of an episode from a JAX policy's outputs over its T+1 observations: ``policy.kind``
    ("logits" | "gaussian" | "q") and ``.squash``; ``rep``: ``.outputs`` (a PolicyOut of numpy [T+1, ...]),
    ``.observations`` [T+1, ...], ``.rewards`` [T], ``.truncated`` (a :class:`~rlviz.jax.replay.Replayed`)."""
    out = rep.outputs
    value = None if out.value is None else np.asarray(out.value, np.float32).reshape(-1)
    if policy.kind == "q":
        logits = np.asarray(out.q, np.float32)
        probs = np.eye(logits.shape[-1], dtype=np.float32)[logits.argmax(-1)]
        value = logits.max(-1) if value is None else value
        entropy = np.zeros(len(logits), np.float32)
        kind = "q"
    elif policy.kind == "logits":
        from ..agent.actions import relative_entropy

        logits = np.asarray(out.logits, np.float32)
        z = logits - logits.max(-1, keepdims=True)
        probs = (np.exp(z) / np.exp(z).sum(-1, keepdims=True)).astype(np.float32)
        entropy = relative_entropy(probs)
        kind = "actor_critic" if value is not None else "logits"
    else:  # a Gaussian: drawn as the gymnasium path draws a Box policy (the mean as its "logits")
        from ..agent.actions import policy_entropy

        mean = np.asarray(out.mean, np.float32).reshape(len(rep.observations), -1)
        std = None if out.std is None else np.broadcast_to(np.asarray(out.std, np.float32), mean.shape).copy()
        bootstrap = float(value[-1]) if rep.truncated and value is not None else 0.0
        low, high = getattr(env, "action_low", None), getattr(env, "action_high", None)
        return EpisodeInternals(mean, np.zeros((len(mean), 0), np.float32), value, "actor_critic", None, mean, std,
                                bool(policy.squash), low, high, entropy=policy_entropy(None, mean=mean, std=std),
                                returns_to_go=returns_to_go(rep.rewards, gamma, bootstrap), gamma=float(gamma))
    bootstrap = float(value[-1]) if rep.truncated and value is not None else 0.0
    rtg = returns_to_go(rep.rewards, gamma, bootstrap)
    return EpisodeInternals(logits, probs, value, kind, entropy=entropy, returns_to_go=rtg, gamma=float(gamma))
