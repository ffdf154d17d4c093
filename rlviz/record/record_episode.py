"""``RecordEpisode``: gymnasium's ``RecordVideo``, plus the agent's internals when it has them.

Without a policy it is a drop-in for ``gymnasium.wrappers.RecordVideo`` (same arguments, defaults, file
names, ``recording`` / ``episode_id`` / ``step_id``, start/stop recording, ``RenderCollection`` on either
side): frames go straight to the H.264 encoder, nothing is kept in memory. With internals (a ``policy=``,
or ``annotate()`` calls from the user's loop before each step) a video is one episode: frames (and, with a
policy, observations) are spooled to disk, the policy's internals are computed in batches when the episode
ends and drawn in panels beside the game. Each video is a :class:`~rlviz.record.episode_video.EpisodeVideo`.

Light in a training process: importing it loads no torch, matplotlib or ffmpeg; ffmpeg starts with a video's
first frame, torch and the drawing code only with a policy (or when a panel video of ``annotate()`` calls is written).

Wrap outermost (after preprocessing wrappers): observations are then what the agent sees and
frames are the full-colour game from ``render()``.
"""

from __future__ import annotations

import gc
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym

from ..agent.actions import action_spec
from ..agent.obs import is_plain
from ..choices import SALIENCY_METHODS
from ..envs.frames import frame_rate, to_rgb_frame
from ..envs.render_modes import check_render_mode
from ..episode.result import EpisodeResult
from ..episode.trace import EpisodeInternals
from ..errors import UsageError
from ..explain.attribution import attribution_class
from .annotated_state import one_env_state, warn_not_reset
from .base import RecorderBase, default_triggers, every_episode, recorder_settings, settle_policy
from .episode_video import EpisodeVideo, RecordOptions, VideoLabels, preload_drawing
from .internals import compute_internals, save_episode_data
from .modes import Stream
from .setup import RenderModeError, action_labels, capped_cubic_video_schedule

if TYPE_CHECKING:  # annotations only: importing them here would load torch and the drawing code early
    import torch

    from ..agent.policy import Policy

__all__ = ["RecordEpisode", "RecordOptions", "RenderModeError", "capped_cubic_video_schedule", "compute_internals",
           "save_episode_data"]


def check_saliency(saliency: str | None, policy: Any, observation_space: Any) -> None:
    """``RecordOptions.saliency`` against the policy and the env's observations (the rule ``attribute()`` applies;
    observations the policy takes flattened, a Dict's for an SB3 MultiInputPolicy, get one number per entry)."""
    if saliency is None:
        return
    if saliency not in SALIENCY_METHODS:
        raise UsageError(f"saliency={saliency!r} is not known; use None or one of {SALIENCY_METHODS}.")
    if policy is None:
        raise UsageError(f"saliency={saliency!r} needs policy=...: saliency takes the network apart.")
    attribution_class(saliency).check_policy(policy)
    if not is_plain(observation_space) and getattr(policy, "obs_format", "flat") != "flat":
        raise UsageError(f"saliency={saliency!r} maps array observations, but this env's are {observation_space}; "
                         "use saliency=None (CLI: --saliency none) for it.")


