"""``RecordEpisode``: a gymnasium wrapper that records episodes with the agent's internals.

Per step it captures the rendered frame, the observation the policy saw, the action, reward,
terminated/truncated and ``lives``; at the end of an episode it computes the policy's internals
for every frame in batches, composes the panels and streams an H.264 MP4. Frames and
observations are spooled to disk, so memory does not grow with episode length.

Wrap outermost (after preprocessing wrappers): observations are then what the agent sees and
frames are the full-colour game from ``render()``.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np

from ..agent.obs import FlatView, ObsAdapter, is_plain
from ..agent.policy import Policy, action_names_for, check_action_space
from ..choices import SALIENCY_METHODS
from ..envs.frames import to_rgb_frame
from ..envs.recipe import check_render_mode
from ..episode.result import EpisodeResult
from ..episode.trace import EpisodeInternals, EpisodeTrace, Spool, make_spool, returns_to_go
from ..errors import EnvError, UsageError
from ..media.atomic import atomic_path

__all__ = ["RecordEpisode", "compute_internals", "save_episode_data"]


def compute_internals(
    trace: EpisodeTrace,
    policy: Policy,
    gamma: float = 0.99,
    saliency: str | None = None,
    saliency_target: str | int = "action",
    observation_space=None,
) -> EpisodeInternals:
    """What ``policy`` says on each of the T+1 frames of ``trace``, computed in batches.

    The return-to-go after a time-limit truncation is bootstrapped with the value of the last frame
    (when the policy has a value head); after termination it is 0. ``observation_space``: the env's, for
    observations the policy sees flattened (Discrete, Tuple, Dict: :mod:`rlviz.agent.obs`).
    """
    obs = trace.observations
    if observation_space is not None and not is_plain(observation_space):
        obs = FlatView(ObsAdapter(observation_space, getattr(policy, "obs_format", "flat")), obs)
    out = policy.evaluate(obs)
    bootstrap = 0.0
    if trace.truncated and out.value is not None:
        bootstrap = float(out.value[-1])
    rtg = returns_to_go(trace.rewards, gamma, bootstrap)
    maps, label = None, ""
    if saliency is not None:
        from ..explain.saliency import episode_saliency

        chosen = np.concatenate([trace.actions, out.logits[-1:].argmax(-1)]).astype(np.int64)
        # maps live in an unlinked temporary file (np.memmap), freed with the array
        maps, label = episode_saliency(policy, obs, chosen, method=saliency, target=saliency_target)
    return EpisodeInternals(
        logits=out.logits,
        probs=out.probs,
        value=out.value,
        entropy=out.entropy,
        returns_to_go=rtg,
        gamma=float(gamma),
        kind=out.kind,
        saliency=maps,
        saliency_label=label,
    )


class RecordEpisode(gym.Wrapper):
    """Record episodes to MP4 with the agent's action probabilities, value trace, entropy and saliency.

    Args:
        env: an env made with ``render_mode="rgb_array"``; wrap outermost, after preprocessing.
        video_folder: where ``{name_prefix}-episode-{k}.mp4`` (and ``.npz`` per-step data) go.
        policy: the agent (:class:`~rlviz.policy.Policy`, e.g. ``TorchPolicy(module)``). It computes the
            panels; the actions may come from it (:func:`run_episode`) or from your own loop.
        episode_trigger: ``f(episode_id) -> bool``; default: every episode.
        fps: playback rate; default the env's ``metadata["render_fps"]``, else 30.
        gamma: discount of the return-to-go drawn beside the value trace.
        saliency: None, "gradient", "smoothgrad" or "perturbation" (computed for the whole episode in batches).
        saliency_target: "action" (chosen action's logit), "logprob", "value" or an action index.
        compose_options: a :class:`rlviz.compose.ComposeOptions`.
        save_data: also write the per-step numbers (actions, rewards, probabilities, values...) as ``.npz``.
        spool_dir: where episode frames and observations are spooled (default: the system temp folder).
        action_names: labels of the action bars (default: ``get_action_meanings()`` on ALE, MinAtar's
            names, else the indices); a loaded checkpoint's ``action_names`` fit here.
    """

    def __init__(
        self,
        env: gym.Env,
        video_folder: str | os.PathLike,
        policy: Policy | None = None,
        *,
        episode_trigger: Callable[[int], bool] | None = None,
        name_prefix: str = "rl-video",
        fps: float | None = None,
        gamma: float = 0.99,
        saliency: str | None = None,
        saliency_target: str | int = "action",
        compose_options=None,
        preset: str = "veryfast",
        crf: int = 23,
        save_data: bool = True,
        spool_dir: str | os.PathLike | None = None,
        action_names=None,
    ):
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise EnvError(
                f"RecordEpisode needs frames, but the env's render_mode is {env.render_mode!r}. "
                "Initialize your environment with render_mode='rgb_array', "
                "e.g. gym.make(env_id, render_mode='rgb_array')."
            )
        check_render_mode(env, "rgb_array")
        if policy is None or not isinstance(policy, Policy):
            raise UsageError(
                f"RecordEpisode needs policy=<rlviz Policy> to draw the agent's internals; received {policy!r}. "
                "Wrap a torch module with rlviz.TorchPolicy(module) or load one with rlviz.load_agent(path)."
            )
        if saliency is not None and saliency not in SALIENCY_METHODS:
            raise UsageError(f"saliency={saliency!r} is not known; use None or one of {SALIENCY_METHODS}.")
        if saliency is not None and not is_plain(env.observation_space):
            raise UsageError(f"saliency={saliency!r} maps array observations, but this env's are {env.observation_space}; "
                             "use saliency=None (CLI: --saliency none) for it.")
        if not 0.0 <= float(gamma) <= 1.0:
            raise UsageError(f"gamma={gamma} is outside [0, 1].")
        if re.search(r"[\\/]", name_prefix):
            raise UsageError(f"name_prefix={name_prefix!r} must be a file name prefix, not a path.")
        num_actions = check_action_space(env.action_space, None)
        if policy.num_actions not in (-1, num_actions):
            raise UsageError(
                f"The policy has {policy.num_actions} actions but the env's action space is Discrete({num_actions})."
            )
        self.policy = policy
        self.video_folder = Path(video_folder)
        self.video_folder.mkdir(parents=True, exist_ok=True)
        self.episode_trigger = episode_trigger or (lambda episode_id: True)
        self.name_prefix = name_prefix
        self.fps = float(fps or env.metadata.get("render_fps") or 30)
        if self.fps <= 0:
            raise UsageError(f"fps={fps}; expected a positive number.")
        self.gamma = float(gamma)
        self.saliency = saliency
        self.saliency_target = saliency_target
        self.compose_options = compose_options
        self.preset, self.crf, self.save_data = preset, int(crf), bool(save_data)
        self.spool_dir = None if spool_dir is None else str(spool_dir)
        if action_names is not None and len(action_names) != num_actions:
            raise UsageError(f"action_names has {len(action_names)} names for Discrete({num_actions}) actions.")
        self.action_names = tuple(str(n) for n in (action_names or action_names_for(env, num_actions)))
        env_spec = getattr(env, "spec", None)
        self.env_id = env_spec.id if env_spec is not None else type(env.unwrapped).__name__
        self.episode_id = -1
        self.last_video_path: Path | None = None
        self.last_internals: EpisodeInternals | None = None  # without saliency maps (they live on disk)
        self.last_result: EpisodeResult | None = None
        self._rec = None  # the episode being recorded: dict of spools and arrays

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._rec is not None:  # the previous episode was cut short by this reset
            self._finish(terminated=False, truncated=False)
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode_id += 1
        self._episode_return, self._episode_len, self._seed = 0.0, 0, seed
        self.last_result = None
        if self.episode_trigger(self.episode_id):
            self._start(obs, info)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_return += float(reward)
        self._episode_len += 1
        if self._rec is not None:
            rec = self._rec
            rec["actions"].append(int(np.asarray(action).reshape(-1)[0]))
            rec["rewards"].append(float(reward))
            rec["lives"].append(int(info.get("lives", -1)))
            rec["frames"].append(to_rgb_frame(self.env.render()))
            rec["obs"].append(obs)
        if terminated or truncated:
            if self._rec is not None:
                self._finish(bool(terminated), bool(truncated))
            else:
                self.last_result = self._result(bool(terminated), bool(truncated), None)
        return obs, reward, terminated, truncated, info

    def close(self):
        try:
            if self._rec is not None:
                self._finish(terminated=False, truncated=False)
        finally:
            super().close()

    # -- public helpers ---------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """True while an episode is being recorded."""
        return self._rec is not None

    def finish_episode(self, truncated: bool = True) -> EpisodeResult | None:
        """The current episode's result, its video written. An episode still running is cut here (marked
        ``truncated`` unless told otherwise) and its video finished; after an episode ended by itself this
        returns that episode's result. None before the first reset."""
        if self._rec is not None:
            self._finish(terminated=False, truncated=bool(truncated))
        elif self.last_result is None and self.episode_id >= 0:
            self.last_result = self._result(False, bool(truncated), None)
        return self.last_result

    # -- recording --------------------------------------------------------------------------------
    def _start(self, obs, info) -> None:
        frame = to_rgb_frame(self.env.render())
        self._rec = {
            "frames": Spool(frame.shape, np.uint8, dir=self.spool_dir, name="frames"),
            "obs": make_spool(obs, dir=self.spool_dir, name="obs"),  # a Dict/Tuple observation kept whole
            "actions": array("q"),
            "rewards": array("d"),
            "lives": array("l", [int(info.get("lives", -1))]),
        }
        self._rec["frames"].append(frame)
        self._rec["obs"].append(obs)

    def _result(self, terminated: bool, truncated: bool, path: Path | None) -> EpisodeResult:
        return EpisodeResult(index=self.episode_id, seed=self._seed, ret=self._episode_return,
                             length=self._episode_len, terminated=terminated, truncated=truncated, video_path=path)

    def _finish(self, terminated: bool, truncated: bool) -> None:
        rec, self._rec = self._rec, None
        try:
            lives = np.asarray(rec["lives"], dtype=np.int32)
            trace = EpisodeTrace(
                frames=rec["frames"].view(),
                observations=rec["obs"].view(),
                actions=np.asarray(rec["actions"], dtype=np.int64),
                rewards=np.asarray(rec["rewards"], dtype=np.float32),
                lives=None if (lives < 0).all() else lives,
                terminated=terminated,
                truncated=truncated,
                action_names=self.action_names,
                episode_id=self.episode_id,
                seed=self._seed,
                fps=self.fps,
                env_id=self.env_id,
            )
            internals = compute_internals(trace, self.policy, self.gamma, self.saliency, self.saliency_target,
                                          self.observation_space)
            path = self.video_folder / f"{self.name_prefix}-episode-{self.episode_id}.mp4"
            self._write(trace, internals, path)
            self.last_video_path = path
            self.last_internals = replace(internals, saliency=None)
            self.last_result = self._result(terminated, truncated, path)
        finally:
            for key in ("frames", "obs"):
                rec[key].close()

    def _write(self, trace: EpisodeTrace, internals: EpisodeInternals, path: Path) -> None:
        from ..draw.compose import ComposeOptions, video_timing, write_episode_video

        options = self.compose_options or ComposeOptions()
        write_episode_video(trace, internals, path, options=options, fps=self.fps, preset=self.preset, crf=self.crf)
        if self.save_data:
            rate, _ = video_timing(trace.num_steps + 1, self.fps, options.min_seconds)
            save_episode_data(trace, internals, path.with_suffix(".npz"), fps=rate)


def save_episode_data(trace: EpisodeTrace, internals: EpisodeInternals, path: Path, fps: float | None = None) -> Path:
    """Per-step numbers of an episode (no frames) as ``.npz``, written under a temporary name first; ``fps`` is
    the rate its video plays at (frame t = step t), default the trace's."""
    data = {
        "actions": trace.actions,
        "rewards": trace.rewards,
        "logits": internals.logits,
        "probs": internals.probs,
        "entropy": internals.entropy,
        "returns_to_go": internals.returns_to_go,
        "gamma": np.float32(internals.gamma),
        "fps": np.float32(fps or trace.fps or 30.0),
        "terminated": np.bool_(trace.terminated),
        "truncated": np.bool_(trace.truncated),
        "action_names": np.asarray(trace.action_names, dtype=str),
        "kind": np.asarray(internals.kind),
    }
    if internals.value is not None:
        data["value"] = internals.value
    if trace.lives is not None:
        data["lives"] = trace.lives
    with atomic_path(path) as tmp:
        np.savez_compressed(tmp, **data)
    return path
