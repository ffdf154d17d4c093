"""What :class:`~rlviz.record.vector.RecordVectorEpisode` needs from a gymnasium vector env, across versions: its
autoreset mode, the frames of chosen sub-envs, one env's row of a batched observation or annotation, the grid of
all sub-envs' frames, the sinks finished videos are logged to, and what a finished video was
(:class:`RecordedVideo`). Nothing here imports torch."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from .arrays import as_numpy
from .episode_video import EpisodeVideo

if TYPE_CHECKING:
    from ..episode.trace import EpisodeInternals, EpisodeTrace
    from .spooled import EpisodeSpool

__all__ = ["RecordedVideo", "SubEnvVideo", "NEXT_STEP", "SAME_STEP", "DISABLED", "autoreset_mode", "FrameReader", "env_rows", "obs_row",
           "final_obs_row", "tile_frames", "grid_shape", "VideoSinks"]

NEXT_STEP, SAME_STEP, DISABLED = "next_step", "same_step", "disabled"
_MODES = {"NextStep": NEXT_STEP, "SameStep": SAME_STEP, "Disabled": DISABLED}


def autoreset_mode(envs: Any) -> str:
    """The vector env's autoreset mode: gymnasium 1.1+ says it in ``metadata["autoreset_mode"]``; 1.0 has only
    NEXT_STEP; 0.29 (no ``AutoresetMode``) resets in the same step, with ``final_observation`` in the infos."""
    import gymnasium.vector as gv

    if not hasattr(gv, "AutoresetMode"):
        return SAME_STEP
    mode = (getattr(envs, "metadata", None) or {}).get("autoreset_mode")
    if mode is None:
        mode = getattr(getattr(envs, "unwrapped", envs), "autoreset_mode", None)
    if mode is None:
        return NEXT_STEP
    value = getattr(mode, "value", mode)
    if value not in _MODES:
        raise UsageError(f"The vector env's autoreset mode is {mode!r}; RecordVectorEpisode knows {sorted(_MODES)}.")
    return _MODES[value]


class FrameReader:
    """The rendered frames of chosen sub-envs: a ``SyncVectorEnv``'s sub-envs render directly (only those asked
    for); any other vector env (Async, a subprocess pool) through ``call("render")``, one call for all."""

    def __init__(self, envs: Any):
        base = getattr(envs, "unwrapped", envs)
        subs = getattr(base, "envs", None)
        self._subs = list(subs) if isinstance(subs, (list, tuple)) and subs else None
        self._envs = envs
        self._views: dict[int, Any] = {}  # sub-env -> its cameras tiled (RecordOptions.camera)

    def use_cameras(self, cameras: Any, indices: Any, owner: str) -> None:
        """Render sub-envs ``indices`` through ``cameras`` (``RecordOptions.camera``: :mod:`rlviz.envs.cameras`),
        each checked against its model now; None or "": their own ``render()``."""
        from ..envs.cameras import camera_list, with_cameras

        if not camera_list(cameras):
            return
        if self._subs is None:
            raise UsageError(f"{owner}(options=RecordOptions(camera={cameras!r})) tiles cameras of sub-envs in this "
                             "process, but this vector env's sub-envs render in their own processes; use a "
                             "SyncVectorEnv, or wrap each sub-env in rlviz.envs.with_cameras(env, ...) in its factory.")
        self._views = {i: with_cameras(self._subs[i], cameras) for i in indices}

    def call(self, name: str) -> tuple[Any, ...]:
        """``call(name)`` on every sub-env (gymnasium 1.x vector wrappers do not forward ``call``)."""
        target = self._envs
        while not hasattr(target, "call") and hasattr(target, "env"):
            target = target.env
        return tuple(target.call(name))

    def render_modes(self, indices: Any) -> list[Any]:
        """The render modes of sub-envs ``indices`` (CleanRL makes only sub-env 0 with ``rgb_array``)."""
        modes = [e.render_mode for e in self._subs] if self._subs is not None else list(self.call("render_mode"))
        return [modes[i] for i in indices]

    def frames(self, indices: Any) -> dict[int, np.ndarray]:
        """uint8 [H, W, 3] RGB per sub-env index (the index order of ``indices``)."""
        if not indices:
            return {}
        if self._subs is not None:
            return {i: to_rgb_frame(self._views.get(i, self._subs[i]).render()) for i in indices}
        every = self.call("render")
        return {i: to_rgb_frame(every[i]) for i in indices}

    def all_frames(self) -> list[np.ndarray]:
        return list(self.frames(range(len(self._subs) if self._subs is not None else len(self.call("render_mode"))))
                    .values())


def _as_array(value: Any, rows: list[int]) -> np.ndarray:
    """Rows ``rows`` of ``value`` as numpy: a torch tensor (any device) is indexed where it lives and only those rows
    are copied to the host (:func:`~rlviz.record.arrays.as_numpy`; torch is never imported here)."""
    if hasattr(value, "detach") and getattr(value, "ndim", 0) > 0:
        return as_numpy(value.detach()[rows])
    arr = as_numpy(value)
    return arr if arr.ndim == 0 else arr[rows]


def env_rows(value: Any, rows: list[int], num_envs: int, key: str) -> list[np.ndarray]:
    """One float32 array per env of ``rows`` from a batched annotation ``[num_envs, ...]`` (a scalar: the same for
    every env)."""
    expected = f"one per sub-env ({num_envs}), e.g. logits [{num_envs}, A], value [{num_envs}] or [{num_envs}, 1]"
    if isinstance(value, (str, bytes, dict)):
        raise UsageError(f"annotate({key}=...) received a {type(value).__name__}; expected numbers, {expected}.")
    n = getattr(value, "shape", None)
    lead = (n[0] if n else None) if n is not None else (len(value) if hasattr(value, "__len__") else None)
    if lead is not None and lead != num_envs:
        raise UsageError(f"annotate({key}=...) received {lead} rows; expected {expected}.")
    try:
        arr = _as_array(value, rows)
    except (TypeError, ValueError, RuntimeError, IndexError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise UsageError(f"annotate({key}=...) received a {type(value).__name__} that is not an array of numbers "
                         f"({reason}); expected {expected}.") from None
    if arr.dtype.kind not in "biuf":
        raise UsageError(f"annotate({key}=...) received {arr.dtype} values; expected numbers, {expected}.")
    if arr.ndim == 0:
        return [np.asarray(arr, np.float32).reshape(1)] * len(rows)
    return [np.asarray(a, np.float32) for a in arr]


def obs_row(obs: Any, i: int) -> Any:
    """Sub-env ``i``'s part of a batched observation (dict and tuple observations kept whole), copied."""
    if isinstance(obs, dict):
        return {k: obs_row(v, i) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(obs_row(v, i) for v in obs)
    return np.array(obs[i], copy=True)


def final_obs_row(infos: Any, obs: Any, i: int) -> Any:
    """The last observation of sub-env ``i``'s episode after a same-step autoreset: ``final_obs`` (gymnasium 1.x)
    or ``final_observation`` (0.29) from the infos; ``obs`` itself when the infos lack it."""
    for key in ("final_obs", "final_observation"):
        batch = infos.get(key) if isinstance(infos, dict) else None
        if batch is not None and batch[i] is not None:
            return np.array(batch[i], copy=True) if not isinstance(batch[i], (dict, tuple)) else batch[i]
    return obs_row(obs, i)


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) of a grid of ``n`` tiles: ceil(sqrt(n)) columns."""
    cols = max(1, math.ceil(math.sqrt(n)))
    return math.ceil(n / cols), cols


def tile_frames(frames: list[np.ndarray], max_width: int) -> np.ndarray:
    """The frames tiled row by row (sub-env 0 top left) into uint8 [rows*h, cols*w, 3]; each cell is the first
    frame's size, shrunk (area interpolation) so the grid is at most ``max_width`` pixels wide. A frame is shrunk to
    fit its cell (aspect kept), never enlarged: a smaller one sits in the top-left corner of its cell, on black."""
    import cv2

    rows, cols = grid_shape(len(frames))
    h0, w0 = frames[0].shape[:2]
    scale = min(1.0, max_width / float(cols * w0))
    w, h = max(2, int(w0 * scale)), max(2, int(h0 * scale))
    out = np.zeros((rows * h, cols * w, 3), np.uint8)
    for k, frame in enumerate(frames):
        r, c = divmod(k, cols)
        fh, fw = frame.shape[:2]
        if (fh, fw) == (h0, w0):  # the first frame's size (every sub-env's, as a rule): exactly the cell
            size = (w, h)
        else:
            fit = min(1.0, w / fw, h / fh)
            size = (max(1, min(w, round(fw * fit))), max(1, min(h, round(fh * fit))))
        tile = frame if size == (fw, fh) else cv2.resize(frame, size, interpolation=cv2.INTER_AREA)
        th, tw = tile.shape[:2]
        out[r * h:r * h + th, c * w:c * w + tw] = tile
    return out


class VideoSinks:
    """Where finished videos are logged at their env step: ``"auto"`` (the active W&B run, if there is one when a
    video is finished, with the step as its ``global_step`` metric, as CleanRL logs), None (nowhere), an
    :class:`rlviz.sinks.Sink`, a TensorBoard ``SummaryWriter``, or a list of these."""

    def __init__(self, sinks: Any):
        self.auto = isinstance(sinks, str)
        if self.auto and sinks != "auto":
            raise UsageError(f"sinks={sinks!r}; expected 'auto', None, an rlviz Sink, a SummaryWriter or a list.")
        self._given: list[Any] = [] if sinks is None or self.auto else (
            list(sinks) if isinstance(sinks, (list, tuple)) else [sinks])
        self._sinks: list[Any] | None = None
        self._wandb: tuple[Any, Any] | None = None  # (run, its sink)

    def _resolve(self) -> list[Any]:
        if self._sinks is None:
            from ..sinks.base import Sink, as_sinks

            out = []
            for s in self._given:
                if isinstance(s, Sink):
                    out.append(s)
                elif hasattr(s, "add_scalar") and hasattr(s, "get_logdir"):  # a SummaryWriter
                    from ..sinks.tensorboard_sink import TensorBoardSink

                    out.append(TensorBoardSink(writer=s))
                else:
                    out.extend(as_sinks(s))  # raises the one-line error for anything else
            self._sinks = out
        return self._sinks

    def current(self) -> list[Any]:
        sinks = list(self._resolve())
        wandb = sys.modules.get("wandb")
        run = getattr(wandb, "run", None) if self.auto and wandb is not None else None
        if run is not None:
            if self._wandb is None or self._wandb[0] is not run:
                from ..sinks.wandb_sink import WandbSink

                self._wandb = (run, WandbSink(run=run, step_key="global_step", summary=False))
            sinks.append(self._wandb[1])
        return sinks

    def log(self, name: str, path: Any, step: int, fps: float, caption: str) -> None:
        from ..sinks.log import Logged, RunLog, log_run  # (the one function that logs to the sinks)

        log_run(self.current(), RunLog(step, (Logged.video(name, path, fps, caption),)))

    def close(self) -> None:
        for sink in self._sinks or []:
            sink.flush()


@dataclass(frozen=True)
class RecordedVideo:
    """One finished video: ``path`` (.mp4), the sub-env (``env_index``, -1 for the grid), its ``episode_id`` (-1 for
    step-triggered videos), ``start_step`` (``step()`` calls before its first frame), ``steps`` and ``frames``
    in it, the return over those steps, and how the episode ended (both False when cut by the trigger,
    ``video_length``, a ``reset()`` or ``close()``). ``internals``: the panels' numbers, or None."""

    path: Path
    env_index: int
    episode_id: int
    start_step: int
    steps: int
    frames: int
    episode_return: float
    terminated: bool
    truncated: bool
    internals: EpisodeInternals | None = None


