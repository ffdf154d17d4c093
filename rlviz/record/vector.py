"""``RecordVectorEpisode``: record sub-envs of a gymnasium vector env, one video per episode, with the numbers the
training loop computed anyway (``annotate``) or a ``policy``'s.

::

    envs = gym.vector.SyncVectorEnv([make_env(...) for i in range(4)])
    envs = rlviz.RecordVectorEpisode(envs, f"videos/{run_name}")      # the one line CleanRL's ppo.py changes
    ...
    action, logprob, _, value = agent.get_action_and_value(next_obs)
    envs.annotate(logits=agent.actor(next_obs), value=value)          # optional: panels beside the game
    next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())

Videos: ``{name_prefix}-env-{i}-episode-{k}.mp4`` (episode ``k`` of sub-env ``i``, counted per sub-env from 0,
chosen by ``episode_trigger(k)``) and ``{name_prefix}-env-{i}-step-{s}.mp4`` (started by ``step_trigger(s)``, ``s``
= the number of ``step()`` calls so far); with ``envs_to_record="grid"``, ``{name_prefix}-grid-step-{s}.mp4``.
A video never holds two episodes. Frames per whole episode of L steps:

* autoreset NEXT_STEP (gymnasium 1.x's default) and DISABLED: **L + 1** (the reset frame and one per step);
* same-step autoreset (gymnasium 0.29, 1.x ``SAME_STEP``): **L**: the sub-env has already reset when ``step()``
  returns, so the terminal frame cannot be rendered; the video is the reset frame and the frames after steps
  1..L-1. The per-step ``.npz`` still has L actions and rewards (and L + 1 rows of the annotated numbers, the
  last repeating step L-1's, as RecordEpisode writes).

``step()`` and ``reset()`` return exactly what the wrapped vector env returned (the same objects).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from ..agent.actions import action_spec
from ..errors import UsageError
from .annotated_state import env_state_rows, warn_not_reset
from .base import RecorderBase, default_triggers, recorder_settings, settle_policy
from .episode_video import EpisodeVideo, RecordOptions, VideoLabels
from .setup import RenderModeError, action_labels
from .vector_parts import (
    DISABLED,
    SAME_STEP,
    FrameReader,
    RecordedVideo,
    SubEnvVideo,
    VideoSinks,
    autoreset_mode,
    env_rows,
    final_obs_row,
    obs_row,
    tile_frames,
)

__all__ = ["RecordVectorEpisode", "RecordedVideo", "GRID_VIDEO_LENGTH", "GRID_STEP_EVERY"]

_Base: Any = getattr(gym.vector, "VectorWrapper", None) or gym.vector.VectorEnvWrapper  # type: ignore[attr-defined]  # 1.x, 0.29

#: ``envs_to_record="grid"`` defaults: a video every GRID_STEP_EVERY steps, GRID_VIDEO_LENGTH frames long.
GRID_STEP_EVERY, GRID_VIDEO_LENGTH = 10_000, 200


def _indices(envs_to_record: Any, n: int) -> tuple[int, ...]:
    """The recorded sub-envs: distinct whole numbers in 0..n-1, or all of them for ``"grid"``."""
    if isinstance(envs_to_record, str):
        if envs_to_record != "grid":
            raise UsageError(f"envs_to_record={envs_to_record!r}; expected sub-env indices such as (0,) or 'grid'.")
        return tuple(range(n))
    try:
        given = list(envs_to_record)
    except TypeError:
        raise UsageError(f"envs_to_record={envs_to_record!r}; expected a sequence of sub-env indices such as (0,) or "
                         f"({envs_to_record!r},), or 'grid'.") from None
    indices = tuple(int(i) for i in given if isinstance(i, (int, np.integer)) and not isinstance(i, bool))
    if len(indices) != len(given) or not indices or any(not 0 <= i < n for i in indices) \
            or len(set(indices)) != len(indices):
        raise UsageError(f"envs_to_record={envs_to_record!r}; expected distinct whole sub-env indices in 0..{n - 1}.")
    return indices


class RecordVectorEpisode(RecorderBase, _Base):  # type: ignore[misc]
    """Record sub-envs of a gymnasium vector env (Sync or Async, gymnasium 0.29 or 1.x, any autoreset mode).

    Args:
        envs: a ``gymnasium.vector.VectorEnv`` whose sub-envs render images (``render_mode="rgb_array"``).
        video_folder: where the videos (and, for videos with panels, their per-step ``.npz``) go.
        envs_to_record: sub-env indices, one video per recorded episode of each (default: sub-env 0, as CleanRL
            records it); or ``"grid"``: every sub-env tiled in one video (frames only; see ``grid_width``).
        episode_trigger: ``f(k) -> bool`` on each sub-env's episode count ``k``; default: gymnasium's capped
            cubic schedule (0, 1, 8, 27, ..., 1000, 2000, ...) unless ``step_trigger`` is given.
        step_trigger: ``f(s) -> bool`` on the number of ``step()`` calls: starts a video of each recorded sub-env
            (not in a video already) after step ``s``; it ends with the episode or after ``video_length``.
            Grid: starts a grid video (default: every 10,000 steps from the first reset).
        video_length: at most ``video_length + 1`` frames a video (RecordVideo's rule); 0: whole episodes (grid: 200).
        name_prefix, fps: as ``RecordVideo`` (``fps`` default: ``metadata["render_fps"]``, else 30).
        policy: an rlviz Policy, a ``torch.nn.Module`` or a callable (see :class:`~rlviz.record.RecordEpisode`)
            computing the panels for recorded episodes only, in batches when each ends (instead of ``annotate``).
        options: a :class:`~rlviz.record.episode_video.RecordOptions` (panel layout, gamma, encoder, spool folder...;
            ``sinks``: where finished videos are logged at the env step they ended, ``step()`` calls x ``num_envs``
            as CleanRL's ``global_step``; ``grid_width``: the grid videos' width). ``camera``: as RecordEpisode's (SyncVectorEnv).

    Attributes: ``recorded`` (a :class:`RecordedVideo` per finished video, in order), ``step_id``, ``recording``,
    ``autoreset_mode`` ("next_step", "same_step" or "disabled").
    """

    def __init__(
        self,
        envs: Any,
        video_folder: str | Path,
        envs_to_record: Sequence[int] | str = (0,),
        *,
        episode_trigger: Callable[[int], bool] | None = None,
        step_trigger: Callable[[int], bool] | None = None,
        video_length: int = 0,
        name_prefix: str = "rl-video",
        fps: float | None = None,
        policy: Any = None,
        options: RecordOptions | None = None,
    ) -> None:
        super().__init__(envs)
        if not hasattr(gym.vector, "VectorWrapper"):  # gymnasium 0.29: its wrapper sets no spaces of its own
            for name in ("num_envs", "observation_space", "action_space", "single_observation_space",
                         "single_action_space", "metadata", "spec", "render_mode", "closed", "is_vector_env"):
                if hasattr(envs, name):
                    setattr(self, name, getattr(envs, name))
        self._reader = FrameReader(envs)
        n = int(envs.num_envs)
        self.grid = isinstance(envs_to_record, str)
        indices = _indices(envs_to_record, n)
        bad = {i: m for i, m in zip(indices, self._reader.render_modes(indices)) if m != "rgb_array"}
        if bad:
            raise RenderModeError(f"RecordVectorEpisode needs frames, but sub-envs {sorted(bad)} have render_mode "
                                  f"{sorted(set(map(str, bad.values())))}. Make the recorded sub-envs with render_mode="
                                  "'rgb_array', e.g. gym.make(env_id, render_mode='rgb_array').")
        settings = recorder_settings("RecordVectorEpisode", video_folder, name_prefix, fps, envs.metadata, video_length,
                                     whole=GRID_VIDEO_LENGTH if self.grid else math.inf)
        if self.grid and policy is not None:
            raise UsageError("envs_to_record='grid' records frames only; pass sub-env indices to draw a policy's panels.")
        if self.grid and step_trigger is None:
            step_trigger = lambda s: s % GRID_STEP_EVERY == 0  # noqa: E731
        self.episode_trigger, self.step_trigger = default_triggers(episode_trigger, step_trigger)
        self.envs_to_record, self.num_recorded = indices, len(indices)
        self.video_length = settings.video_length
        self._reader.use_cameras(getattr(options, "camera", None), indices, "RecordVectorEpisode")  # before the writer
        opt = self.setup_recorder(settings, options)
        self.grid_width = int(opt.grid_width)
        self.autoreset_mode = autoreset_mode(envs)
        self._spec = action_spec(envs.single_action_space)
        self._warned_not_reset = False
        subs = self._reader._subs
        self._action_names = action_labels(subs[0] if subs else None, self._spec, opt.action_names)
        self.policy = settle_policy(policy, envs.single_action_space, envs.single_observation_space, opt.squash,
                                    "RecordVectorEpisode")
        if self.policy is not None and self.policy.capabilities.recurrent and step_trigger is not None:
            raise UsageError("step_trigger starts videos mid-episode, but this policy is recurrent: its outputs "
                             "need the episode from its start. Choose episodes with episode_trigger.")
        self._sinks = VideoSinks(opt.sinks)
        spec = subs[indices[0]].spec if subs else self._reader.call("spec")[indices[0]]
        self.env_id = getattr(spec, "id", None) or type(getattr(envs, "unwrapped", envs)).__name__
        self.step_id = 0
        self.recorded: list[RecordedVideo] = []
        self._episode = dict.fromkeys(indices, -1)
        self._video: dict[int, SubEnvVideo | None] = dict.fromkeys(indices)
        self._meta: dict[int, tuple[int, int]] = {}  # env -> (episode id, start step) of its video
        self._autoreset_next: set[int] = set()  # NEXT_STEP: sub-envs whose coming step() is their reset
        self._grid: EpisodeVideo | None = None
        self._grid_start = 0

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None) -> Any:
        self.check_open("reset")
        mask = None if not options or options.get("reset_mask") is None else np.asarray(options["reset_mask"], bool)
        targets = [i for i in self.envs_to_record if mask is None or mask[i]]
        if not self.grid:
            for i in targets:
                self._finish(i, False, False)  # an episode cut by this reset
        out = self.env.reset(seed=seed, options=options)
        obs = out[0]
        self._autoreset_next.difference_update(targets)
        if self.grid:
            if mask is None and self.step_trigger is not None and self.step_trigger(self.step_id):
                self._grid_frame(start=True)
            return out
        starting = [i for i in targets if self._wants(self._episode[i] + 1)]
        frames = self._reader.frames(starting)
        for i in targets:
            self._begin(i, frames.get(i), obs)
        return out

    def step(self, actions: Any) -> Any:
        out = self.env.step(actions)
        self.step_id += 1
        if self.grid:
            self._grid_step()
        else:
            self._record_step(actions, out)
        return out

    if not hasattr(gym.vector, "VectorWrapper"):  # gymnasium 0.29: step() is step_async + step_wait
        def step_async(self, actions: Any) -> None:
            self._actions = actions
            self.env.step_async(actions)

        def step_wait(self, **kwargs: Any) -> Any:
            out = self.env.step_wait(**kwargs)
            self.step_id += 1
            if self.grid:
                self._grid_step()
            else:
                self._record_step(self._actions, out)
            return out

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``call`` on the wrapped vector env (forwarded through gymnasium 1.x wrappers too)."""
        target = self.env
        while not hasattr(target, "call") and hasattr(target, "env"):
            target = target.env
        return target.call(name, *args, **kwargs)

    def close(self, **kwargs: Any) -> None:
        """Finish every video in progress (a cut episode is still a video), wait until all are written and logged,
        then close the vector env."""
        try:
            self._finish_all()
        finally:
            self.mark_closed()
            self.env.close(**kwargs)

    def take_videos(self) -> list[EpisodeVideo]:
        videos: list[EpisodeVideo] = [v for v in self._video.values() if v is not None]
        if self._grid is not None:
            videos.append(self._grid)
        self._video, self._grid = dict.fromkeys(self._video), None
        return videos

    def __del__(self) -> None:
        if any(getattr(self, "_video", {}).values()) or getattr(self, "_grid", None) is not None:
            warnings.warn("RecordVectorEpisode: videos in progress were not finished; call close().", stacklevel=1)

    # -- the loop's numbers -----------------------------------------------------------------------
    def annotate(self, logits: Any = None, value: Any = None, **scalars: Any) -> None:
        """Attach what the loop computed for every sub-env to the step about to be taken: ``logits`` [B, A]
        (Box actions: ``mean``, ``std`` or ``log_std`` [B, D]), ``value`` [B] or [B, 1], and scalars of your own
        [B], any array-like or torch tensor. Only the rows of sub-envs being recorded are read; each video's ``.npz``
        holds them. A no-op for grid videos. Odd inputs as :meth:`rlviz.RecordEpisode.annotate` says. ``state=``:
        every sub-env's recurrent state (``[num_envs, H]``, ``[layers, num_envs, H]`` or ``(h, c)``)."""
        rows = [i for i in self.envs_to_record if not self.grid and i not in self._autoreset_next
                and (v := self._video[i]) is not None and v.mode.annotates]
        if not rows:
            return
        state = scalars.pop("state", None)
        fields = {k: v for k, v in {"logits": logits, "value": value, **scalars}.items() if v is not None}
        n = int(self.num_envs)
        per_env = {k: env_rows(v, rows, n, k) for k, v in fields.items()}
        per_env.update({"state": env_state_rows(state, rows, n)} if state is not None else {})  # type: ignore[dict-item]
        head = "mean" if self._spec.continuous else "logits"
        if head not in per_env:  # value alone (or scalars): the action panel is left empty
            per_env[head] = [np.full(self._spec.size, np.nan, np.float32)] * len(rows)
        for j, i in enumerate(rows):
            video = cast(SubEnvVideo, self._video[i])
            video.annotate(**{k: col[j] for k, col in per_env.items()})
            if state is not None and not self._warned_not_reset:  # state_not_reset: said once
                self._warned_not_reset = warn_not_reset(f"RecordVectorEpisode's sub-env {i}", video.annotations.start_gap)

    @property
    def recording(self) -> bool:
        """True while a video is in progress."""
        return self._grid is not None or any(v is not None for v in self._video.values())

    # -- sub-env videos ---------------------------------------------------------------------------
    def _wants(self, episode_id: int) -> bool:
        return self.episode_trigger is not None and bool(self.episode_trigger(episode_id))

    def _new_video(self, i: int, name: str, episode_id: int) -> SubEnvVideo:
        labels = VideoLabels(self.env_id, max(episode_id, 0), None, self._action_names)
        video = SubEnvVideo(self.video_folder / f"{name}.mp4", self.fps, self._spec, self.options, labels=labels,
                            panels=True if self.policy is not None else None,
                            with_observations=self.policy is not None, writer=self._writer)
        self._video[i] = video
        self._meta[i] = (episode_id, self.step_id)
        return video

    def _begin(self, i: int, frame: Any, obs: Any) -> None:
        """Sub-env ``i`` starts an episode; ``frame`` is its reset frame when the episode is to be recorded."""
        self._episode[i] += 1
        k = self._episode[i]
        if frame is not None:
            self._new_video(i, f"{self.name_prefix}-env-{i}-episode-{k}", k).start(frame, obs_row(obs, i))

    def _record_step(self, actions: Any, out: Any) -> None:  # noqa: C901 - one branch per autoreset case
        obs, rewards, terminated, truncated, infos = out
        same = self.autoreset_mode == SAME_STEP
        plan: dict[int, str] = {}
        wanted: list[int] = []
        for i in self.envs_to_record:
            if i in self._autoreset_next:  # NEXT_STEP: this step reset sub-env i; its frame is the reset frame
                plan[i] = "autoreset"
                if self._wants(self._episode[i] + 1):
                    wanted.append(i)
                continue
            done = bool(terminated[i]) or bool(truncated[i])
            starts = (self._video[i] is None and self.step_trigger is not None and bool(self.step_trigger(self.step_id))
                      and not (same and done))
            plan[i] = "start" if starts else "step"
            in_video = self._video[i] is not None or starts
            if (in_video and not (same and done)) or (same and done and self._wants(self._episode[i] + 1)):
                wanted.append(i)
        frames = self._reader.frames(wanted)
        for i, what in plan.items():
            frame = frames.get(i)
            if what == "autoreset":
                self._autoreset_next.discard(i)
                self._begin(i, frame, obs)
                continue
            done = bool(terminated[i]) or bool(truncated[i])
            if what == "start":
                self._new_video(i, f"{self.name_prefix}-env-{i}-step-{self.step_id}", -1)
            video = self._video[i]
            if video is not None:
                action = np.asarray(actions)[i]
                last_obs = final_obs_row(infos, obs, i) if (same and done) else obs_row(obs, i)
                video.step(None if (same and done) else frame, float(rewards[i]), action, last_obs)
                if same and done and video.panels:
                    video.drop_last = True  # the spool repeated the last frame; the video leaves it out
                if done:
                    self._finish(i, bool(terminated[i]), bool(truncated[i]))
                elif video.frames > self.video_length:
                    self._finish(i, False, False)
            if done and same:
                self._begin(i, frame, obs)
            elif done and self.autoreset_mode != DISABLED:
                self._autoreset_next.add(i)

    def _finish(self, i: int, terminated: bool, truncated: bool) -> None:
        if self._video[i] is None:
            return
        with self.finishing():
            video = cast(SubEnvVideo, self._video[i])
            self._video[i] = None
            episode_id, start = self._meta.pop(i)
            frames = video.frames - int(video.drop_last)
            path = video.finish(terminated, truncated, policy=self.policy, observation_space=self.single_observation_space)
            if path is not None:
                done = RecordedVideo(path, i, episode_id, start, video.steps, frames, video.episode_return, terminated,
                                     truncated)
                self._after_write(self._done, video, done, f"videos/env-{i}", self.step_id * int(self.num_envs))

    def _done(self, video: EpisodeVideo | None, done: RecordedVideo, name: str, step: int) -> None:
        if video is not None and video.internals is not None:
            done = replace(done, internals=video.internals)
        self.recorded.append(done)
        what = f"episode {done.episode_id}" if done.episode_id >= 0 else f"from step {done.start_step}"
        self._sinks.log(name, done.path, step, self.fps,
                        f"{done.path.stem}: {what}, {done.steps} steps, return {done.episode_return:.6g}")

    def _finish_all(self) -> None:
        for i in self.envs_to_record:
            self._finish(i, False, False)
        self._grid_end()
        self.wait()
        self._sinks.close()

    # -- grid -------------------------------------------------------------------------------------
    def _grid_step(self) -> None:
        if self.step_trigger is not None and self.step_trigger(self.step_id):
            self._grid_frame(start=True)
        elif self._grid is not None:
            self._grid_frame()

    def _grid_frame(self, start: bool = False) -> None:
        frame = tile_frames(self._reader.all_frames(), self.grid_width)
        if start:
            self._grid_end()
            path = self.video_folder / f"{self.name_prefix}-grid-step-{self.step_id}.mp4"
            self._grid = EpisodeVideo(path, self.fps, self._spec, replace(self.options, strip=False), panels=False,
                                      writer=self._writer)
            self._grid_start = self.step_id
            self._grid.start(frame)
        else:
            assert self._grid is not None  # noqa: S101 - _grid_step checked
            self._grid.step(frame, 0.0)
        if self._grid.frames > self.video_length:
            self._grid_end()

    def _grid_end(self) -> None:
        if self._grid is None:
            return
        with self.finishing():
            grid, self._grid = self._grid, None
            path = grid.finish()
            if path is not None:
                done = RecordedVideo(path, -1, -1, self._grid_start, grid.steps, grid.frames, 0.0, False, False)
                self._after_write(self._done, None, done, "videos/grid", self.step_id * int(self.num_envs))
