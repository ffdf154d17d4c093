"""Videos from a JAX training loop's own arrays: :func:`record_batch` (PureJaxRL's ``Transition`` batch, after the
fact, on the host) and :func:`batch_recorder` (the same from inside the jit-compiled loop, every K updates, through
:func:`rlviz.jax.every`).

Nothing is recomputed: the probabilities are the softmax of the batch's logits (a Gaussian's mean and std as given),
the value and the rewards are the batch's, the episodes are cut at ``done`` exactly (:mod:`rlviz.jax.batch`). The
frames come from the env states when the loop keeps them (``env_state`` in its Transition), else from the
observations where the family can draw them (MinAtar's channels: the same frames; pixels; gymnax's classic control
and grids), else :func:`record_batch` raises a one-line :class:`~rlviz.errors.UsageError` (nothing would be drawn)
and the in-loop recorder warns once and records no more (a recording never ends a training run).

The frame after an episode's last step is not in the batch (the loop's auto-reset replaced it): the video shows the
last frame again, with the last step's numbers, as the recorders do with annotated numbers. The videos and their
``.npz`` are written as every JAX video is (:func:`rlviz.jobs.jax_stages.write_trace_video`), and logged to W&B or
TensorBoard at ``global_step`` as the vector recorders log theirs (:class:`rlviz.record.vector_parts.VideoSinks`).
"""

from __future__ import annotations

import atexit
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..jax.batch import BatchEpisode, BatchFields, cut_episodes, read_batch

__all__ = ["BatchVideoOptions", "BatchVideo", "record_batch", "batch_recorder", "BatchRecorder", "jax_env_of", "ORDERS"]

#: which of the episodes found come first: in env then time order, by return (lowest / highest), by length
ORDERS = ("first", "worst", "best", "longest")


@dataclass(frozen=True)
class BatchVideoOptions:
    """How :func:`record_batch` chooses and writes episodes.

    order: one of :data:`ORDERS`: the episodes found (in the ``envs`` asked, env by env, in time order) sorted so
        that ``episodes`` takes the first, the worst (lowest return), the best or the longest.
    partial: also the parts of episodes cut by the batch's edges (a T-step batch holds few whole episodes longer
        than T/2); False: whole episodes only.
    from_reset: the batch's row 0 starts an episode in every env (the loop's first batch, right after its reset;
        :func:`batch_recorder` assumes it of update 0).
    gamma: discount of the return-to-go drawn beside the value.
    fps: the videos' frame rate (None: the env family's, 15 for MinAtar).
    name_prefix: the videos are ``<name_prefix>-env-<n>-step-<t>.mp4`` (``t``: the episode's first row).
    sinks: where videos are logged at ``global_step``: ``"auto"`` (the active W&B run, if any, its ``global_step``
        metric as CleanRL logs), None, an :class:`rlviz.sinks.Sink`, a TensorBoard ``SummaryWriter`` or a list.
    frames: "auto" (the env states when the batch has them, else the observations), "state" or "obs".
    workers: how many videos are drawn and encoded at once (threads, each with its ffmpeg); None: one per two CPU
        cores (one on a 2-core machine: libx264 already takes both), at most the videos of the call.
    """

    order: str = "first"
    partial: bool = False
    from_reset: bool = False
    gamma: float = 0.99
    fps: float | None = None
    name_prefix: str = "batch"
    sinks: Any = "auto"
    frames: str = "auto"
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise UsageError(f"workers={self.workers!r}; expected a positive number of videos at once, or None.")
        if self.order not in ORDERS:
            raise UsageError(f"order={self.order!r}; expected one of {', '.join(ORDERS)}.")
        if self.frames not in ("auto", "state", "obs"):
            raise UsageError(f"frames={self.frames!r}; expected auto, state or obs.")
        if not 0.0 <= float(self.gamma) <= 1.0:
            raise UsageError(f"gamma={self.gamma!r}; expected a discount in [0, 1].")
        if self.fps is not None and not float(self.fps) > 0:
            raise UsageError(f"fps={self.fps!r}; expected a positive frame rate or None.")
        if not isinstance(self.name_prefix, str) or any(c in self.name_prefix for c in "/\\\x00"):
            raise UsageError(f"name_prefix={self.name_prefix!r}; expected a file name prefix, not a path.")


