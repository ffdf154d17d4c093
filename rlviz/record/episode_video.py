"""One env's episode as a video, fed step by step: the torch-free core of the recorders.

:class:`~rlviz.record.RecordEpisode` (one gymnasium env) and ``RecordVectorEpisode`` (sub-envs of a vector env)
both record through :class:`EpisodeVideo`; nothing here imports torch, matplotlib or ffmpeg before a video's
first frame (``media.VideoWriter`` starts ffmpeg then), and torch only when ``finish`` is given a policy.

API (stable)
------------
``RecordOptions``: a frozen dataclass of how videos look and what is kept (see its docstring); the recorders
take one as ``options=``.

``EpisodeVideo(path, fps, spec, options=None, *, labels=None, panels=None, with_observations=False, writer=None)``:
one MP4 at ``path`` (``.mp4``) of one env's episode; ``spec`` is the env's :class:`~rlviz.agent.actions.ActionSpec`
(``action_spec(env.action_space)``); ``labels`` a :class:`VideoLabels` (the env id, episode, seed and action names the
video and its ``.npz`` carry). Feed it in order:

* ``start(frame, obs=None, lives=-1, masks=None)``: frame 0, the reset's (uint8 [H, W, 3]; any render output
  goes through ``envs.to_rgb_frame`` first);
* ``annotate(**fields) -> bool``: the loop's numbers for the step about to be taken: ``logits`` [A] (Box:
  ``mean``, ``std`` or ``log_std`` [D]), ``value``, and scalars of your own, each any array-like (a torch tensor
  on any device is read through its own ``detach().cpu()``, never importing torch). False when the video
  records frames only (nothing is kept then);
* ``step(frame, reward, action=None, obs=None, lives=-1, masks=None, *, step=None, ret=None)``: after each env
  step, the frame it rendered (None: not captured; a panel video repeats the previous one). ``action`` is
  needed by panel videos; ``step``/``ret`` label the strip (default: this video's own count and return);
* ``add_frame(frame)``: one more frame in a frames-only video (a ``render()`` collection), no step;
* ``finish(terminated=False, truncated=False, policy=None, observation_space=None) -> Path | None``: writes
  the video (and, for a panel video with ``options.save_data``, its per-step numbers at
  ``path.with_suffix(".npz")``: :func:`~rlviz.record.internals.save_episode_data`, the annotated values under
  their names, extras as ``extra_<name>``); None when no frame came (no file). ``policy`` computes the panels'
  numbers from the spooled observations (annotated numbers win where both exist);
* ``abort()``: stops without a file.

For the modes (:mod:`rlviz.record.modes`) and subclasses: ``open_spool(frame, obs, lives, masks, *, at_step=False)``,
``spool`` (the :class:`~rlviz.record.spooled.EpisodeSpool` of a panel video: its recording state on disk),
``write_frame(frame, reward, step, ret)`` and ``close_stream()`` (a frames-only video's encoder), ``finish_panels(...)``,
``annotations`` (the loop's numbers, an :class:`~rlviz.record.internals.Annotations`). A recorder of several agents
feeds one video per agent (each its own ``annotate``) or keeps their numbers in one video's ``annotations``.

Attributes: ``mode`` (one of :mod:`rlviz.record.modes`' classes: ``Pending``, ``Stream``, ``Panels``, ``Finished``;
``mode.open`` is False once finished), ``steps`` (steps fed), ``frames``
(frames fed), ``episode_return``, ``internals`` (after ``finish`` of a panel video: its
:class:`~rlviz.episode.trace.EpisodeInternals` without saliency maps, else None), ``path``.

``writer``: a :class:`~rlviz.record.writer.BackgroundWriter` (one per recorder, shared by its videos): the
encoding, and the drawing of a panel video, then run on its thread, in order, and ``finish`` returns at once
(the file is complete after ``writer.wait()``; ``internals`` is set then; errors surface at the writer's next
``submit`` or ``wait``). Without one, everything runs in the caller's thread.

Frames per video: one from ``start`` and one per ``step``, so T + 1 for a whole T-step episode (a video begun by
``step`` alone, e.g. from a step trigger, has T). ``panels=False``: frames go straight to the encoder (padded to
multiples of 16, nothing held); ``panels=True``: frames (and observations when ``with_observations``) are spooled
to disk and the panels drawn by ``finish``; ``panels=None``: decided at the first ``step``: panels when
``annotate`` was called before it, frames only otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..agent.actions import ActionSpec
from ..episode.trace import EpisodeInternals, EpisodeTrace
from ..errors import UsageError
from .internals import Annotations
from .modes import Finished, Panels, VideoMode, initial_mode
from .writer import BackgroundWriter

if TYPE_CHECKING:
    from ..draw.compose import ComposeOptions
    from .spooled import EpisodeSpool
    from .stream import FrameStream

__all__ = ["EpisodeVideo", "RecordOptions", "VideoLabels", "preload_drawing"]


@dataclass(frozen=True)
class RecordOptions:
    """How recorded videos look and what is kept beside them (one object for every recorder).

    strip: frames-only videos: a thin strip under the game with the step, the reward and the return so far.
    gamma: discount of the return-to-go drawn beside the value trace.
    saliency: None or a saliency method's name (:data:`rlviz.choices.ATTRIBUTION_METHODS`: "gradient", "smoothgrad",
    "perturbation"; needs a policy; computed per episode in batches).
    saliency_target: "action" (the chosen action's logit), "logprob", "value" or an action index.
    compose_options: a :class:`rlviz.draw.ComposeOptions` (panel sizes, minimum video length...).
    preset, crf: libx264's speed preset and quality (lower crf: better, larger).
    save_data: panel videos also write their per-step numbers as ``.npz`` beside the ``.mp4``.
    spool_dir: where an episode's frames and observations wait on disk (default: the system temp folder).
    action_names: labels of the action bars (default: ALE's / MinAtar's names, else the indices).
    squash: Box actions: the policy is a tanh-squashed Gaussian (SAC), drawn in action units.
    background: encode, and draw panel videos, on a thread of the recorder's own, so ``step()`` hands a frame over
        and returns (:mod:`rlviz.record.writer`); False: all in ``step()``, the video complete when it returns.
    sinks: the vector recorders (``RecordVectorEpisode``, ``VecRecordEpisode``, ``RecordSuperSuitGame``): where finished videos are logged at
        the env step they ended: ``"auto"`` (the active W&B run, if any), None, an :class:`rlviz.sinks.Sink`, a
        TensorBoard ``SummaryWriter`` or a list of these.
    grid_width: ``RecordVectorEpisode(envs_to_record="grid")``: each tile is a sub-env's frame shrunk (never
        enlarged) so that the grid of ceil(sqrt(n)) columns is at most this wide.
    memory_window: a recurrent policy with saliency on: the memory saliency of each step over its last W
        observations (default 16; 0: none). The memory itself is drawn and kept with any recurrent policy.
    camera: a MuJoCo env (gymnasium's, dm_control's): the cameras tiled side by side in each frame, a comma list or a
        sequence of ``default`` (the env's own view), ``free``, camera ids and names (:mod:`rlviz.envs.cameras`);
        None: the env's own ``render()``. ``RecordEpisode`` and the vector recorders (a ``SyncVectorEnv``'s or
        ``DummyVecEnv``'s sub-envs) alike; an unknown camera is refused when the recorder is made.
    """

    strip: bool = False
    gamma: float = 0.99
    saliency: str | None = None
    saliency_target: str | int = "action"
    compose_options: ComposeOptions | None = None
    preset: str = "veryfast"
    crf: int = 23
    save_data: bool = True
    spool_dir: str | os.PathLike[str] | None = None
    action_names: tuple[str, ...] | None = None
    squash: bool = False
    background: bool = True
    sinks: Any = "auto"
    grid_width: int = 1280
    memory_window: int = 16
    camera: str | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if int(self.memory_window) < 0:
            raise UsageError(f"memory_window={self.memory_window}; use 0 (no memory saliency) or a number of steps.")
        if not 0.0 <= float(self.gamma) <= 1.0:
            raise UsageError(f"gamma={self.gamma} is outside [0, 1].")
        if not 0 <= int(self.crf) <= 51:
            raise UsageError(f"crf={self.crf}; libx264 takes 0 (lossless) to 51.")
        if self.action_names is not None and not isinstance(self.action_names, tuple):
            object.__setattr__(self, "action_names", tuple(str(n) for n in self.action_names))
        if isinstance(self.sinks, list):
            object.__setattr__(self, "sinks", tuple(self.sinks))
        if self.camera is not None and not isinstance(self.camera, str):
            object.__setattr__(self, "camera", tuple(str(c) for c in self.camera))


@dataclass(frozen=True)
class VideoLabels:
    """What a video is of: ``env_id``, ``episode_id``, the reset ``seed`` (None: unseeded), the action bars'
    labels (``action_names``; None: the spec's own names) and the episode's text goal (``mission``: MiniGrid's,
    drawn in the panel and kept in the ``.npz``; "": none)."""

    env_id: str = ""
    episode_id: int = 0
    seed: int | None = None
    action_names: tuple[str, ...] | None = None
    mission: str = ""


class EpisodeVideo:
    """One video of one env's episode (see the module docstring for the API and the frame count)."""

    def __init__(self, path: str | os.PathLike[str], fps: float, spec: ActionSpec, options: RecordOptions | None = None,
                 *, labels: VideoLabels | None = None, panels: bool | None = None, with_observations: bool = False,
                 writer: BackgroundWriter | None = None) -> None:
        labels = labels or VideoLabels()
        self.path = Path(path)
        self.fps, self.spec = float(fps), spec
        self.options = options or RecordOptions()
        self.action_names = tuple(labels.action_names if labels.action_names is not None else spec.names())
        self.env_id, self.episode_id, self.seed = labels.env_id, int(labels.episode_id), labels.seed
        self.mission = str(labels.mission or "")
        self.with_observations = bool(with_observations)
        self.writer = writer
        self.mode: VideoMode = initial_mode(panels)
        self.steps = self.frames = 0
        self.episode_return = 0.0
        self.internals: EpisodeInternals | None = None
        self.annotations = Annotations(spec)
        self._stream: FrameStream | None = None
        self._spool: EpisodeSpool | None = None
        self._step0 = 0  # steps fed before frame 0 (a panel video begun by step())

    @property
    def panels(self) -> bool:
        """A video with panels (its mode is :class:`~rlviz.record.modes.Panels`)."""
        return isinstance(self.mode, Panels)

    # -- feeding (each call handed to the mode: rlviz.record.modes) -------------------------------
    def start(self, frame: Any, obs: Any = None, lives: int = -1, masks: Any = None) -> None:
        """Frame 0: what the env shows after its reset."""
        if self.frames or self.steps:
            raise UsageError(f"EpisodeVideo.start() after {self.frames} frames; start() gives frame 0 only.")
        self.mode.start(self, frame, obs, lives, masks)
        self.frames += 1

    def annotate(self, **fields: Any) -> bool:
        """The loop's numbers for the coming step; False (and nothing kept) when this video records frames only."""
        if not self.mode.annotates:
            return False
        self.annotations.add(self.steps - self._step0, fields)
        return True

    def step(self, frame: Any, reward: float, action: Any = None, obs: Any = None, lives: int = -1, masks: Any = None,
             *, step: int | None = None, ret: float | None = None) -> None:
        """One env step and the frame rendered after it."""
        self.mode.step(self, frame, reward, action, obs, lives, masks, (step, ret))

    def add_frame(self, frame: Any) -> None:
        """A frame between steps (gymnasium's ``render()`` collections): frames-only videos keep it, no step."""
        self.mode.add_frame(self, frame)

    # -- ending ---------------------------------------------------------------------------------
    def finish(self, terminated: bool = False, truncated: bool = False, policy: Any = None,
               observation_space: Any = None) -> Path | None:
        """Write the video (see the module docstring); the path, or None when it has no frame."""
        return self.mode.finish(self, terminated, truncated, policy, observation_space)

    def abort(self) -> None:
        """Stop without writing a file."""
        rec, self._spool, self.mode = self._spool, None, Finished()
        if self.writer is None:
            self._abort(rec)
        else:
            self.writer.submit(self._abort, rec)

    # -- what the modes use (rlviz.record.modes) -------------------------------------------------
    @property
    def spool(self) -> EpisodeSpool | None:
        """A panel video's recording state on disk (None before its first frame and once finished)."""
        return self._spool

    def open_spool(self, frame: Any, obs: Any = None, lives: int = -1, masks: Any = None, *,
                   at_step: bool = False) -> None:
        """Spool frame 0 (and its observation when this video keeps them); ``at_step``: the video begins at the step
        just fed (begun by ``step()``, not ``start()``), so the annotations count from there."""
        from .spooled import EpisodeSpool  # (loaded by the first video, not by ``import rlviz``)

        self._spool = EpisodeSpool.open(frame, obs, lives, masks, spool_dir=self.options.spool_dir,
                                        keep_obs=self.with_observations and obs is not None)
        if at_step:
            self._step0 = self.steps

    def write_frame(self, frame: Any, reward: float, step: int = 0, ret: float = 0.0) -> None:
        """A frames-only video's frame, to the encoder (on the writer's thread when there is one); None: nothing."""
        if frame is None:
            return
        if self.writer is None:
            self._write_frame(frame, reward, step, ret)
            return
        frame = np.array(frame, dtype=np.uint8, copy=True)  # the env may reuse its buffer before the thread runs
        self.writer.submit(self._write_frame, frame, reward, step, ret, nbytes=frame.nbytes)

    def close_stream(self) -> Path | None:
        """Finish a frames-only video's file (on the writer's thread when there is one): its path, or None when no
        frame was written."""
        stream, self._stream = self._stream, None
        return stream.close() if stream is not None else None

    def finish_panels(self, terminated: bool, truncated: bool, policy: Any, observation_space: Any) -> Path | None:
        """A panel video's end (its mode is Finished by now): its trace, then the panels drawn here or on the writer."""
        rec, self._spool = self._spool, None
        if rec is None:
            return None
        if policy is not None and not self.with_observations:
            self._abort(rec)
            raise UsageError("EpisodeVideo.finish(policy=...) needs the observations: make it with_observations=True.")
        # a policy's numbers are those of its weights now (training goes on): computed here, drawn on the writer;
        # saliency takes the network itself apart, so that video is made here as a whole
        background = self.writer is not None and (policy is None or self.options.saliency is None)
        try:
            trace = rec.trace(self.spec, terminated, truncated, action_names=self.action_names,
                              episode_id=self.episode_id, seed=self.seed, fps=self.fps, env_id=self.env_id,
                              mission=self.mission)
            if background and policy is not None:
                policy = _evaluated(policy, trace, observation_space)
            if background:
                self.writer.submit(self._write, rec, trace, policy, observation_space, video=True)  # type: ignore[union-attr]
        except BaseException:  # (with a writer: an earlier video's error surfacing here) this one's spools go too
            self._abort(rec)
            raise
        if not background:
            if self.writer is not None:
                self.writer.wait()  # the videos before this one first, in order
            self._write(rec, trace, policy, observation_space)
        return self.path

    # -- inside (the methods below run on the writer's thread when there is one) ------------------
    def _write_frame(self, frame: Any, reward: float, step: int, ret: float) -> None:
        if self._stream is None:
            from .stream import FrameStream  # the video machinery loads with the first video

            opt = self.options
            self._stream = FrameStream(self.path, self.fps, opt.preset, opt.crf, opt.strip)
        self._stream.write(frame, step, reward, ret)

    def _abort(self, rec: EpisodeSpool | None) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.abort()
        if rec is not None:
            rec.close()

    def episode_internals(self, trace: EpisodeTrace, policy: Any, observation_space: Any) -> EpisodeInternals:
        """The episode's internals: the policy's and the loop's annotations (:func:`compute_internals`), a recurrent
        policy's memory (:func:`~rlviz.record.memory.add_memory`), and the memory of a state the loop annotated
        (``annotate(state=...)``: it wins over the policy's, as the loop's numbers do)."""
        from .internals import compute_internals
        from .memory import add_memory

        opt = self.options
        internals = compute_internals(trace, policy, opt.gamma, opt.saliency, opt.saliency_target,
                                      self.annotations, self.spec, observation_space=observation_space)
        internals = add_memory(internals, trace, policy, opt.saliency, opt.saliency_target, opt.memory_window,
                               observation_space)
        annotated = self.annotations.memory(trace.num_steps)
        if annotated is None:
            return internals
        return replace(internals, memory=annotated, memory_kind=self.annotations.state_kind,
                       memory_start_gap=self.annotations.start_gap)

    def _write(self, rec: EpisodeSpool, trace: EpisodeTrace, policy: Any, observation_space: Any) -> None:
        try:
            internals = self.episode_internals(trace, policy, observation_space)
            self._draw(trace, internals)
            self.internals = replace(internals, saliency=None)
        finally:
            rec.close()

    def _draw(self, trace: EpisodeTrace, internals: EpisodeInternals) -> None:
        """Write the episode's panel video to ``self.path`` (and its ``.npz`` when ``save_data``): rlviz's frame
        layout. A subclass that draws another layout overrides this (the timeline's progression parts do)."""
        from ..draw.compose import ComposeOptions
        from ..draw.video import video_timing, write_episode_video
        from .internals import save_episode_data

        opt = self.options
        compose = opt.compose_options or ComposeOptions()
        write_episode_video(trace, internals, self.path, options=compose, fps=self.fps, preset=opt.preset, crf=opt.crf)
        if opt.save_data:
            rate, _ = video_timing(trace.num_steps + 1, self.fps, compose.min_seconds)
            save_episode_data(trace, internals, self.path.with_suffix(".npz"), fps=rate)


def preload_drawing() -> None:
    """Import what drawing a panel video takes (the compositor and OpenCV, the encoder, the internals), so that the
    first episode's end does not wait for it: a recorder with a policy will draw panels."""
    from ..draw import video  # noqa: F401
    from ..media.ffmpeg import ffmpeg_exe
    from . import internals, memory  # noqa: F401

    ffmpeg_exe()


class _Evaluated:
    """A policy's numbers on one episode, computed when the episode ended (in the loop's thread, with the weights of
    that moment) and handed back by ``evaluate`` when the writer's thread draws the panels; all else is the policy's."""

    def __init__(self, policy: Any, out: Any) -> None:
        self._policy, self._out = policy, out

    def evaluate(self, obs: Any, masks: Any = None) -> Any:
        return self._out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


def _evaluated(policy: Any, trace: EpisodeTrace, observation_space: Any) -> _Evaluated:
    from ..agent.capabilities import capabilities_of
    from ..agent.obs import FlatView, ObsAdapter, is_plain
    from ..agent.stepping import evaluate_episode

    obs: Any = trace.observations
    if observation_space is not None and not is_plain(observation_space):
        obs = FlatView(ObsAdapter(observation_space, capabilities_of(policy).obs_format), obs)
    return _Evaluated(policy, evaluate_episode(policy, obs, trace.action_masks))
