"""What the PettingZoo recorders (:mod:`rlviz.record.agents.pettingzoo`) share, none of it needing PettingZoo:
:class:`AgentsRecording` (triggers, folder, frame rate, the video being recorded and its writer, start / stop,
``annotate``'s routing, the warnings of an unfinished or frames-only video) and :func:`agent_specs` (each agent's
action spec, bar labels, policy and observation space). The recorders add the env's own API on top."""

from __future__ import annotations

import gc
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...agent.actions import action_spec
from ...envs.frames import to_rgb_frame
from ...errors import UsageError
from ..base import RecorderBase, default_triggers, every_episode, recorder_settings, settle_policy
from ..episode_video import VideoLabels
from ..setup import RenderModeError, action_labels, capped_cubic_video_schedule
from .video import AgentsOptions, AgentSpec, AgentsVideo

__all__ = ["AgentsRecording", "agent_specs", "action_mask"]


def agent_specs(env: Any, policies: Any = None, action_names: Any = None, owner: str = "policies"
                ) -> dict[str, AgentSpec]:
    """Each of ``env.possible_agents`` as an :class:`~rlviz.record.agents.video.AgentSpec`: its action spec, its bar
    labels (``action_names``: one tuple for all, or ``{agent: names}``), its policy (``policies``: None, one shared
    by all, or ``{agent: policy}``; each made an rlviz Policy for that agent's action space, and a callable or module
    run once on a sampled observation of the agent, so one made for another env fails here in one line naming
    ``owner``) and observation space."""
    agents = list(getattr(env, "possible_agents", None) or env.agents)
    if isinstance(policies, dict):
        unknown = sorted(set(map(str, policies)) - set(map(str, agents)))
        if unknown:
            raise UsageError(f"policies= names {unknown}, which are not among the env's agents {agents}.")
    out = {}
    for a in agents:
        space = env.action_space(a)
        spec = action_spec(space)
        policy = policies.get(a) if isinstance(policies, dict) else policies
        if policy is not None:  # checked as every recorder checks one: its actions, one forward on a sample
            policy = settle_policy(policy, space, env.observation_space(a), False, owner)
        names = action_names.get(a) if isinstance(action_names, dict) else action_names
        from ...envs.pettingzoo_envs import policy_space  # (the rollout's view: a classic game's "observation" part)

        out[a] = AgentSpec(spec, action_labels(env, spec, names), policy, policy_space(env.observation_space(a)))
    return out