@dataclass(frozen=True)
class BatchVideo:
    """One written video: ``path`` (.mp4; its per-step numbers at ``path.with_suffix(".npz")``), the env column
    ``env`` and the batch rows ``start .. start + length - 1`` it shows, its return (float64 sum of the batch's
    rewards), how it ended (``terminated``: ``done`` before the env's step limit; ``truncated``: at it; both False
    for a part cut by the batch's end), and the ``global_step`` it was logged at (None: not logged)."""

    path: Path
    env: int
    start: int
    length: int
    ret: float
    terminated: bool
    truncated: bool
    global_step: int | None = None


def _is_gymnax_env(env: Any) -> bool:
    """True for a gymnax ``Environment`` (PureJaxRL's wrappers looked through by the caller)."""
    try:
        from gymnax.environments.environment import Environment
    except ImportError:
        return False
    return isinstance(env, Environment)


def jax_env_of(env: Any) -> Any:
    """rlviz's :class:`~rlviz.jax.contract.JaxEnv` of ``env``: an id (``"gymnax:Breakout-MinAtar"``), a JaxEnv, or
    a gymnax env object (PureJaxRL's wrappers, ``LogWrapper(FlattenObservationWrapper(env))``, looked through)."""
    from ..jax.envs import make_jax_env

    if isinstance(env, str):
        return make_jax_env(env)
    if hasattr(env, "frames_from_observations") and hasattr(env, "env_id"):
        return env
    inner = env
    while hasattr(inner, "_env"):
        inner = inner._env
    name = getattr(inner, "name", None)
    if _is_gymnax_env(inner) and isinstance(name, str):
        return make_jax_env(f"gymnax:{name}")
    raise UsageError(f"env={type(env).__name__}: rlviz does not know which env this is; pass its id instead, e.g. "
                     "'gymnax:Breakout-MinAtar', 'craftax:Craftax-Classic-Pixels-v1', 'brax:ant'.")


def _selected(found: list[BatchEpisode], batch: BatchFields, episodes: int | Sequence[int],
              order: str) -> list[BatchEpisode]:
    if order != "first":
        rets = {id(e): float(np.sum(batch.reward[e.start:e.stop, e.env], dtype=np.float64)) for e in found}
        key = {"worst": lambda e: rets[id(e)], "best": lambda e: -rets[id(e)], "longest": lambda e: -e.length}[order]
        found = sorted(found, key=key)
    if isinstance(episodes, bool):
        raise UsageError(f"episodes={episodes!r}; expected a number of episodes or a list of positions.")
    if isinstance(episodes, (int, np.integer)):
        if episodes < 0:
            raise UsageError(f"episodes={episodes}; expected how many episodes to write (>= 0) or their positions.")
        return found[:int(episodes)]
    try:
        picks = [int(k) for k in episodes]
    except (TypeError, ValueError):
        raise UsageError(f"episodes={episodes!r}; expected a number of episodes or a list of positions.") from None
    return [found[k] for k in picks if -len(found) <= k < len(found)]


def _frames_source(batch: BatchFields, env: Any, frames: str) -> str:
    """"state" or "obs": where this batch's frames come from, or the one line saying why none can be drawn."""
    if frames in ("auto", "state") and batch.env_state is not None:
        return "state"
    if frames == "state":
        raise UsageError("frames='state' but traj_batch has no env_state; keep the env states in your Transition "
                         "(env_state=state before each step) or use frames='obs'.")
    probe = _observations(batch.obs[:1, 0], env)
    if env.frames_from_observations(probe) is None:
        raise UsageError(f"{env.env_id}: rlviz cannot draw frames from its observations {batch.obs.shape[2:]} and "
                         "traj_batch has no env_state; keep the env states in your Transition (env_state=...) so the "
                         "frames are drawn from them.")
    return "obs"


def _observations(obs: np.ndarray, env: Any) -> np.ndarray:
    """[L, ...] observations in the env's own shape (PureJaxRL's FlattenObservationWrapper flattens them)."""
    shape = tuple(getattr(env, "obs_shape", ()) or ())
    if shape and obs.shape[1:] != shape and int(np.prod(obs.shape[1:])) == int(np.prod(shape)):
        return obs.reshape(len(obs), *shape)
    return obs


def _held(rows: np.ndarray | None) -> np.ndarray | None:
    """[L, ...] -> [L + 1, ...]: the frame after the last step shows the last step's numbers."""
    return None if rows is None else np.concatenate([rows, rows[-1:]])


@dataclass(frozen=True)
class _Kind:
    """What :func:`rlviz.jobs.jax_stages.jax_internals` asks of a policy."""

    kind: str
    squash: bool = False


