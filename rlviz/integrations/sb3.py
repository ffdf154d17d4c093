"""Stable-Baselines3 callback: every N timesteps, record one evaluation episode with its panels and log it.

::

    from rlviz.integrations.sb3 import RlvizCallback

    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log="runs")
    model.learn(100_000, callback=RlvizCallback("CartPole-v1", every_steps=10_000))

With no ``sinks`` the videos go to the TensorBoard run SB3 itself writes (``tensorboard_log``), as
animated GIFs in the Images dashboard at the same step as SB3's scalars; pass ``video_folder`` to
keep the MP4s as well. With ``timeline="runs/timeline"`` it also writes a timeline (``rlviz timeline``'s files:
every ``every_steps``, ``TimelineConfig.episodes`` episodes on the same seeds, :class:`rlviz.training.live.TimelineWriter`)
and logs each checkpoint's numbers to the sinks at the training step. Needs ``pip install "rlviz[sb3]"``.

:class:`VecRecordEpisode` (:mod:`rlviz.integrations.sb3_video`) replaces SB3's ``VecVideoRecorder``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from ..agent.policy import Policy
from ..config import TimelineConfig
from ..envs.recipe import EnvRecipe
from ..errors import UsageError, require
from ..sinks.base import Sink, as_sinks
from ..sources.stable_baselines3.zips import sb3_policy
from .loop import LogOptions, check_log_options, log_episode
from .package_hub import package_to_hub
from .sb3_video import VecRecordEpisode

if TYPE_CHECKING:
    from ..training.live import TimelineWriter

_callbacks = require("stable_baselines3.common.callbacks", "sb3", "the Stable-Baselines3 callback")

__all__ = ["RlvizCallback", "VecRecordEpisode", "package_to_hub"]


class RlvizCallback(_callbacks.BaseCallback):  # type: ignore[name-defined]
    """Every ``every_steps`` timesteps, play one evaluation episode, record it with panels, log it.

    Args:
        eval_env: an env id, an :class:`~rlviz.envs.EnvRecipe`, or a gymnasium env made with
            ``render_mode="rgb_array"`` whose observations match what the model was trained on.
        every_steps: log when ``model.num_timesteps`` crosses each multiple of this.
        sinks: a sink or list of sinks. None: a :class:`~rlviz.sinks.TensorBoardSink` on SB3's own
            TensorBoard writer when the model has ``tensorboard_log``; otherwise ``video_folder`` must be set.
        video_folder: keep the MP4s (``<name>-step<step>-episode-0.mp4``) here.
        seed: reset seed of every evaluation episode (the same start each time, so videos compare);
            also seeds the action sampling. None: a fresh episode each time.
        policy: an rlviz Policy to use instead of the model's own network.
        options: a :class:`~rlviz.integrations.loop.LogOptions`: ``greedy`` (argmax actions, SB3's
            ``deterministic=True``), ``name``, ``max_steps``, ``fps``, the recorder's ``record=RecordOptions(...)``
            (``saliency``...), as :func:`~rlviz.integrations.loop.log_episode` takes them; ``verbose`` (SB3's).
        timeline: a folder to write a timeline into (see the module docstring), or a
            :class:`~rlviz.config.TimelineConfig` whose ``run`` is that folder (``episodes`` per checkpoint, default
            10, and the other options of ``rlviz timeline``; ``greedy`` also when ``options.greedy``); then the
            episode video is logged only when there are sinks or a ``video_folder``.
    """

    def __init__(
        self,
        eval_env: gym.Env | EnvRecipe | str,
        every_steps: int,
        sinks: Sink | list[Sink] | None = None,
        *,
        video_folder: str | os.PathLike | None = None,
        seed: int | None = 0,
        policy: Policy | None = None,
        options: LogOptions | None = None,
        timeline: str | os.PathLike | TimelineConfig | None = None,  # type: ignore[valid-type]
    ):
        options = check_log_options(options, "RlvizCallback")
        if timeline is not None and not isinstance(timeline, TimelineConfig):
            timeline = TimelineConfig(run=os.fspath(timeline))
        super().__init__(options.verbose)
        if isinstance(every_steps, bool) or not isinstance(every_steps, (int, np.integer)) or every_steps < 1:
            raise UsageError(f"every_steps={every_steps!r}; expected a positive number of timesteps.")
        if not isinstance(eval_env, (gym.Env, EnvRecipe, str)):
            raise UsageError(
                f"eval_env={eval_env!r}; expected an env id, an rlviz EnvRecipe or a gymnasium env "
                "(not a VecEnv: rlviz records one episode on one env)."
            )
        self.eval_env = eval_env
        self.every_steps = int(every_steps)
        self.sinks = as_sinks(sinks)
        self.video_folder = video_folder
        self.options, self.seed = options, seed
        self._policy = policy
        self._owned_sinks: list[Sink] = []
        self._next_step = self.every_steps
        #: (step, EpisodeResult) of every logged episode.
        self.results: list = []
        #: the timeline's options (``timeline=``), its folder ``timeline.run``
        self.timeline: Any = timeline
        #: the TimelineWriter (with ``timeline=``), made when training starts
        self.timeline_writer: TimelineWriter | None = None

    def _init_callback(self) -> None:
        if not self.sinks:
            from stable_baselines3.common.logger import TensorBoardOutputFormat

            writers = [f.writer for f in self.logger.output_formats if isinstance(f, TensorBoardOutputFormat)]
            if writers:
                from ..sinks.tensorboard_sink import TensorBoardSink

                self._owned_sinks = [TensorBoardSink(writer=writers[0])]
            elif self.video_folder is None and self.timeline is None:
                raise UsageError(
                    "RlvizCallback has nowhere to log: pass sinks=[...], video_folder=..., or create the model "
                    "with tensorboard_log=<folder> so the videos go to SB3's TensorBoard run."
                )
        if self._policy is None:
            was_training = self.model.policy.training
            # shares the model's weights (no copy); stays on the model's device. A Dict space's image keys come from
            # the evaluation env as it gives them (channels last where SB3 trained them transposed): the policy takes
            # them so (rlviz.sources.stable_baselines3.dict_obs)
            space = self._eval_space() if isinstance(self.model.policy.observation_space, gym.spaces.Dict) else None
            self._policy = sb3_policy(self.model, device=self.model.device,
                                      observation_space=space if isinstance(space, gym.spaces.Dict) else None)
            self.model.policy.set_training_mode(was_training)
        self._next_step = (self.num_timesteps // self.every_steps + 1) * self.every_steps
        if self.timeline is not None and self.timeline_writer is None:
            from ..training.live import TimelineWriter

            if isinstance(self.eval_env, gym.Env):
                raise UsageError(
                    f"RlvizCallback(timeline=...): eval_env is a gymnasium env ({self.eval_env}); the timeline plays "
                    "its fixed seeds on envs it builds itself, so pass the env id or an rlviz EnvRecipe instead.")
            config = replace(self.timeline, greedy=self.timeline.greedy or self.options.greedy)
            self.timeline_writer = TimelineWriter(config.run, self.eval_env, sinks=self.sinks + self._owned_sinks,
                                                  overwrite=True, config=config)

    def _eval_space(self) -> Any:
        """The evaluation env's observation space (an env made from an id or recipe once, to read it)."""
        if isinstance(self.eval_env, gym.Env):
            return self.eval_env.observation_space
        from ..envs.recipe import make_env

        env = make_env(self.eval_env, render_mode=None)
        try:
            return env.observation_space
        finally:
            env.close()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next_step:
            self._next_step = (self.num_timesteps // self.every_steps + 1) * self.every_steps
            self.log_now()
        return True

    def log_now(self) -> None:
        """Record and log one episode at the current ``num_timesteps`` (and add a timeline checkpoint)."""
        step = int(self.num_timesteps)
        if self.timeline_writer is not None and self._policy is not None:  # both set when training starts
            gamma = float(getattr(self.model, "gamma", 0.99))
            row = self.timeline_writer.add(self._policy, step, gamma=gamma)
            if self.verbose:
                print(f"rlviz: step {step}: timeline return {row['return']['mean']:.6g}")
            if not (self.sinks or self._owned_sinks or self.video_folder):
                return
        sb3_pol = self.model.policy
        was_training = sb3_pol.training
        sb3_pol.set_training_mode(False)
        try:
            result = log_episode(
                self.eval_env,
                self._policy,  # type: ignore[arg-type]  # set when training starts
                self.sinks + self._owned_sinks,
                step,
                seed=self.seed,
                video_folder=self.video_folder,
                options=self.options if self.options.rng is not None else replace(self.options, rng=self.seed),
            )
        finally:
            sb3_pol.set_training_mode(was_training)
        for sink in self.sinks + self._owned_sinks:
            sink.flush()
        self.results.append((step, result))
        if self.verbose:
            print(f"rlviz: step {step}: return {result.episode_return:.6g} in {result.length} steps")

    def _on_training_end(self) -> None:
        if self.timeline_writer is not None:
            self.timeline_writer.close()
        for sink in self._owned_sinks:
            sink.close()
        self._owned_sinks = []
