"""The jobs' videos (render's, compare's per agent, the explorer's replays): which episodes get one
(:func:`select_episodes`), each replayed into a video by the one function that makes an episode's video
(:func:`record_episode`: render, compare and ``rlviz explore``'s on-demand videos all call it), in this process or as
a worker's unit (:class:`VideoTask`, its files brought back as bytes and written under the driver's folder by
:func:`write_video_files`); :func:`record_videos` runs them all for a rollout.

A replay plays the rollout's actions again (the env under the same seed) and runs the policy once, batched, for the
panels (:func:`rlviz.record.episode.play_actions`); a record without its actions is played again by the policy.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from .. import progress
from ..analysis.attention import ShareTrack, attention_spec
from ..config import RenderConfig, parse_video_spec
from ..envs import make_env
from ..episode import EpisodeResult
from ..errors import UsageError
from ..evaluate import RolloutResult
from ..evaluate.backends.workers import Backend
from ..media.atomic import atomic_path
from ..sources import LoadedAgent
from .jax_stages import is_jax_agent, jax_rollouts, record_jax_episode
from .shards import AgentSource, source_for

__all__ = ["VideoTask", "record_video_task", "record_episode", "rollout_alone", "write_video_files", "share_track",
           "MIN_VIDEO_SECONDS", "select_episodes", "record_videos", "nothing_failed_at"]

#: render's videos last at least this long: short episodes play slower and hold their last frame.
MIN_VIDEO_SECONDS = 2.0


@dataclass(frozen=True)
class VideoTask:
    """Replay ``record`` through RecordEpisode as ``name_prefix``; the files come back as bytes. ``min_seconds``:
    as :func:`record_episode`'s (compare's videos are frame-locked: 0)."""

    source: AgentSource
    gamma: float
    name_prefix: str
    record: EpisodeResult
    min_seconds: float = MIN_VIDEO_SECONDS

    def __str__(self) -> str:
        return f"the video of episode {self.record.index}"


def record_video_task(task: VideoTask, progress: Any = None) -> tuple[EpisodeResult, float, dict[str, bytes], list[str]]:
    """(the replay's result, fps, {file name: bytes}, warning messages) of one video, recorded in a private
    folder; the driver writes the files and re-issues the warnings."""
    agent = task.source.load()
    with tempfile.TemporaryDirectory(prefix="rlviz-video-") as d, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, fps = record_episode(agent, task.record, Path(d), task.name_prefix, task.source.config, task.gamma,
                                     min_seconds=task.min_seconds)
        files = {p.name: p.read_bytes() for p in sorted(Path(d).iterdir()) if p.is_file()}
    name = Path(result.video_path).name if result.video_path else None
    return replace(result, video_path=name), fps, files, [str(w.message) for w in caught]  # type: ignore[arg-type]


def write_video_files(files: dict[Any, Any], folder: Path) -> dict[Any, Any]:
    """Write a worker's video files under ``folder`` (each atomically); {name: final path}."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, data in files.items():
        with atomic_path(folder / name) as tmp:
            tmp.write_bytes(data)
        out[name] = folder / name
    return out


def record_episode(agent: LoadedAgent, record: EpisodeResult | int, folder: Path, name_prefix: str,
                   config: RenderConfig, gamma: float, min_seconds: float = MIN_VIDEO_SECONDS,
                   check: Callable[[EpisodeResult], None] | None = None) -> tuple[EpisodeResult, float]:
    """Replay one episode of ``agent`` (its env recipe, ``config``'s seed and flags) into its video in ``folder``
    (``<name_prefix>-episode-0.mp4`` and its per-step ``.npz``): its result (with ``video_path``, ``index`` the
    rollout's) and the env's frame rate. The one function render, compare (per agent) and ``rlviz explore`` make an
    episode's video with.

    ``record``: the episode as the run's rollout played it (render, compare), or its index ``n`` (explore): then it is
    rolled out again alone first, from its seed as in the whole run (:func:`rollout_alone`), and ``check(record)`` may
    refuse it before its video is made (explore: when it does not play as the run's table says). A short episode's
    video is slowed and held to last ``min_seconds`` (:func:`rlviz.draw.video.video_timing`). A flax agent on a JAX
    env: the episode replayed alone by the JAX engine (:func:`rlviz.jobs.jax_stages.record_jax_episode`), into the
    same files."""
    episode: EpisodeResult = record if isinstance(record, EpisodeResult) else next(
        e for e in rollout_alone(agent, config, gamma, int(record)).episodes if e.index == int(record))
    if check is not None:
        check(episode)
    if is_jax_agent(agent):
        return record_jax_episode(agent, episode, folder, name_prefix, config, gamma, min_seconds)
    from ..draw.compose import ComposeOptions  # (the recorder and the drawing code load with the first video)
    from ..record import RecordEpisode, RecordOptions, run_episode
    from ..record.episode import play_actions

    env = RecordEpisode(
        make_env(agent.recipe),
        folder,
        agent.policy,
        name_prefix=name_prefix,
        options=RecordOptions(gamma=gamma, saliency=config.saliency, saliency_target=config.saliency_target,
                              memory_window=getattr(config, "memory_window", 16), action_names=agent.action_names, compose_options=ComposeOptions(min_seconds=min_seconds),
                              background=False,  # a batch job draws in its own thread (no writer thread to stop)
                              camera=getattr(config, "camera", None)),
    )
    spec = attention_spec(config)  # with attention: the per-object share track under the panels
    track = share_track(episode) if spec is not None else None
    try:
        with progress.phase(f"video {name_prefix.replace('-', ':', 1)} ({episode.length} steps)"):
            if episode.actions is not None and (spec is None or track is not None):
                # the env replays the rollout's actions; the policy runs once, batched, for the panels
                replayed = play_actions(env, episode, track)
            else:  # a record without its actions (or attention shares): played again by the policy
                played = env if spec is None else ShareTrack(env, spec, agent.policy, agent.recipe.env_id,
                                                             config.objects)
                replayed = run_episode(played, seed=episode.seed, greedy=episode.greedy)
    finally:
        env.close()
    if not np.isclose(replayed.ret, episode.ret):
        warnings.warn(
            f"Replaying episode {episode.index} (seed {episode.seed}) gave return {replayed.ret:g}; the rollout gave "
            f"{episode.ret:g}. The env is not deterministic under its seed, so this video may differ "
            "from the statistics.",
            stacklevel=2,
        )
    return replace(replayed, index=episode.index), env.fps


def rollout_alone(agent: LoadedAgent, config: RenderConfig, gamma: float, n: int) -> RolloutResult:
    """Episode ``n`` of ``config``'s rollout, alone (render's rollout with one env and ``indices=(n,)``: episode
    outcomes do not depend on how many envs run beside it; a JAX agent's: the JAX engine's, episode ``n``'s key as
    in the run)."""
    config = replace(config, num_envs=1)
    if is_jax_agent(agent):
        return cast(RolloutResult, jax_rollouts(agent, config, gamma, indices=(n,)))
    from ..evaluate.rollouts.plan import RolloutPlan, RolloutProbes
    from ..evaluate.rollouts.rollout import rollout

    plan = RolloutPlan.for_config(config, gamma, num_envs=1, indices=(n,), progress=False)
    return rollout(agent.recipe, agent.policy, plan, RolloutProbes(attention=attention_spec(config)))


def share_track(record: EpisodeResult) -> list[dict[str, float]] | None:
    """The video's share track from the rollout's attention (``EpisodeResult.attention["track"]``: each step's
    share per object): ``[{"attention <name>": share}]`` per step, or None when the rollout kept none."""
    att = record.attention or {}
    track = att.get("track")
    if track is None:
        return None
    keys = [f"attention {n}" for n in att["names"]]
    return [dict(zip(keys, map(float, row))) for row in np.asarray(track)]


def select_episodes(returns: np.ndarray, spec: list[tuple[str, Any]], seed: int = 0,
                    heatmap: Any = None) -> list[tuple[str, int]]:
    """Pick episode indices for each item of ``spec`` (:func:`parse_video_spec`); an episode is listed once, first
    label wins. ``episode`` items name an episode; ``failed-at`` items ((x, y), labelled "failed") select the
    episodes whose failures put an object on that pixel of ``heatmap`` (a FailureHeatmap with its per-episode
    contributions: :meth:`~rlviz.evaluate.failures.heatmap.FailureHeatmap.episodes_at`)."""
    returns = np.asarray(returns, dtype=np.float64)
    n = returns.shape[0]
    order = np.argsort(returns, kind="stable")  # ascending return; ties by episode index
    rng = np.random.default_rng(seed)
    chosen: list[tuple[str, int]] = []
    seen: set[int] = set()
    for kind, k in spec:
        if kind == "episode":
            if not 0 <= k < n:
                raise UsageError(f"--videos episode:{k}: the run has {n} episodes (0-{n - 1}); name one of them.")
            idx, kind = [k], "episode"
        elif kind == "failed-at":
            if heatmap is None:
                raise UsageError(f"--videos failed-at:{k[0]},{k[1]} selects by the failure heatmap; add --heatmap.")
            idx, kind = heatmap.episodes_at(k[1], k[0]), "failed"
            if not idx:  # said, not a silent run without the video asked for
                warnings.warn(nothing_failed_at(k, heatmap), UserWarning, stacklevel=2)
        else:
            idx = _ranked(kind, min(k, n), n, order, rng)
        for i in idx:
            if int(i) not in seen:
                seen.add(int(i))
                chosen.append((kind, int(i)))
    return chosen


def nothing_failed_at(cell: tuple[int, int], heatmap: Any) -> str:
    """What ``--videos failed-at:X,Y`` says when no episode's failures put an object on that pixel."""
    x, y = cell
    failures = int(getattr(heatmap, "failures", 0))
    hottest = ""
    if failures:
        total = np.asarray(heatmap.total())
        hy, hx = np.unravel_index(int(np.argmax(total)), total.shape)
        hottest = f"; the most are at failed-at:{hx},{hy}"
    return (f"--videos failed-at:{x},{y}: no episode's failures put an object on pixel ({x}, {y}) of the failure "
            f"heatmap ({failures} failure(s) in all{hottest}), so it selects no video. Pick a cell that heatmap.png "
            "colours (rlviz explore lists each cell's episodes).")


def _ranked(kind: str, k: int, n: int, order: np.ndarray, rng: np.random.Generator) -> list[Any]:
    """The ``k`` episodes a KIND:COUNT item selects (``order``: the episodes by ascending return)."""
    if kind == "first":
        return list(range(k))
    if kind == "worst":
        return list(order[:k])
    if kind == "best":
        return list(order[::-1][:k])
    if kind == "median":
        start = max(0, (n - k) // 2)
        return list(order[start : start + k])
    return list(rng.choice(n, size=k, replace=False))


def record_videos(agent: LoadedAgent, result: RolloutResult, folder: Path, config: RenderConfig,
                  gamma: float, backend: Backend | None = None, chosen: list[tuple[str, int]] | None = None,
                  min_seconds: float = MIN_VIDEO_SECONDS) -> tuple[list[EpisodeResult], float]:
    """Replay the episodes ``chosen`` ((label, episode) pairs; default: those ``config.videos`` selects) through
    :class:`RecordEpisode` as ``<label>-<episode>``: their results (with ``video_path``) and the videos' frame
    rate. A replay whose return differs from the rollout's gets a warning. With a ``backend`` the replays run in
    its workers and the files come back as bytes. ``min_seconds``: as :func:`record_episode`'s."""
    if chosen is None:
        chosen = select_episodes(result.returns, parse_video_spec(config.videos), seed=config.seed,
                                 heatmap=result.heatmap)
    if backend is not None and chosen and not is_jax_agent(agent):  # (a JAX agent's replays: on its device, here)
        source = source_for(config, backend)
        tasks = [VideoTask(source, gamma, f"{label}-{idx}", result.episodes[idx], min_seconds)
                 for label, idx in chosen]
        with progress.phase(f"{len(tasks)} video(s) in the workers"):
            done = backend.map(record_video_task, tasks, what="the replay of")
        videos = []
        for replayed, _, files, messages in done:
            paths = write_video_files(files, folder)
            videos.append(replace(replayed, video_path=paths.get(replayed.video_path)))
            for message in messages:
                warnings.warn(message, stacklevel=2)
        return videos, done[-1][1]
    videos, fps = [], 30.0
    for label, idx in chosen:
        replayed, fps = record_episode(agent, result.episodes[idx], folder, f"{label}-{idx}", config, gamma,
                                       min_seconds)
        videos.append(replayed)
    return videos, fps