class RecordEpisode(RecorderBase, gym.Wrapper):  # type: ignore[type-arg,unused-ignore]  # (any env's types)
    """Record episodes to MP4: the frames (a ``RecordVideo`` drop-in) and, given internals, the agent's panels.

    Args:
        env: an env whose render mode returns images (``rgb_array`` or ``rgb_array_list``).
        video_folder: where ``{name_prefix}-episode-{k}.mp4`` / ``{name_prefix}-step-{k}.mp4`` (and, with
            internals, ``.npz`` per-step data) go.
        policy: None (frames only), an rlviz :class:`~rlviz.agent.Policy`, a ``torch.nn.Module`` or a callable
            from a batch of observations (numpy) to logits, ``(logits, value)`` or a dict (see
            :class:`~rlviz.agent.CallablePolicy`). It computes the panels; actions come from your loop or
            :func:`run_episode`. With a policy every episode is one video.
        episode_trigger: ``f(episode_id) -> bool``; default: gymnasium's capped cubic schedule without a
            policy (and no ``step_trigger``), every episode with one.
        step_trigger: ``f(step_id) -> bool`` starts a video at a global step (frames only).
        video_length: frames per video, 0 = until the episode ends (frames only; as ``RecordVideo``).
        name_prefix, fps, disable_logger, gc_trigger: as ``RecordVideo`` (``fps`` default: the env's
            ``metadata["render_fps"]``, else 30; ``disable_logger`` has nothing to silence here).
        options: a :class:`~rlviz.record.episode_video.RecordOptions`: how the videos look and what is kept beside them
            (strip, gamma, saliency, saliency_target, compose_options, preset, crf, save_data, spool_dir,
            action_names, squash, background, camera). (0.3's keywords of those names went in
            0.6.)

    The signature is ``RecordVideo``'s, plus ``policy`` and ``options`` (tests/test_signatures.py holds it).
    """

    #: what one recorded episode is made with: a subclass of :class:`~rlviz.record.episode_video.EpisodeVideo` that
    #: overrides ``_draw`` writes another layout (the timeline's progression parts)
    video_class: type[EpisodeVideo] = EpisodeVideo

    def __init__(
        self,
        env: gym.Env[Any, Any],
        video_folder: str | os.PathLike[str],
        policy: Policy | torch.nn.Module | Callable[..., Any] | None = None,
        *,
        episode_trigger: Callable[[int], bool] | None = None,
        step_trigger: Callable[[int], bool] | None = None,
        video_length: int = 0,
        name_prefix: str = "rl-video",
        fps: float | None = None,
        disable_logger: bool = True,
        gc_trigger: Callable[[int], bool] | None = None,
        options: RecordOptions | None = None,
    ) -> None:
        if isinstance(options, RecordOptions) and options.camera is not None:
            from ..envs.cameras import with_cameras  # (MuJoCo's cameras: imported when asked for)

            env = with_cameras(env, options.camera)  # MuJoCo: several cameras in each frame (rlviz.envs.cameras)
        super().__init__(env)
        if env.render_mode in (None, "human", "ansi"):
            raise RenderModeError(
                f"RecordEpisode needs frames, but the env's render_mode is {env.render_mode!r}. Initialize your "
                "environment with a render_mode that returns an image, such as rgb_array: "
                "gym.make(env_id, render_mode='rgb_array')."
            )
        check_render_mode(env, env.render_mode)  # an env that only claims the mode fails here, not on render()
        if options is not None and not isinstance(options, RecordOptions):
            raise UsageError(f"options={options!r}; expected a rlviz.record.RecordOptions(...).")
        opt = options or RecordOptions()
        self.spec_actions = spec = action_spec(env.action_space)
        self.policy = settle_policy(policy, env.action_space, env.observation_space, opt.squash, "RecordEpisode")
        if self.policy is not None and (step_trigger is not None or video_length):
            raise UsageError("step_trigger and video_length cut videos anywhere; with a policy a video is one "
                             "episode. Choose episodes with episode_trigger, or record frames only (no policy).")
        check_saliency(opt.saliency, self.policy, env.observation_space)
        if self.policy is not None:
            preload_drawing()  # (torch is loaded with the policy; the drawing code now, not at the first episode's end)
        settings = recorder_settings("RecordEpisode", video_folder, name_prefix, fps or frame_rate(env), env.metadata,
                                     video_length)  # (the env's metadata or dt: envs/frames.py)
        self.episode_trigger, self.step_trigger = default_triggers(
            episode_trigger, step_trigger, capped_cubic_video_schedule if self.policy is None else every_episode)
        self.video_length = settings.video_length
        self.disable_logger, self.gc_trigger = disable_logger, gc_trigger
        self.setup_recorder(settings, opt)
        self.action_names = action_labels(env, spec, opt.action_names)
        env_spec = getattr(env, "spec", None)
        self.env_id = env_spec.id if env_spec is not None else type(env.unwrapped).__name__
        self.episode_id = self.step_id = -1
        self.render_history: list[Any] = []
        self._last_path: Path | None = None
        self._last_panels: EpisodeVideo | None = None  # the last panel video (its internals)
        self._last_result: EpisodeResult | None = None
        self._video: EpisodeVideo | None = None  # the video being recorded
        self._episode_return, self._episode_len, self._seed = 0.0, 0, cast("int | None", None)
        self._warned_stream_annotate = False
        self._warned_not_reset = False

    # 0.3's attribute names, read from the options
    strip = property(lambda self: self.options.strip)
    gamma = property(lambda self: self.options.gamma)
    saliency = property(lambda self: self.options.saliency)
    saliency_target = property(lambda self: self.options.saliency_target)
    compose_options = property(lambda self: self.options.compose_options)
    preset = property(lambda self: self.options.preset)
    crf = property(lambda self: self.options.crf)
    save_data = property(lambda self: self.options.save_data)

    @property
    def last_video_path(self) -> Path | None:
        """The last finished video (complete on disk when this returns)."""
        self.wait()
        return self._last_path

    @property
    def last_internals(self) -> EpisodeInternals | None:
        """The internals drawn in the last panel video, without saliency maps (they live on disk)."""
        self.wait()
        return self._last_panels.internals if self._last_panels is not None else None

    @property
    def last_result(self) -> EpisodeResult | None:
        """The last episode's result (its video complete on disk when this returns)."""
        self.wait()
        return self._last_result

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[Any, Any] | None = None) -> Any:
        self.check_open("reset")
        if self._video is not None and self._video.panels:  # the previous episode was cut by this reset
            self._finish(terminated=False, truncated=False)
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode_id += 1
        if self._video is not None and self.video_length == math.inf:
            self.stop_recording()
        self._episode_return, self._episode_len, self._seed = 0.0, 0, seed
        self._last_result = None
        if self.episode_trigger is not None and self.episode_trigger(self.episode_id):
            self.start_recording(f"{self.name_prefix}-episode-{self.episode_id}")
            frame = self._grab()
            if frame is not None:
                cast(EpisodeVideo, self._video).start(frame, obs, int(info.get("lives", -1)), self._masks())
        elif self._video is not None:  # a step-triggered video goes on through the reset
            self._video.step(self._grab(), 0.0, step=0, ret=0.0)
            self._check_length()
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_id += 1
        self._episode_return += float(reward)
        self._episode_len += 1
        if self.step_trigger is not None and self.step_trigger(self.step_id):
            self.start_recording(f"{self.name_prefix}-step-{self.step_id}", frames_only=True)
        video = self._video
        if video is not None:
            video.step(self._grab(), float(reward), action, obs, int(info.get("lives", -1)), self._masks(),
                       step=self._episode_len, ret=self._episode_return)
            self._check_length()
        if terminated or truncated:
            if self._video is not None and self._video.panels:
                self._finish(bool(terminated), bool(truncated))
            else:
                self._last_result = self._result(bool(terminated), bool(truncated), None)
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        out: Any = self.env.render()
        if self._video is not None and isinstance(out, list):
            for frame in out:  # frames the user collected between steps belong to a frames-only video too (as RecordVideo)
                self._video.add_frame(to_rgb_frame(frame))
        if self.render_history:
            history, self.render_history = self.render_history, []
            return history + out
        return out

    def close(self) -> None:
        try:
            if self._video is not None:
                self.stop_recording()
            self.wait()
        finally:
            self.mark_closed()
            super().close()

    def take_videos(self) -> list[EpisodeVideo]:
        video, self._video = self._video, None
        if video is not None and not video.panels and self._last_result is not None:  # (at exit) a frames-only video
            return self.write_at_exit(video)  # whose episode has ended waits for the next reset to close it: it is whole
        return [video] if video is not None else []

    def __del__(self) -> None:
        video = getattr(self, "_video", None)  # __init__ may have raised before any attribute was set
        if video is not None and video.mode.open:
            video.abort()
            if video.frames:
                warnings.warn("RecordEpisode: the last video was not finished; call close().", stacklevel=1)

    # -- public helpers ---------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """True while a video is being recorded."""
        return self._video is not None

    def annotate(self, logits: Any = None, value: Any = None, **extra: Any) -> None:
        """Attach the agent's internals for the coming step (call before ``env.step(action)``): ``logits`` [A]
        (Box actions: ``mean=``, ``std=`` or ``log_std=`` [D]), ``value``, and any scalars of your own
        (``q_taken=...``), each drawn as a curve. Any array-like, torch tensors on any device included (read
        through their own ``detach().cpu()``: torch is not imported). The video shows exactly these numbers; the
        frame after the last step repeats the last step's. A no-op when this episode is not recorded. Anything
        that is not numbers (text, a ragged list) or of the wrong size is refused in one line (``UsageError``);
        non-finite numbers are drawn, with one warning per video: logits of -inf are impossible actions, +inf
        certain ones (sharing probability 1), a NaN leaves that step's probabilities empty; a NaN value is a gap.

        ``state=``: a recurrent loop's own state for this step, the one its policy reads for this decision (after
        the loop's reset at an episode start): a tensor or array, or an LSTM's ``(h, c)``
        (:mod:`rlviz.record.annotated_state`). The memory panel and the ``.npz``'s ``memory`` are drawn from it;
        a state at an episode's first step that is not zeros warns ``state_not_reset`` once and sets
        ``state_not_reset`` in that episode's ``.npz`` (docs/memory.md). Wrong types, empty or non-finite states,
        and a layout that changes between steps are refused in one line."""
        video = self._video
        if video is None:
            return
        if extra.get("state") is not None:
            one_env_state(extra["state"])  # one env, one row (as the vector recorder checks its rows)
        if video.annotate(logits=logits, value=value, **extra):
            if extra.get("state") is not None and not self._warned_not_reset:  # state_not_reset: said once
                self._warned_not_reset = warn_not_reset(f"RecordEpisode's episode {self.episode_id}",
                                                        video.annotations.start_gap)
            return
        if not self._warned_stream_annotate:
            self._warned_stream_annotate = True
            warnings.warn("RecordEpisode.annotate(): this video was started by step_trigger or before the first "
                          "annotation of its episode, so it records frames only; annotate from the first step of "
                          "episodes chosen by episode_trigger.", stacklevel=2)

    def start_recording(self, video_name: str, frames_only: bool = False) -> None:
        """Start a video named ``video_name`` (finishing the current one first)."""
        if self._video is not None:
            self.stop_recording()
        from ..envs.env_facts import env_mission  # (MiniGrid's text goal, for the panel: not in the recorder's import)

        panels = False if frames_only else (True if self.policy is not None else None)
        labels = VideoLabels(self.env_id, self.episode_id, self._seed, self.action_names, env_mission(self.env))
        self._video = self.video_class(self.video_folder / f"{video_name}.mp4", self.fps, self.spec_actions, self.options,
                                       labels=labels, panels=panels, with_observations=self.policy is not None,
                                       writer=self._writer)

    def stop_recording(self) -> None:
        """Finish the current video and write it (nothing is written for a video of zero frames)."""
        if self._video is None:
            raise UsageError("stop_recording() was called, but no video is being recorded; check env.recording.")
        if self._video.panels:
            self._finish(terminated=False, truncated=False)
        else:
            with self.finishing():
                video, self._video = self._video, None
                path = video.finish()
            self.wait()  # frames only: the file is complete when the episode is over, as RecordVideo's
            if path is None:
                warnings.warn("RecordEpisode: ignored saving a video with zero frames.", stacklevel=2)
            self._last_path = path or self._last_path
        if self.gc_trigger is not None and self.gc_trigger(self.episode_id):
            gc.collect()

    def finish_episode(self, truncated: bool = True) -> EpisodeResult | None:
        """The current episode's result, its video written. An episode still running is cut here (marked
        ``truncated`` unless told otherwise) and its video finished; after an episode ended by itself this
        returns that episode's result. None before the first reset."""
        if self._video is not None and self._video.panels:
            self._finish(terminated=False, truncated=bool(truncated))
        elif self._video is not None:
            self.stop_recording()
            if self._last_result is None:
                self._last_result = self._result(False, bool(truncated), self._last_path)
            else:
                self._last_result = replace(self._last_result, video_path=self._last_path)
        elif self._last_result is None and self.episode_id >= 0:
            self._last_result = self._result(False, bool(truncated), None)
        self.wait()
        return self._last_result

    # -- inside -----------------------------------------------------------------------------------
    def _grab(self) -> Any:
        """The env's current frame (uint8 RGB), or None when a RenderCollection has just been emptied."""
        frame: Any = self.env.render()
        if isinstance(frame, list):
            if not frame:
                warnings.warn("RecordEpisode: env.render() was just called, so this step's frame cannot be "
                              "captured.", stacklevel=3)
                return None
            self.render_history += frame
            frame = frame[-1]
        return to_rgb_frame(frame)

    def _masks(self) -> Any:
        """The env's action masks, for a policy that takes them (MaskablePPO); None otherwise."""
        if self.policy is None:
            return None
        from ..agent.stepping import episode_masks

        return episode_masks(self.policy, self.env)

    def _check_length(self) -> None:
        video = self._video
        if video is not None and isinstance(video.mode, Stream) and video.frames > self.video_length:
            self.stop_recording()

    def _result(self, terminated: bool, truncated: bool, path: Path | None) -> EpisodeResult:
        return EpisodeResult(index=self.episode_id, seed=self._seed, ret=self._episode_return,
                             length=self._episode_len, terminated=terminated, truncated=truncated, video_path=path)

    def _finish(self, terminated: bool, truncated: bool) -> None:
        with self.finishing():
            video, self._video = cast(EpisodeVideo, self._video), None
            path = video.finish(terminated, truncated, policy=self.policy, observation_space=self.observation_space)
        self._last_path = path or self._last_path
        if path is not None:
            self._last_panels = video
        self._last_result = self._result(terminated, truncated, path)