@dataclass(frozen=True)
class _Episode:
    """One chosen episode's arrays, copied out of the batch (so the loop's buffers may go): drawn later."""

    ep: BatchEpisode
    obs: np.ndarray
    states: Any
    actions: np.ndarray
    rewards: np.ndarray
    logits: np.ndarray | None
    mean: np.ndarray | None
    std: np.ndarray | None
    value: np.ndarray | None
    log_prob: np.ndarray | None
    terminated: bool
    truncated: bool


def _take(batch: BatchFields, ep: BatchEpisode, env: Any, source: str, max_steps: int) -> _Episode:
    import jax

    rows, i = slice(ep.start, ep.stop), ep.env

    def col(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.array(a[rows, i])

    std = batch.std
    if std is not None:
        std = np.array(std[rows, i]) if std.shape[:2] == batch.done.shape else \
            np.broadcast_to(std, (ep.length, *np.shape(std)[-1:])).copy()
    states = None if source != "state" else jax.tree_util.tree_map(lambda a: np.array(a[rows, i]), batch.env_state)
    actions = np.array(batch.action[rows, i])
    actions = actions.astype(np.int64) if env.discrete else actions.astype(np.float32).reshape(ep.length, -1)
    truncated = ep.ended and ep.length >= max_steps
    return _Episode(ep, _observations(np.array(batch.obs[rows, i]), env), states, actions, np.array(batch.reward[rows, i]),
                    col(batch.logits), col(batch.mean), std, col(batch.value), col(batch.log_prob),
                    ep.ended and not truncated, truncated)


def _frames(e: _Episode, env: Any) -> np.ndarray:
    """uint8 [L + 1, H, W, 3]: each step's frame, the last one shown again."""
    if e.states is not None:
        from ..jax.envs.base import state_at

        frames = np.stack([np.asarray(env.frame(state_at(e.states, t))) for t in range(e.ep.length)])
    else:
        frames = np.asarray(env.frames_from_observations(e.obs))
    return np.concatenate([frames, frames[-1:]])


def _write(e: _Episode, env: Any, path: Path, opt: BatchVideoOptions, episode_id: int) -> BatchVideo:
    """Draw and encode one episode: ``path`` and its ``.npz``."""
    from dataclasses import replace

    from ..episode.trace import EpisodeTrace
    from ..jax.contract import PolicyOut
    from ..jax.replay import Replayed
    from ..jobs.jax_stages import jax_internals, write_trace_video

    fps = float(opt.fps or env.fps)
    observations = np.concatenate([e.obs, e.obs[-1:]])
    trace = EpisodeTrace(_frames(e, env), observations, e.actions, e.rewards, None, e.terminated, e.truncated,
                         tuple(env.action_names), int(episode_id), None, fps, env.env_id)
    kind = _Kind("logits" if e.logits is not None else "gaussian")
    out = PolicyOut(logits=_held(e.logits), mean=_held(e.mean), std=_held(e.std), value=_held(e.value))
    rep = Replayed(None, observations, e.actions, e.rewards, out, e.terminated, e.truncated)
    internals = jax_internals(kind, rep, float(opt.gamma), env)
    if e.log_prob is not None:
        internals = replace(internals, extras={"log_prob": _held(e.log_prob)})
    write_trace_video(trace, internals, path)
    ret = float(np.sum(e.rewards, dtype=np.float64))
    return BatchVideo(path, e.ep.env, e.ep.start, e.ep.length, ret, e.terminated, e.truncated)


def _sinks(sinks: Any) -> Any:
    from ..record.vector_parts import VideoSinks

    return VideoSinks(sinks)


def _log(sinks: Any, video: BatchVideo, global_step: int | None, fps: float) -> BatchVideo:
    if sinks is None or global_step is None:
        return video
    from dataclasses import replace

    sinks.log(f"videos/env-{video.env}", video.path, int(global_step), fps,
              f"{video.path.stem}: env {video.env}, rows {video.start}..{video.start + video.length - 1}, "
              f"{video.length} steps, return {video.ret:.6g}")
    return replace(video, global_step=int(global_step))


def _prepare(traj_batch: Any, env: Any, env_params: Any, envs: Sequence[int] | None, episodes: int | Sequence[int],
             opt: BatchVideoOptions, from_reset: bool) -> tuple[list[_Episode], BatchFields]:
    batch = read_batch(traj_batch)
    source = _frames_source(batch, env, opt.frames)
    found = cut_episodes(batch.done, envs, from_reset=from_reset, partial=opt.partial)
    chosen = _selected(found, batch, episodes, opt.order)
    max_steps = int(getattr(env_params, "max_steps_in_episode", 0) or env.max_steps)
    return [_take(batch, ep, env, source, max_steps) for ep in chosen], batch


def _nothing_found(batch: BatchFields, envs: Sequence[int] | None, opt: BatchVideoOptions) -> str:
    what = "episode" if opt.partial else "whole episode"
    return (f"No {what} in envs {list(envs) if envs is not None else 'all'} of this batch ({batch.steps} steps x "
            f"{batch.num_envs} envs): nothing written." + ("" if opt.partial else
            " Its episodes may be longer than the batch; BatchVideoOptions(partial=True) writes their parts."))


def record_batch(traj_batch: Any, env: Any, env_params: Any = None, folder: str | Path = "videos", *,
                 envs: Sequence[int] | None = (0,), episodes: int | Sequence[int] = 1, global_step: int | None = None,
                 options: BatchVideoOptions | None = None) -> list[BatchVideo]:
    """Write videos with panels (probabilities, value, reward, return-to-go) of a training loop's batch.

    Args:
        traj_batch: PureJaxRL's ``Transition`` (a NamedTuple, dataclass or dict; jax or numpy arrays [T, N, ...]):
            ``obs, action, reward, done``, ``logits`` (or ``mean``/``std``), optionally ``value``, ``log_prob``
            (kept in the ``.npz`` as ``extra_log_prob``) and ``env_state`` (the state before each step).
        env: the env's id (``"gymnax:Breakout-MinAtar"``), a gymnax env object (wrappers looked through) or a
            :class:`~rlviz.jax.contract.JaxEnv`.
        env_params: the loop's env params (their ``max_steps_in_episode`` tells a time limit from a termination);
            None: the env's defaults.
        folder: where the videos and their ``.npz`` go (created).
        envs: the env columns to take episodes from (None: all).
        episodes: how many episodes to write (the first of ``options.order``), or their positions in that order.
        global_step: the training step the videos are logged at (``options.sinks``); None: not logged.
        options: a :class:`BatchVideoOptions`.

    Returns the :class:`BatchVideo` of each written video. No episode found: a warning, nothing written.
    """
    opt = options or BatchVideoOptions()
    if not isinstance(opt, BatchVideoOptions):
        raise UsageError(f"options={opt!r}; expected rlviz.jax.BatchVideoOptions(...).")
    jenv = jax_env_of(env)
    chosen, batch = _prepare(traj_batch, jenv, env_params, envs, episodes, opt, opt.from_reset)
    if not chosen:
        warnings.warn(_nothing_found(batch, envs, opt), stacklevel=2)
        return []
    sinks = None if global_step is None else _sinks(opt.sinks)
    return _write_all(chosen, jenv, Path(folder), opt, global_step, sinks)


def _write_all(chosen: list[_Episode], env: Any, folder: Path, opt: BatchVideoOptions, global_step: int | None,
               sinks: Any) -> list[BatchVideo]:
    import os

    def one(k: int) -> BatchVideo:
        e = chosen[k]
        return _write(e, env, folder / f"{opt.name_prefix}-env-{e.ep.env}-step-{e.ep.start}.mp4", opt, k)

    workers = min(len(chosen), opt.workers or max(1, (os.cpu_count() or 1) // 2))
    if workers <= 1:
        written = [one(k) for k in range(len(chosen))]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers, thread_name_prefix="rlviz-batch-video") as pool:
            written = list(pool.map(one, range(len(chosen))))
    return [_log(sinks, v, global_step, float(opt.fps or env.fps)) for v in written]


#: nice levels the recorder's thread (drawing; its ffmpeg) runs below the training loop's
WRITER_NICE = 10


class BatchRecorder:
    """The host function :func:`batch_recorder` returns: ``recorder(update_step, traj_batch, global_step=None)``
    (what :func:`rlviz.jax.every` calls with numpy arrays). Each call takes the chosen episodes out of the batch at
    once (numpy copies) and writes them on the recorder's own thread, so the loop waits for no encoding. Its videos go
    to ``<folder>/update-<update_step:06d>/`` (under ``jax.vmap(train)`` over seeds each run calls it in turn with
    the same step: the second run's go to ``update-<step>-run-1/``, and so on). ``global_step`` None: ``(update_step + 1) * T * N``, the env steps
    taken once this update's batch was collected (CleanRL's ``global_step``).

    Attributes: ``recorded`` (each :class:`BatchVideo` written so far, in order); ``wait()`` blocks until the videos
    of the calls so far are written (done at interpreter exit too) and raises a writing error, if any."""

    def __init__(self, env: Any, env_params: Any = None, folder: str | Path = "videos", *,
                 envs: Sequence[int] | None = (0,), episodes: int | Sequence[int] = 1,
                 options: BatchVideoOptions | None = None) -> None:
        from ..record.writer import BackgroundWriter

        self.options = options or BatchVideoOptions()
        if not isinstance(self.options, BatchVideoOptions):
            raise UsageError(f"options={self.options!r}; expected rlviz.jax.BatchVideoOptions(...).")
        self.env, self.env_params, self.folder = jax_env_of(env), env_params, Path(folder)
        self.envs, self.episodes = envs, episodes
        self.recorded: list[BatchVideo] = []
        self.off = False  # set once a batch could not be drawn (warned once)
        self._calls: dict[int, int] = {}  # update step -> calls so far (the runs of a vmapped train, in order)
        self._num_envs: int | None = None  # the loop's N, seen by on_device when it traced the update
        self._sinks = _sinks(self.options.sinks)
        self._writer = BackgroundWriter("rlviz-batch-recorder")
        from ..record.episode_video import preload_drawing

        self._writer.submit(preload_drawing)  # the drawing's imports, on the thread, while the loop compiles
        ref = weakref.ref(self)
        atexit.register(lambda: ref() is not None and ref().wait())  # type: ignore[union-attr]

    def on_device(self, traj_batch: Any, *rest: Any) -> tuple[Any, ...]:
        """What :func:`rlviz.jax.every` sends to the host (called on the traced arrays, inside the jitted update):
        the batch's env columns ``0..max(envs)`` (env 0's alone by default: 1/N of the batch; every column when
        ``envs`` is None), so the env indices stay the batch's. The full N is kept for ``global_step``'s default."""
        from ..jax.batch import leading_columns

        narrowed, n = leading_columns(traj_batch, self.envs)
        self._num_envs = n or self._num_envs
        return (narrowed, *rest)

    def __call__(self, update_step: Any, traj_batch: Any, global_step: Any = None) -> None:
        if self.off:
            return
        step = int(np.asarray(update_step))
        opt = self.options
        try:
            chosen, batch = _prepare(traj_batch, self.env, self.env_params, self.envs, self.episodes, opt,
                                     opt.from_reset or step == 0)
        except UsageError as exc:  # a recording never ends a training run: said once, then off
            self.off = True
            warnings.warn(f"rlviz.jax.batch_recorder records nothing: {exc}", stacklevel=2)
            return
        envs = self._num_envs or batch.num_envs  # (the loop's N, when on_device kept fewer columns)
        at = int(np.asarray(global_step)) if global_step is not None else (step + 1) * batch.steps * envs
        if not chosen:
            warnings.warn(f"update {step}: {_nothing_found(batch, self.envs, opt)}", stacklevel=2)
            return
        run = self._calls[step] = self._calls.get(step, -1) + 1  # jax.vmap(train) over seeds: one call per run
        folder = self.folder / (f"update-{step:06d}" + (f"-run-{run}" if run else ""))
        self._writer.submit(self._write, chosen, folder, at, video=True)

    def _write(self, chosen: list[_Episode], folder: Path, at: int) -> None:
        from ..record.writer import lower_thread_priority

        lower_thread_priority(WRITER_NICE)  # (each job: the writer's thread ends when idle, the next is a new one)
        self.recorded.extend(_write_all(chosen, self.env, folder, self.options, at, self._sinks))

    def wait(self) -> None:
        """Block until every video handed over so far is written; raise the first writing error."""
        self._writer.wait()
        self._sinks.close()


def batch_recorder(env: Any, env_params: Any = None, folder: str | Path = "videos", *,
                   envs: Sequence[int] | None = (0,), episodes: int | Sequence[int] = 1,
                   options: BatchVideoOptions | None = None) -> BatchRecorder:
    """A host function for :func:`rlviz.jax.every` that writes videos of the loop's batch every K updates:

    ``rlviz.jax.every(k, update_step, recorder, traj_batch, global_step)`` inside the jitted update. Its arguments
    are :func:`record_batch`'s; it only reads the batch (the loop computes exactly what it computes without it).
    See :class:`BatchRecorder`; call ``recorder.wait()`` after training to have the last videos written."""
    return BatchRecorder(env, env_params, folder, envs=envs, episodes=episodes, options=options)
