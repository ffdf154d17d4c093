"""Training-time logging for hand-written loops (CleanRL style).

Every N steps of your loop::

    from rlviz.integrations import log_episode
    from rlviz.sinks import TensorBoardSink

    sink = TensorBoardSink(writer=writer)          # the SummaryWriter your loop already has
    ...
    if global_step % 50_000 < num_envs:
        log_episode("ALE/Breakout-v5", TorchPolicy(agent_net), sink, global_step, seed=0)

One evaluation episode is played with the policy on a separate env, recorded with its panels to
an H.264 MP4, and logged (video + return/length/mean entropy) to every sink at ``step``.

A timeline of the run (``rlviz timeline``'s files, written as training goes): :class:`TimelineWriter`
(``TimelineWriter(out, env, episodes=..., sinks=...)``, then ``.add(policy, global_step)`` every N steps).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import gymnasium as gym
import numpy as np

from ..agent.policy import Policy
from ..envs.recipe import EnvRecipe, make_env
from ..errors import UsageError
from ..record import EpisodeResult, RecordEpisode, RecordOptions, run_episode
from ..sinks.base import Sink, as_sinks, check_step
from ..sinks.log import Logged, RunLog, log_run
from ..training.live import TimelineWriter

__all__ = ["log_episode", "LogOptions", "episode_scalars", "TimelineWriter", "check_log_options"]


def episode_scalars(result: EpisodeResult, recorder: RecordEpisode | None = None) -> dict[str, float]:
    """``return``, ``length`` and (when the recorder has them) ``entropy_mean`` (relative, 0..1) and
    ``value_mean`` of one episode."""
    out = {"return": float(result.episode_return), "length": float(result.length)}
    internals = recorder.last_internals if recorder is not None else None
    if internals is not None:
        out["entropy_mean"] = float(np.mean(internals.entropy))
        if internals.value is not None:
            out["value_mean"] = float(np.mean(internals.value))
    return out


@dataclass(frozen=True, eq=False)
class LogOptions:
    """How :func:`log_episode` and :class:`~rlviz.integrations.sb3.RlvizCallback` play, record and log an
    evaluation episode (all optional).

    greedy: take argmax actions (SB3's ``deterministic=True``) instead of sampling.
    name: the name the video is logged under; scalars go to ``<name>/return``, ``<name>/length``...
    max_steps: cut the episode after this many steps (logged as truncated).
    fps: the video's frame rate (None: the env's own).
    record: a :class:`~rlviz.record.RecordOptions` for the recorder (``gamma``, ``saliency``, ``preset``...).
    rng: :func:`log_episode`: an int or ``np.random.Generator`` that seeds the action sampling (default: ``seed``).
    verbose: :class:`~rlviz.integrations.sb3.RlvizCallback`: SB3's callback verbosity.
    """

    greedy: bool = False
    name: str = "eval/episode"
    max_steps: int | None = None
    fps: float | None = None
    record: RecordOptions = RecordOptions()
    rng: np.random.Generator | int | None = None
    verbose: int = 0


def check_log_options(options: LogOptions | None, where: str) -> LogOptions:
    """``options`` or the defaults; anything else is a :class:`UsageError`."""
    if options is None:
        return LogOptions()
    if not isinstance(options, LogOptions) or not isinstance(options.record, RecordOptions):
        raise UsageError(f"{where}(options={options!r}): expected a rlviz.integrations.LogOptions (greedy, name, "
                         "max_steps, fps, record=RecordOptions(...), rng) or None.")
    return options


def log_episode(
    env_or_recipe: gym.Env | EnvRecipe | str,
    policy: Policy,
    sinks: Sink | list[Sink] | None,
    step: int,
    *,
    seed: int | None = None,
    video_folder: str | os.PathLike | None = None,
    options: LogOptions | None = None,
) -> EpisodeResult:
    """Record one evaluation episode of ``policy`` and log it to each sink at ``step``.

    Args:
        env_or_recipe: an env id, an :class:`~rlviz.envs.EnvRecipe` (built and closed here) or an
            env made with ``render_mode="rgb_array"`` (wrapped for this episode, not closed). Use a
            separate evaluation env, not the one you train on: the episode resets it.
        policy: an rlviz :class:`~rlviz.agent.policy.Policy` (e.g. ``TorchPolicy(agent_net)``).
        sinks: a sink or a list of sinks (None: only keep the MP4 in ``video_folder``).
        step: the training step to log at (e.g. ``global_step``).
        seed: reset seed of the episode; ``options.rng`` (int or Generator) seeds the action sampling.
        video_folder: where the MP4 (``<name>-step<step>-episode-0.mp4``) is kept; None records to a
            temporary folder deleted once the sinks have it.
        options: a :class:`LogOptions` (greedy, name, max_steps, fps, the recorder's RecordOptions, rng).

    Returns the :class:`~rlviz.record.EpisodeResult` (``video_path`` is None when no folder was kept).
    """
    options = check_log_options(options, "log_episode")
    name = options.name
    step = check_step(step)
    targets = as_sinks(sinks)
    if not targets and video_folder is None:
        raise UsageError("log_episode got no sinks and no video_folder, so the episode would go nowhere; pass either.")
    if isinstance(env_or_recipe, (str, EnvRecipe)):
        env, close_env = make_env(env_or_recipe, render_mode="rgb_array"), True
    elif isinstance(env_or_recipe, gym.Env):
        env, close_env = env_or_recipe, False
    else:
        raise UsageError(
            f"log_episode needs an env id, an EnvRecipe or a gymnasium env; received {type(env_or_recipe).__name__}."
        )
    tmp = None if video_folder is not None else tempfile.mkdtemp(prefix="rlviz-eval-")
    folder = Path(video_folder) if video_folder is not None else Path(str(tmp))
    prefix = re.sub(r"[^A-Za-z0-9._=+-]+", "_", name).strip("_") or "episode"
    try:
        recorder = RecordEpisode(env, folder, policy=policy, name_prefix=f"{prefix}-step{step}", fps=options.fps,
                                 options=options.record)
        result = run_episode(recorder, seed=seed, greedy=options.greedy, rng=options.rng,
                             max_steps=options.max_steps)
        if result.video_path is None:
            raise UsageError("The evaluation episode was not recorded (it ended before its first step?).")
        stats = episode_scalars(result, recorder)
        caption = f"step {step}: return {result.episode_return:.6g} in {result.length} steps"
        log_run(targets, RunLog(step, (Logged.video(name, result.video_path, recorder.fps, caption),
                                       Logged.scalars(f"{name}/", stats))))
        if tmp is not None:
            result = replace(result, video_path=None)
        return result
    finally:
        if close_env:
            env.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
