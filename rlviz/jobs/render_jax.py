"""``rlviz render`` for a flax agent on a JAX env (``--env gymnax:Breakout-MinAtar``): the JAX engine's rollout
(:mod:`rlviz.jax.rollout`) and replays (:mod:`rlviz.jax.replay`), then the render job's own stages: summary and
diagnostics, ``summary.json``, ``episodes.csv``, the heatmap, the videos (drawn and encoded by
:func:`rlviz.draw.video.write_episode_video`, their ``.npz`` by :func:`rlviz.record.internals.save_episode_data`:
the same files as a gymnasium run's), the sinks and ``report.html``.

The agent comes from ``rlviz.jax.load.load_jax_agent`` (flax params + ``--model``/``--critic`` classes), or is given
(:func:`render_jax_into`'s ``agent``: anything with ``.policy`` (a :class:`~rlviz.jax.contract.JaxPolicy`) and
``.recipe``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..choices import DEFAULT_NUM_ENVS
from ..config import RenderConfig, parse_video_spec
from ..envs.recipe import EnvRecipe
from ..episode import EpisodeResult
from ..episode.trace import EpisodeInternals, EpisodeTrace, returns_to_go
from ..errors import UsageError
from ..evaluate import format_table
from ..evaluate.statistics.stats import write_episodes_csv, write_summary_json
from ..report import REPORT_NAME, write_report
from ..sinks.base import Sink
from ..sinks.log import log_run
from .stages import run_log, run_record, summarise
from .videos import MIN_VIDEO_SECONDS

__all__ = ["render_jax_into", "load_jax", "jax_engine_for", "write_jax_video", "parse_json_kwargs", "jax_batch", "with_env_kwargs",
           "JAX_BATCH", "jax_internals", "write_trace_video"]


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


def load_jax(config: RenderConfig) -> Any:
    """The flax agent of ``config`` (``rlviz.jax.load.load_jax_agent``), its recipe carrying ``--env-kwargs``."""
    try:
        from ..jax.load import load_jax_agent
    except ImportError as exc:
        raise UsageError(f'JAX envs need jax and flax ({exc}); pip install "rlviz[jax]".') from None
    return load_jax_agent(config.checkpoint, model=config.model,
                          model_kwargs=parse_json_kwargs(config.model_kwargs, "--model-kwargs"), critic=config.critic,
                          critic_kwargs=parse_json_kwargs(config.critic_kwargs, "--critic-kwargs"), env=config.env)


def with_env_kwargs(recipe: Any, config: RenderConfig) -> Any:
    """``recipe`` with ``--env-kwargs`` over its own env kwargs (the run's recipe records them)."""
    kwargs = parse_json_kwargs(config.env_kwargs, "--env-kwargs")
    if not kwargs:
        return recipe
    return EnvRecipe(recipe.env_id, {**recipe.env_kwargs, **kwargs}, recipe.wrappers, recipe.saliency_mode)


def jax_engine_for(agent: Any, config: RenderConfig) -> Any:
    """The :class:`~rlviz.jax.rollout.JaxEngine` of ``agent`` on its recipe's JAX env."""
    from ..jax.envs import make_jax_env
    from ..jax.rollout import JaxEngine

    recipe = with_env_kwargs(agent.recipe, config)
    env = make_jax_env(recipe.env_id, recipe.env_kwargs)
    if env.discrete and len(agent.policy.action_names) not in (0, len(env.action_names)):
        raise UsageError(f"The policy has {len(agent.policy.action_names)} actions; {env.env_id} has "
                         f"{len(env.action_names)} ({', '.join(env.action_names)}).")
    return JaxEngine(env, agent.policy, greedy=config.greedy, fail_on=config.fail_on, heatmap=bool(config.heatmap))


def render_jax_into(folder: Path, config: RenderConfig, sinks: list[Sink], select_episodes: Any,
                    agent: Any = None) -> dict[str, Any]:
    """The run's outputs written into ``folder``: {summary, table, heatmap_npz, heatmap_png, videos: [{video}]}.
    ``select_episodes``: the render job's (``rlviz.jobs.render.select_episodes``)."""
    from ..jax.rollout import jax_rollout

    agent = agent if agent is not None else load_jax(config)
    engine = jax_engine_for(agent, config)
    gamma = float(config.gamma if config.gamma is not None else getattr(agent, "gamma", 0.99) or 0.99)
    with progress.bar(config.episodes, "rollouts", unit="ep", show=config.progress) as bar:
        result = jax_rollout(engine, config.episodes, seed=config.seed, num_envs=jax_batch(config), gamma=gamma,
                             progress=bar.update)
    kind = _torch_kind(agent.policy, result)
    summary = summarise(result, kind)
    write_summary_json(summary, folder / "summary.json")
    write_episodes_csv(result, folder / "episodes.csv")
    heatmap_npz = heatmap_png = None
    if result.heatmap is not None:
        heatmap_npz = result.heatmap.save(folder / "heatmap.npz")
        heatmap_png = result.heatmap.plot(folder / "heatmap.png", log=config.log_scale)
    chosen = select_episodes(result.returns, parse_video_spec(config.videos), seed=config.seed, heatmap=result.heatmap)
    videos: list[EpisodeResult] = []
    fps = float(engine.env.fps)
    for label, idx in chosen:
        record = result.episodes[idx]
        with progress.phase(f"video {label}:{idx} ({record.length} steps)"):
            videos.append(write_jax_video(engine, record, folder / "videos", f"{label}-{idx}", config, gamma))
    if sinks:
        log_run(sinks, run_log(summary, result, videos, heatmap_png, fps))
    paths = [v.video_path for v in videos if v.video_path is not None]
    write_report(folder / REPORT_NAME, [run_record(folder, summary.to_dict(), result, heatmap_png, paths)])
    return {"summary": summary.to_dict(), "table": format_table(summary), "heatmap_npz": heatmap_npz,
            "heatmap_png": heatmap_png, "videos": [{"video": p} for p in paths], "result": result}


#: the JAX engine's batch when --num-envs is left at its default (the gymnasium path's 16 envs is a tiny batch here)
JAX_BATCH = 1024


def jax_batch(config: RenderConfig) -> int:
    """The batch of the JAX rollout: ``--num-envs`` when given, else :data:`JAX_BATCH` (the episodes do not depend on
    it: :mod:`rlviz.jax.rollout`)."""
    return int(config.num_envs) if config.num_envs != DEFAULT_NUM_ENVS else min(int(config.episodes), JAX_BATCH)


def _torch_kind(policy: Any, result: Any) -> str:
    """The run record's policy kind ("actor_critic" | "logits" | "q") for a JAX policy's."""
    if policy.kind == "q":
        return "q"
    return "actor_critic" if any(e.value_sums is not None for e in result.episodes) else "logits"


def write_jax_video(engine: Any, record: EpisodeResult, folder: Path, name_prefix: str, config: RenderConfig,
                    gamma: float) -> EpisodeResult:
    """Episode ``record`` replayed alone (:func:`rlviz.jax.replay.replay_jax_episode`), drawn on the host and written
    as ``<name_prefix>-episode-<k>.mp4`` + ``.npz`` in ``folder``: its result with ``video_path``."""
    from dataclasses import replace

    from ..jax.replay import replay_jax_episode, saliency_maps

    env, policy = engine.env, engine.policy
    rep = replay_jax_episode(engine, int(record.seed or 0))
    import jax

    frames = np.stack([np.asarray(env.frame(jax.tree_util.tree_map(lambda a, t=t: a[t], rep.states)))
                       for t in range(rep.length + 1)])
    actions = rep.actions.astype(np.int64) if env.discrete else rep.actions.astype(np.float32)
    trace = EpisodeTrace(frames, rep.observations, actions, rep.rewards, None, rep.terminated, rep.truncated,
                         tuple(env.action_names), int(record.index), record.seed, float(env.fps), env.env_id)
    internals = jax_internals(policy, rep, gamma, env)
    if config.saliency:
        maps = saliency_maps(config.saliency, policy, rep.observations)
        internals = replace(internals, saliency=maps, saliency_label=f"{config.saliency} (actor)")
    path = write_trace_video(trace, internals, folder / f"{name_prefix}-episode-{record.index}.mp4")
    ret = float(np.add.accumulate(rep.rewards.astype(np.float64))[-1])
    if not np.isclose(ret, record.ret):
        warnings.warn(f"Replaying episode {record.index} (seed {record.seed}) gave return {ret:g}; the rollout gave "
                      f"{record.ret:g}: the env or the policy is not a function of the episode's key alone, so this video may "
                      "differ from the statistics.", stacklevel=2)
    return replace(record, ret=ret, length=rep.length, terminated=rep.terminated, truncated=rep.truncated,
                   video_path=path)


def write_trace_video(trace: EpisodeTrace, internals: EpisodeInternals, path: Path) -> Path:
    """The episode's panel video at ``path`` (``.mp4``, lasting at least :data:`MIN_VIDEO_SECONDS`) and its per-step
    ``.npz`` beside it, at the trace's frame rate: what every JAX video is written by."""
    from ..draw.compose import ComposeOptions
    from ..draw.video import video_timing, write_episode_video
    from ..record.internals import save_episode_data

    path.parent.mkdir(parents=True, exist_ok=True)
    compose = ComposeOptions(min_seconds=MIN_VIDEO_SECONDS)
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