def action_mask(obs: Any, info: Any) -> Any:
    """The agent's action mask: ``obs["action_mask"]`` (PettingZoo's classic games) or ``info["action_mask"]``."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return obs["action_mask"]
    if isinstance(info, dict) and "action_mask" in info:
        return info["action_mask"]
    return None


class AgentsRecording(RecorderBase):
    """What both recorders share: the triggers, the folder, the video being recorded and its writer; from
    :class:`~rlviz.record.base.RecorderBase`, what every recorder does (the writer thread, leftovers cleaned, videos of
    ended episodes written at exit without ``close()``, Ctrl-C held while an ended episode is handed over)."""

    env: Any  # (the PettingZoo wrapper's)
    _video: AgentsVideo | None
    gc_trigger: Callable[[int], bool] | None
    #: called once each finished video is complete on disk (on the writer's thread when there is one):
    #: ``on_video(path, episode_id, steps, episode_return, step_id)``, ``step_id`` the recorder's at the video's end
    on_video: Callable[[Path, int, int, float, int], None] | None = None

    def _setup(self, env: Any, video_folder: Any, triggers: tuple[Any, Any], video_length: int, name: tuple[str, Any],
               policies: Any, options: Any) -> None:
        mode = getattr(env, "render_mode", None)
        if mode in (None, "human", "ansi"):
            raise RenderModeError(f"{type(self).__name__} needs frames, but the env's render_mode is {mode!r}. "
                                  "Make the env with a render_mode that returns an image: render_mode='rgb_array'.")
        self.agents_options = opt = AgentsOptions.of(options)
        episode_trigger, step_trigger = triggers
        name_prefix, fps = name
        self.specs = agent_specs(env, policies, opt.record.action_names, type(self).__name__)
        self.has_policies = any(s.policy is not None for s in self.specs.values())
        if opt.record.saliency is not None and not self.has_policies:  # drawn over each agent's thumbnail
            raise UsageError(f"saliency={opt.record.saliency!r} takes a policy apart, and this recorder has none; pass "
                             "policies=... or RecordOptions(saliency=None).")
        if self.has_policies and (step_trigger is not None or video_length):
            raise UsageError("step_trigger and video_length cut videos anywhere; with policies a video is one episode. "
                             "Choose episodes with episode_trigger, or record frames only (no policies).")
        # the argument rules every recorder shares (rlviz.record.base), written once
        settings = recorder_settings(type(self).__name__, video_folder, name_prefix, fps,
                                     getattr(env, "metadata", None), video_length)
        self.episode_trigger, self.step_trigger = default_triggers(
            episode_trigger, step_trigger, every_episode if self.has_policies else capped_cubic_video_schedule)
        self.video_length: float = settings.video_length
        self.setup_recorder(settings, opt.record)  # options, folder, name, fps, the writer thread; finished at exit
        self.video_folder = os.path.abspath(settings.video_folder)
        spec = getattr(env, "spec", None)
        self.env_id = str(getattr(spec, "id", None) or getattr(env, "metadata", {}).get("name") or type(env.unwrapped).__name__)
        self.episode_id = self.step_id = -1
        self.render_history: list[Any] = []
        self._video = None
        self._seed: int | None = None
        self._last_path: Path | None = None
        self._warned = False

    # -- public -----------------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """True while a video is being recorded."""
        return self._video is not None

    @property
    def last_video_path(self) -> Path | None:
        """The last finished video (complete on disk when this returns)."""
        self.wait()
        return self._last_path

    def start_recording(self, video_name: str, frames_only: bool = False) -> None:
        """Start a video named ``video_name`` (finishing the current one first)."""
        if self._video is not None:
            self.stop_recording()
        panels = False if frames_only else (True if self.has_policies else None)
        labels = VideoLabels(self.env_id, max(self.episode_id, 0), self._seed)
        self._video = AgentsVideo(os.path.join(self.video_folder, f"{video_name}.mp4"), self.frames_per_sec, self.specs,
                                  self.agents_options, labels=labels, panels=panels, writer=self._writer)

    def stop_recording(self) -> None:
        """Finish the current video and write it (nothing is written for a video of zero frames)."""
        self._end(False, False)

    # -- inside -----------------------------------------------------------------------------------
    def _end(self, terminated: bool, truncated: bool) -> None:
        if self._video is None:
            raise UsageError("stop_recording() was called, but no video is being recorded; check env.recording.")
        # a Ctrl-C here waits until the ended episode is handed to the writer; one before it is held finds the video
        # still the recorder's (written at exit when its episode ended)
        with self.finishing():
            video, self._video = self._video, None
            path = video.finish(terminated, truncated)
        if not video.panels:
            self.wait()  # frames only: the file is complete when the video is, as PettingZoo's
        if path is None:
            warnings.warn(f"{type(self).__name__}: ignored saving a video with zero frames.", stacklevel=3)
        self._last_path = path or self._last_path
        if path is not None and self.on_video is not None:
            self._after_write(self.on_video, path, video.labels.episode_id, video.steps, video.episode_return,
                              self.step_id)
        if self.gc_trigger is not None and self.gc_trigger(self.episode_id):
            gc.collect()

    def _grab(self, env: Any) -> Any:
        frame = env.render()
        if isinstance(frame, list):
            if not frame:
                return None
            self.render_history += frame
            frame = frame[-1]
        return to_rgb_frame(frame)

    def _render(self, env: Any) -> Any:
        out = env.render()
        if self._video is not None and isinstance(out, list):
            for frame in out:
                self._video.add_frame(to_rgb_frame(frame))
        if self.render_history:
            history, self.render_history = self.render_history, []
            return history + (out if isinstance(out, list) else [out])
        return out

    def _start_episode(self, env: Any) -> None:
        """After a reset: the previous whole-episode video ends; a triggered one starts with the reset's frame."""
        if self._video is not None and self.video_length == math.inf:
            self.stop_recording()
        if self.episode_trigger is not None and self.episode_trigger(self.episode_id):
            self.start_recording(f"{self.name_prefix}-episode-{self.episode_id}")
            self._video.start(self._grab(env))  # type: ignore[union-attr]
        elif self._video is not None:  # a video cut by length goes on through the reset
            self._video.step(self._grab(env), {})
        self._check_length()

    def _after_step(self, frame_source: Any, rewards: dict[str, float], before: list[str], final_obs: Any) -> None:
        self.step_id += 1
        if self.step_trigger is not None and self.step_trigger(self.step_id):
            self.start_recording(f"{self.name_prefix}-step-{self.step_id}", frames_only=True)
        video = self._video
        if video is None:
            return
        now = set(frame_source.agents)
        left = [a for a in before if a not in now]
        video.step(self._grab(frame_source), rewards, left if now else (), final_obs(left))
        video.ended = video.ended or not now  # (kept: the next reset refills env.agents before it closes the video)
        self._check_length()

    def _check_length(self) -> None:
        video = self._video
        if video is not None and not video.panels and video.frames > self.video_length:
            self.stop_recording()

    def _annotate(self, agent: str, fields: dict[str, Any]) -> None:
        video = self._video
        if video is None or video.annotate(agent, **fields):
            return
        if not self._warned:
            self._warned = True
            warnings.warn(f"{type(self).__name__}.annotate(): this video records frames only (begun by step_trigger, "
                          "or not annotated before its first step); annotate from the first step of episodes chosen "
                          "by episode_trigger.", stacklevel=3)

    def take_videos(self) -> list[Any]:
        """The video in progress, handed over (at exit it is dropped: its episode did not end). A frames-only video
        whose episode has ended (it waits for the next reset to close it, as PettingZoo's) is whole: written here."""
        video, self._video = self._video, None
        if video is None or not video.open:
            return []
        if video.panels is False and (video.ended or not self.env.agents):  # (a Ctrl-C inside the next reset)
            return self.write_at_exit(video)
        return [video]

    def finish_videos(self) -> None:
        """Finish the current video, if any (an episode cut short), and wait until every video is written."""
        if self._video is not None:
            self.stop_recording()
        self.wait()

    def _del(self) -> None:
        try:
            video = object.__getattribute__(self, "_video")
        except AttributeError:
            return
        if video is not None and video.open:
            video.abort()
            if video.frames:
                warnings.warn(f"{type(self).__name__}: the last video was not finished; call close().", stacklevel=1)