class SubEnvVideo(EpisodeVideo):
    """An EpisodeVideo whose last step may have no frame (same-step autoreset): its panel video then has T frames.
    (With a writer thread, a policy's numbers are computed in ``finish``, with the weights of that moment, by
    :class:`EpisodeVideo` itself.)"""

    drop_last = False

    def _write(self, rec: EpisodeSpool, trace: EpisodeTrace, policy: Any, observation_space: Any) -> None:
        if not self.drop_last:
            super()._write(rec, trace, policy, observation_space)
            return
        from dataclasses import replace

        from ..draw.compose import ComposeOptions, Compositor
        from ..media.video import VideoWriter
        from .internals import save_episode_data

        opt = self.options
        try:
            internals = self.episode_internals(trace, policy, observation_space)
            comp = Compositor(trace, internals, opt.compose_options or ComposeOptions())
            buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
            with VideoWriter(self.path, self.fps, comp.size, preset=opt.preset, crf=opt.crf) as writer:
                for t in range(comp.T):  # frame T (after the terminal step) was never rendered
                    writer.write(comp.render(t, out=buf))
            if opt.save_data:
                save_episode_data(trace, internals, self.path.with_suffix(".npz"), fps=self.fps)
            self.internals = replace(internals, saliency=None)
        finally:
            rec.close()
