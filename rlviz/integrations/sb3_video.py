"""``VecRecordEpisode``: a drop-in for Stable-Baselines3's ``VecVideoRecorder`` without moviepy, which can also draw
the model's internals.

::

    from rlviz.integrations.sb3 import VecRecordEpisode      # was: from stable_baselines3.common.vec_env import VecVideoRecorder

    vec_env = VecRecordEpisode(vec_env, "videos", record_video_trigger=lambda x: x % 2000 == 0, video_length=200)
    model = PPO("MlpPolicy", vec_env).learn(10_000)
    vec_env.close()

Same arguments, attributes and files as ``VecVideoRecorder``: a video starts at a step ``record_video_trigger``
accepts (``step_id``: ``step()`` calls since the wrapper was made) and holds ``video_length + 1`` frames of
``venv.render()`` (SB3's tiling of every sub-env), written to ``{name_prefix}-step-{a}-to-step-{b}.mp4`` with
``b = a + video_length``. Frames stream to our H.264 writer as they come: none is kept in memory (SB3 keeps every
frame of a video, then encodes it through moviepy).

``model=`` (an SB3 algorithm or its policy): the video shows sub-env ``env_index`` alone with the model's
panels (action probabilities, value, entropy) beside it, computed for the recorded steps only when the video ends,
and the per-step numbers go to a ``.npz`` beside it. A clip may span episode ends (as SB3's does): its
return-to-go is then that of the clip's rewards. ``options.sinks``: where finished videos are logged at their env step
(``step_id * num_envs``), as :class:`rlviz.RecordVectorEpisode` does (default ``"auto"``: an active W&B run).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..agent.actions import action_spec
from ..envs.frames import to_rgb_frame
from ..errors import UsageError, require
from ..record.base import RecorderBase, recorder_settings
from ..record.episode_video import RecordOptions, VideoLabels
from ..record.setup import RenderModeError
from ..record.vector_parts import SubEnvVideo, VideoSinks
from .sb3_observations import ModelObservations

_vec = require("stable_baselines3.common.vec_env", "sb3", "VecRecordEpisode")

__all__ = ["VecRecordEpisode", "FramesWritten"]


def _camera_views(base: Any, cameras: Any) -> list[Any] | None:
    """Each sub-env of a DummyVecEnv seen by ``cameras`` (``RecordOptions.camera``: :mod:`rlviz.envs.cameras`),
    checked against its model now; None without cameras."""
    from ..envs.cameras import camera_list, with_cameras

    if not camera_list(cameras):
        return None
    if not isinstance(base, _vec.DummyVecEnv):
        raise UsageError(f"VecRecordEpisode(options=RecordOptions(camera={cameras!r})) tiles cameras of sub-envs in "
                         f"this process, but a {type(base).__name__}'s sub-envs render in their own processes; use a "
                         "DummyVecEnv, or wrap each env in rlviz.envs.with_cameras(env, ...) in its factory.")
    return [with_cameras(env, cameras) for env in base.envs]


class FramesWritten:
    """``recorded_frames`` of a video in progress: only how many frames went to the encoder (``len``); the frames
    themselves are not kept."""

    def __init__(self) -> None:
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<{self.count} frames written>"


class VecRecordEpisode(RecorderBase, _vec.VecEnvWrapper):  # type: ignore[name-defined]
    """Record a Stable-Baselines3 VecEnv to MP4 (``VecVideoRecorder``'s arguments; see the module docstring).

    Args:
        venv, video_folder, record_video_trigger, video_length, name_prefix: as ``VecVideoRecorder``
            (``name_prefix`` a file name prefix, not a path).
        model: an SB3 algorithm (or its ``.policy``) whose internals are drawn beside sub-env ``env_index``. Its
            observation shape must be the VecEnv's (checked when it first meets an observation). With a
            ``VecNormalize`` the panels are computed on the observations the model acts on: normalised inside this
            recorder, they are what it sees; wrapped around it, the algorithm's ``get_vec_normalize_env()``
            normalises each recorded observation with the statistics it was acted on with. A policy alone (or a
            VecNormalize that is neither) cannot say: a warning says so and the observations are drawn as seen.
        env_index: the sub-env recorded with ``model``.
        options: a :class:`rlviz.RecordOptions` (panels, encoder; ``sinks``: where finished videos are logged, see
            :class:`rlviz.RecordVectorEpisode`; ``camera``: a DummyVecEnv's MuJoCo sub-envs seen by those cameras,
            tiled as by RecordEpisode, an unknown one refused here).
    """

    video_name: str
    video_path: str

    def __init__(self, venv: Any, video_folder: str, record_video_trigger: Callable[[int], bool],
                 video_length: int = 200, name_prefix: str = "rl-video", *, model: Any = None, env_index: int = 0,
                 options: RecordOptions | None = None) -> None:
        _vec.VecEnvWrapper.__init__(self, venv)
        self.env = venv
        base = venv
        while isinstance(base, _vec.VecEnvWrapper):
            base = base.venv
        if isinstance(base, (_vec.DummyVecEnv, _vec.SubprocVecEnv)):
            self.env.metadata = base.get_attr("metadata")[0]
        self._views = _camera_views(base, getattr(options, "camera", None))  # an unknown camera: refused now
        if self.env.render_mode != "rgb_array":
            raise RenderModeError(f"VecRecordEpisode needs frames, but the VecEnv's render_mode is "
                                  f"{self.env.render_mode!r}; make its envs with render_mode='rgb_array' "
                                  "(make_vec_env(..., env_kwargs={'render_mode': 'rgb_array'})).")
        if not callable(record_video_trigger):
            raise UsageError(f"record_video_trigger={record_video_trigger!r}; expected a function of the step count.")
        settings = recorder_settings("VecRecordEpisode", video_folder, name_prefix, None, self.env.metadata,
                                     video_length, least=1)
        if not 0 <= int(env_index) < venv.num_envs:
            raise UsageError(f"env_index={env_index}; the VecEnv has sub-envs 0..{venv.num_envs - 1}.")
        self.setup_recorder(settings, options)
        self.video_folder = os.path.abspath(video_folder)  # (a str, as VecVideoRecorder's)
        self.record_video_trigger = record_video_trigger
        self.video_length = int(settings.video_length)
        self.step_id, self.recording = 0, False
        self.recorded_frames = FramesWritten()
        self.env_index = int(env_index)
        self.model = model
        self._policy: Any = None
        self._stream: SubEnvVideo | None = None
        self._sinks = VideoSinks(self.options.sinks)
        self._obs = ModelObservations(self)
        self._held: tuple[Any, float, Any, Any, bool] | None = None  # a step waiting for the model to act on it
        self._stop_pending = False
        #: paths of the finished videos, in order
        self.videos: list[Path] = []
        if model is not None:
            self._obs.check(model)

    # -- VecEnv API -------------------------------------------------------------------------------
    def reset(self) -> Any:
        self.check_open("reset")
        self._release()
        obs = self.venv.reset()
        self._last_obs = obs
        if self.record_video_trigger(self.step_id):
            self._start_video_recorder()
        return obs

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.step_id += 1
        reward = float(np.asarray(rewards)[self.env_index])
        if self.recording:
            self._capture_frame(reward, obs)
            if len(self.recorded_frames) > self.video_length:
                if self._held is None:
                    self._stop_recording()
                else:  # its last observation is normalised when the model acts on it (the next step_async)
                    self._stop_pending = True
        elif self.record_video_trigger(self.step_id):
            self._start_video_recorder()
        self._last_obs = obs
        return obs, rewards, dones, infos

    def step_async(self, actions: np.ndarray) -> None:
        self._release()  # the model has acted on the held observation: normalised as it saw it
        self._actions = actions
        self.venv.step_async(actions)

    def close(self) -> None:
        """Close the VecEnv, then finish the video in progress and wait until every video is written."""
        _vec.VecEnvWrapper.close(self)
        try:
            if self.recording:
                self._stop_recording()
            self.wait()
        finally:
            self.mark_closed()

    def take_videos(self) -> list[Any]:
        stream, self._stream, self._held = self._stream, None, None
        self.recording = False
        return [stream] if stream is not None else []

    def __del__(self) -> None:
        if getattr(self, "recording", False):
            import warnings

            warnings.warn("VecRecordEpisode: the last video was not finished; call close().", stacklevel=1)

    # -- recording --------------------------------------------------------------------------------
    def _start_video_recorder(self) -> None:
        self.video_name = f"{self.name_prefix}-step-{self.step_id}-to-step-{self.step_id + self.video_length}.mp4"
        self.video_path = os.path.join(self.video_folder, self.video_name)
        self._start_recording()
        self._capture_frame(0.0, getattr(self, "_last_obs", None), first=True)

    def _start_recording(self) -> None:
        if self.recording:
            self._stop_recording()
        model = self.model is not None
        if model:
            self._obs.check(self.model)  # (a model set after construction meets the observations here)
        self.recording = True
        self.recorded_frames = FramesWritten()
        spec = action_spec(self.venv.action_space)
        self._stream = SubEnvVideo(self.video_path, self.frames_per_sec, spec, self.options, panels=model,
                                   with_observations=model, labels=VideoLabels(self._env_id() if model else ""),
                                   writer=self._writer)

    def _capture_frame(self, reward: float, obs: Any, first: bool = False) -> None:
        stream = self._stream
        if stream is None:
            return
        row, action = None, cast(Any, None)
        if self.model is None:
            # SB3's tiling of every sub-env (its tile_images, each sub-env through its cameras when asked)
            frame = self.env.render() if self._views is None else _vec.base_vec_env.tile_images(
                [v.render() for v in self._views])
            if not isinstance(frame, np.ndarray):
                self._stop_recording()
                import warnings

                warnings.warn(f"Recording stopped: render() returned {type(frame).__name__}, not a numpy array.",
                              stacklevel=3)
                return
        else:
            frame = (self.venv.env_method("render", indices=[self.env_index])[0] if self._views is None
                     else self._views[self.env_index].render())
            row = None if obs is None else _row(obs, self.env_index)
            action = None if first else np.asarray(self._actions)[self.env_index]  # panels need the action
        self.recorded_frames.count += 1
        step = (to_rgb_frame(frame), reward, action, row, first)
        if row is not None and self._obs.outside is not None:
            self._held = step  # normalised when the model acts on it (step_async), with the statistics it used
            return
        self._feed(step)

    def _feed(self, step: tuple[Any, float, Any, Any, bool]) -> None:
        stream = self._stream
        if stream is None:
            return
        frame, reward, action, row, first = step
        if first:
            stream.start(frame, row)
        else:
            stream.step(frame, reward, action, row)

    def _feed_held(self) -> None:
        """Feed the held step, its observation normalised as the model saw it."""
        held, self._held = self._held, None
        if held is not None:
            frame, reward, action, row, first = held
            self._feed((frame, reward, action, self._obs.normalize(row), first))

    def _release(self) -> None:
        """The model acts now: the held step goes in, then a stop that waited for it."""
        self._feed_held()
        if self._stop_pending:
            self._stop_recording()

    def _stop_recording(self) -> None:
        self._feed_held()
        self._stop_pending = False
        with self.finishing():
            stream, self._stream = self._stream, None
            self.recording = False
            if stream is None:
                return
            policy = self._model_policy() if self.model is not None else None
            path = stream.finish(policy=policy, observation_space=self.venv.observation_space)
            if path is None:
                return
            self._after_write(self._done, Path(path), self.step_id * int(self.num_envs))
        if self._writer is not None and policy is None:  # frames only: the file is complete when its clip ends
            self._writer.wait()

    def _done(self, path: Path, step: int) -> None:
        self.videos.append(path)
        self._sinks.log(f"videos/{self.name_prefix}", path, step, self.frames_per_sec, path.stem)

    def _env_id(self) -> str:
        try:
            spec = self.venv.get_attr("spec", indices=[self.env_index])[0]
        except Exception:  # a VecEnv that does not hold gymnasium envs
            spec = None
        return str(getattr(spec, "id", None) or type(self).__name__)

    def _model_policy(self) -> Any:
        if self._policy is None:
            from gymnasium import spaces

            from ..sources.stable_baselines3.zips import sb3_policy

            # a Dict space's image keys reach this recorder as the env gives them (channels last when SB3 put its
            # VecTransposeImage outside): the policy takes them as they come here
            space = self.venv.observation_space
            self._policy = sb3_policy(self.model, device="cpu" if not hasattr(self.model, "device") else
                                      self.model.device,
                                      observation_space=space if isinstance(space, spaces.Dict) else None)
        return self._policy


def _row(obs: Any, i: int) -> Any:
    """Sub-env ``i``'s observation in a VecEnv's batch, copied: an array, or a dict / tuple of them (Dict / Tuple
    spaces, whose batches SB3 keeps per key)."""
    if isinstance(obs, dict):
        return {k: _row(v, i) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(v, i) for v in obs)
    return np.array(obs[i], copy=True)
