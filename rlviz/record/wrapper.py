"""``RecordEpisode``: gymnasium's ``RecordVideo``, plus the agent's internals when it has them.

Without a policy it is a drop-in for ``gymnasium.wrappers.RecordVideo`` (same arguments, defaults, file
names, ``recording`` / ``episode_id`` / ``step_id``, start/stop recording, ``RenderCollection`` on either
side): frames go straight to the H.264 encoder, nothing is kept in memory. With internals (a ``policy=``,
or ``annotate()`` calls from the user's loop before each step) a video is one episode: frames and
observations are spooled to disk, the policy's internals are computed in batches when the episode ends
and drawn in panels beside the game.

Wrap outermost (after preprocessing wrappers): observations are then what the agent sees and
frames are the full-colour game from ``render()``.
"""

from __future__ import annotations

import gc
import math
import os
import re
import warnings
from array import array
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from ..agent.actions import action_spec, check_policy_actions
from ..agent.callable_policy import CallablePolicy, as_policy
from ..agent.obs import is_plain
from ..agent.stepping import episode_masks
from ..choices import SALIENCY_METHODS
from ..envs.frames import to_rgb_frame
from ..envs.recipe import check_render_mode
from ..episode.result import EpisodeResult
from ..episode.trace import EpisodeInternals, EpisodeTrace, Spool, make_spool
from ..errors import UsageError
from .internals import Annotations, compute_internals, save_episode_data
from .setup import RenderModeError, action_labels, capped_cubic_video_schedule, probe_callable
from .stream import FrameStream

if TYPE_CHECKING:  # annotations only: importing them here would load torch and the drawing code early
    import torch

    from ..agent.policy import Policy
    from ..draw.compose import ComposeOptions

__all__ = ["RecordEpisode", "RenderModeError", "capped_cubic_video_schedule", "compute_internals",
           "save_episode_data"]


class RecordEpisode(gym.Wrapper):
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
        strip: frames only: a thin strip under the game with the step, reward and return so far.
        gamma: discount of the return-to-go drawn beside the value trace.
        saliency: None, "gradient", "smoothgrad" or "perturbation" (computed for the whole episode in batches).
        saliency_target: "action" (chosen action's logit), "logprob", "value" or an action index.
        compose_options: a :class:`rlviz.draw.ComposeOptions`.
        save_data: with internals, also write the per-step numbers as ``.npz``.
        spool_dir: where episode frames and observations are spooled (default: the system temp folder).
        action_names: labels of Discrete action bars (default: ALE's / MinAtar's names, else the indices).
        squash: Box actions: the policy is a tanh-squashed Gaussian (SAC), drawn in action units.
    """

    def __init__(  # noqa: C901 - one check per argument
        self,
        env: gym.Env,
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
        strip: bool = False,
        gamma: float = 0.99,
        saliency: str | None = None,
        saliency_target: str | int = "action",
        compose_options: ComposeOptions | None = None,
        preset: str = "veryfast",
        crf: int = 23,
        save_data: bool = True,
        spool_dir: str | os.PathLike[str] | None = None,
        action_names: Sequence[str] | None = None,
        squash: bool = False,
    ) -> None:
        super().__init__(env)
        if env.render_mode in (None, "human", "ansi"):
            raise RenderModeError(
                f"RecordEpisode needs frames, but the env's render_mode is {env.render_mode!r}. Initialize your "
                "environment with a render_mode that returns an image, such as rgb_array: "
                "gym.make(env_id, render_mode='rgb_array')."
            )
        check_render_mode(env, env.render_mode)  # an env that only claims the mode fails here, not on render()
        self.spec_actions = spec = action_spec(env.action_space)
        self.policy = None if policy is None else as_policy(policy, env.action_space, squash)
        if self.policy is not None:
            check_policy_actions(self.policy, env.action_space)
            if isinstance(self.policy, CallablePolicy) and self.policy.fn is policy:
                probe_callable(self.policy, policy, env.observation_space)
            if step_trigger is not None or video_length:
                raise UsageError("step_trigger and video_length cut videos anywhere; with a policy a video is one "
                                 "episode. Choose episodes with episode_trigger, or record frames only (no policy).")
        if saliency is not None and saliency not in SALIENCY_METHODS:
            raise UsageError(f"saliency={saliency!r} is not known; use None or one of {SALIENCY_METHODS}.")
        if saliency is not None and self.policy is None:
            raise UsageError(f"saliency={saliency!r} needs policy=...: saliency takes the network apart.")
        if saliency in ("gradient", "smoothgrad") and not getattr(self.policy, "differentiable", False):
            raise UsageError(f"saliency={saliency!r} takes gradients, but this policy is forward-only (a numpy "
                             "callable); use saliency='perturbation', which needs forward passes only.")
        if saliency is not None and getattr(self.policy, "stateful", False):
            raise UsageError(f"saliency={saliency!r} does not handle recurrent policies yet; use saliency=None.")
        if saliency is not None and not is_plain(env.observation_space):
            raise UsageError(f"saliency={saliency!r} maps array observations, but this env's are {env.observation_space}; "
                             "use saliency=None (CLI: --saliency none) for it.")
        if not 0.0 <= float(gamma) <= 1.0:
            raise UsageError(f"gamma={gamma} is outside [0, 1].")
        if re.search(r"[\\/]", name_prefix):
            raise UsageError(f"name_prefix={name_prefix!r} must be a file name prefix, not a path.")
        if int(video_length) < 0:
            raise UsageError(f"video_length={video_length}; expected 0 (whole episodes) or a number of frames.")
        if episode_trigger is None and step_trigger is None:
            episode_trigger = capped_cubic_video_schedule if self.policy is None else (lambda episode_id: True)
        self.episode_trigger, self.step_trigger = episode_trigger, step_trigger
        self.video_length = int(video_length) if video_length else math.inf
        self.disable_logger, self.gc_trigger, self.strip = disable_logger, gc_trigger, bool(strip)
        self.video_folder = Path(video_folder)
        self.video_folder.mkdir(parents=True, exist_ok=True)
        self.name_prefix = name_prefix
        self.fps = self.frames_per_sec = float(fps or env.metadata.get("render_fps") or 30)
        if self.fps <= 0:
            raise UsageError(f"fps={fps}; expected a positive number.")
        self.gamma, self.saliency, self.saliency_target = float(gamma), saliency, saliency_target
        self.compose_options = compose_options
        self.preset, self.crf, self.save_data = preset, int(crf), bool(save_data)
        self.spool_dir = None if spool_dir is None else str(spool_dir)
        self.action_names = action_labels(env, spec, action_names)
        env_spec = getattr(env, "spec", None)
        self.env_id = env_spec.id if env_spec is not None else type(env.unwrapped).__name__
        self.episode_id = self.step_id = -1
        self.render_history: list[Any] = []
        self.last_video_path: Path | None = None
        self.last_internals: EpisodeInternals | None = None  # without saliency maps (they live on disk)
        self.last_result: EpisodeResult | None = None
        self._mode: str | None = None  # None | "pending" | "stream" | "spool" (see the module docstring)
        self._video_name: str | None = None
        self._stream: FrameStream | None = None
        self._rec: dict[str, Any] | Any = None  # the episode being spooled ("spool" mode)
        self._pending: tuple[Any, Any, dict[str, Any]] | None = None
        self._annotations = Annotations(self.spec_actions)
        self._episode_return, self._episode_len, self._seed = 0.0, 0, cast("int | None", None)
        self._warned_stream_annotate = False

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[Any, Any] | None = None) -> Any:
        if self._mode == "spool":  # the previous episode was cut short by this reset
            self._finish(terminated=False, truncated=False)
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode_id += 1
        if self._mode is not None and self.video_length == math.inf:
            self.stop_recording()
        self._episode_return, self._episode_len, self._seed = 0.0, 0, seed
        self._annotations = Annotations(self.spec_actions)
        self.last_result = None
        if self.episode_trigger is not None and self.episode_trigger(self.episode_id):
            self.start_recording(f"{self.name_prefix}-episode-{self.episode_id}")
            frame = self._grab()
            if frame is not None and self.policy is not None:
                self._start_spool(frame, obs, info)
            elif frame is not None:
                self._pending = (frame, obs, info)
        elif self._mode == "stream":
            self._stream_frame(self._grab(), 0.0)
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_id += 1
        self._episode_return += float(reward)
        self._episode_len += 1
        if self.step_trigger is not None and self.step_trigger(self.step_id):
            self.start_recording(f"{self.name_prefix}-step-{self.step_id}")
            self._mode = "stream"
        if self._mode == "pending":
            self._decide()
        if self._mode == "stream":
            self._stream_frame(self._grab(), float(reward))
        elif self._mode == "spool":
            self._spool_step(action, reward, obs, info)
        if terminated or truncated:
            if self._mode == "spool":
                self._finish(bool(terminated), bool(truncated))
            else:
                self.last_result = self._result(bool(terminated), bool(truncated), None)
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        out: Any = self.env.render()
        if self._mode == "stream" and isinstance(out, list):
            for frame in out:  # frames the user collected between steps belong to the video too (as RecordVideo)
                self._stream_frame(to_rgb_frame(frame), 0.0, count=False)
        if self.render_history:
            history, self.render_history = self.render_history, []
            return history + out
        return out

    def close(self) -> None:
        try:
            if self._mode is not None:
                self.stop_recording()
        finally:
            super().close()

    def __del__(self) -> None:
        stream = getattr(self, "_stream", None)  # __init__ may have raised before any attribute was set
        if stream is not None:
            stream.abort()
            warnings.warn("RecordEpisode: the last video was not finished; call close().", stacklevel=1)

    # -- public helpers ---------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """True while a video is being recorded."""
        return self._mode is not None

    def annotate(self, logits: Any = None, value: Any = None, **extra: Any) -> None:
        """Attach the agent's internals for the coming step (call before ``env.step(action)``): ``logits`` [A]
        (Box actions: ``mean=``, ``std=`` or ``log_std=`` [D]), ``value``, and any scalars of your own
        (``q_taken=...``), each drawn as a curve. The video shows exactly these numbers; the frame after the
        last step repeats the last step's. A no-op when this episode is not recorded."""
        fields = {"logits": logits, "value": value, **extra}
        if self._mode in ("pending", "spool"):
            self._annotations.add(self._episode_len, fields)
        elif self._mode == "stream" and not self._warned_stream_annotate:
            self._warned_stream_annotate = True
            warnings.warn("RecordEpisode.annotate(): this video was started by step_trigger or before the first "
                          "annotation of its episode, so it records frames only; annotate from the first step of "
                          "episodes chosen by episode_trigger.", stacklevel=2)

    def start_recording(self, video_name: str) -> None:
        """Start a video named ``video_name`` (finishing the current one first)."""
        if self._mode is not None:
            self.stop_recording()
        self._video_name = video_name
        self._mode = "pending"

    def stop_recording(self) -> None:
        """Finish the current video and write it (nothing is written for a video of zero frames)."""
        if self._mode is None:
            raise UsageError("stop_recording() was called, but no video is being recorded; check env.recording.")
        if self._mode == "spool":
            self._finish(terminated=False, truncated=False)
        else:
            if self._mode == "pending" and self._pending is not None:
                self._mode = "stream"
                self._stream_frame(self._pending[0], 0.0)
            path = self._stream.close() if self._stream is not None else None
            if path is None:
                warnings.warn("RecordEpisode: ignored saving a video with zero frames.", stacklevel=2)
            self.last_video_path = path or self.last_video_path
        self._mode, self._stream, self._pending, self._video_name = None, None, None, None
        if self.gc_trigger is not None and self.gc_trigger(self.episode_id):
            gc.collect()

    def finish_episode(self, truncated: bool = True) -> EpisodeResult | None:
        """The current episode's result, its video written. An episode still running is cut here (marked
        ``truncated`` unless told otherwise) and its video finished; after an episode ended by itself this
        returns that episode's result. None before the first reset."""
        if self._mode == "spool":
            self._finish(terminated=False, truncated=bool(truncated))
        elif self._mode is not None:
            self.stop_recording()
            if self.last_result is None:
                self.last_result = self._result(False, bool(truncated), self.last_video_path)
            else:
                self.last_result = replace(self.last_result, video_path=self.last_video_path)
        elif self.last_result is None and self.episode_id >= 0:
            self.last_result = self._result(False, bool(truncated), None)
        return self.last_result

    # -- frames only ------------------------------------------------------------------------------
    def _grab(self) -> Any:
        """The env's current frame (uint8 RGB), or None when a RenderCollection has just been emptied."""
        frame = self.env.render()
        if isinstance(frame, list):
            if not frame:
                warnings.warn("RecordEpisode: env.render() was just called, so this step's frame cannot be "
                              "captured.", stacklevel=3)
                return None
            self.render_history += frame
            frame = frame[-1]
        return to_rgb_frame(frame)

    def _stream_frame(self, frame: Any, reward: float, count: bool = True) -> None:
        if frame is None:
            return
        if self._stream is None:
            path = self.video_folder / f"{self._video_name}.mp4"
            self._stream = FrameStream(path, self.fps, self.preset, self.crf, self.strip)
        self._stream.write(frame, self._episode_len, reward, self._episode_return)
        if count and self._stream.frames > self.video_length:
            self.stop_recording()

    def _decide(self) -> None:
        """First step of an episode-triggered video without a policy: annotated -> panels, else frames only."""
        if self._pending is None:  # the reset frame could not be captured
            self._mode = "stream"
            return
        frame, obs, info = self._pending
        self._pending = None
        if self._annotations:
            self._start_spool(frame, obs, info)
            return
        self._mode = "stream"
        self._stream_frame(frame, 0.0)

    # -- with internals ---------------------------------------------------------------------------
    def _start_spool(self, frame: Any, obs: Any, info: Any) -> None:
        self._mode = "spool"
        self._rec = {
            "frames": Spool(frame.shape, np.uint8, dir=self.spool_dir, name="frames"),
            "obs": make_spool(obs, dir=self.spool_dir, name="obs"),  # a Dict/Tuple observation kept whole
            "actions": array("d"),
            "rewards": array("d"),
            "lives": array("l", [int(info.get("lives", -1))]),
            "masks": [],  # the env's action masks, for a policy that takes them (MaskablePPO)
        }
        self._spool_masks()
        self._rec["frames"].append(frame)
        self._rec["obs"].append(obs)

    def _spool_step(self, action: Any, reward: Any, obs: Any, info: Any) -> None:
        rec = self._rec
        rec["actions"].extend(np.asarray(action, dtype=np.float64).reshape(-1).tolist())
        rec["rewards"].append(float(reward))
        rec["lives"].append(int(info.get("lives", -1)))
        frame = self._grab()
        rec["frames"].append(frame if frame is not None else rec["frames"].view()[-1])
        rec["obs"].append(obs)
        self._spool_masks()

    def _spool_masks(self) -> None:
        masks = episode_masks(self.policy, self.env) if self.policy is not None else None
        if masks is not None:
            self._rec["masks"].append(masks)

    def _result(self, terminated: bool, truncated: bool, path: Path | None) -> EpisodeResult:
        return EpisodeResult(index=self.episode_id, seed=self._seed, ret=self._episode_return,
                             length=self._episode_len, terminated=terminated, truncated=truncated, video_path=path)

    def _finish(self, terminated: bool, truncated: bool) -> None:
        rec, self._rec = self._rec, None
        name = self._video_name or f"{self.name_prefix}-episode-{self.episode_id}"
        self._mode, self._video_name = None, None
        try:
            trace = self._trace(rec, terminated, truncated)
            internals = compute_internals(trace, self.policy, self.gamma, self.saliency, self.saliency_target,
                                          self._annotations, self.spec_actions,
                                          observation_space=self.observation_space)
            path = self.video_folder / f"{name}.mp4"
            self._write(trace, internals, path)
            self.last_video_path = path
            self.last_internals = replace(internals, saliency=None)
            self.last_result = self._result(terminated, truncated, path)
        finally:
            for key in ("frames", "obs"):
                rec[key].close()

    def _trace(self, rec: dict[Any, Any], terminated: bool, truncated: bool) -> EpisodeTrace:
        spec = self.spec_actions
        steps = len(rec["rewards"])
        dtype = np.float32 if spec.continuous else np.int64
        lives = np.asarray(rec["lives"], dtype=np.int32)
        return EpisodeTrace(
            frames=rec["frames"].view(), observations=rec["obs"].view(),
            actions=np.asarray(rec["actions"]).reshape((steps,) + spec.shape).astype(dtype),
            rewards=np.asarray(rec["rewards"], dtype=np.float32), lives=None if (lives < 0).all() else lives,
            terminated=terminated, truncated=truncated, action_names=self.action_names, episode_id=self.episode_id,
            seed=self._seed, fps=self.fps, env_id=self.env_id,
            action_masks=np.stack(rec["masks"]) if rec["masks"] else None,
        )

    def _write(self, trace: EpisodeTrace, internals: EpisodeInternals, path: Path) -> None:
        from ..draw.compose import ComposeOptions
        from ..draw.video import video_timing, write_episode_video

        options = self.compose_options or ComposeOptions()
        write_episode_video(trace, internals, path, options=options, fps=self.fps, preset=self.preset, crf=self.crf)
        if self.save_data:
            rate, _ = video_timing(trace.num_steps + 1, self.fps, options.min_seconds)
            save_episode_data(trace, internals, path.with_suffix(".npz"), fps=rate)
