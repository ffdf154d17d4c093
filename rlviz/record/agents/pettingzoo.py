"""PettingZoo recorders: drop-ins for ``pettingzoo.utils.wrappers.RecordVideoParallel`` (:class:`RecordParallelEpisode`)
and ``RecordVideo`` (AEC: :class:`RecordAECEpisode`), plus every agent's internals.

Without policies or annotations they are PettingZoo's wrappers: the same arguments and defaults, triggers
(``episode_trigger``, ``step_trigger``, ``video_length``, gymnasium's capped cubic schedule by default), file names
(``{name_prefix}-episode-{k}.mp4``, ``{name_prefix}-step-{k}.mp4``), attributes (``recording``, ``episode_id``,
``step_id``, ``frames_per_sec``, ``video_folder``), ``start_recording`` / ``stop_recording`` and frames per video
(the reset's and one per ``step``: in an AEC env one per agent move). Frames stream to H.264 through rlviz's own
encoder (no moviepy, nothing held in memory) on a thread of the recorder's own (``RecordOptions.background``).

With internals, each recorded episode is one video of the shared frame beside one panel column per agent
(:mod:`rlviz.draw.panels_agents`) and a ``.npz`` of per-agent arrays (:mod:`rlviz.record.agents.video`). The
numbers come from ``policies=`` (one policy shared by every agent, or ``{agent: policy}``; evaluated in one batch
per agent when the episode ends) and/or the loop's ``annotate`` calls before each step, which win where both exist:

* parallel: ``env.annotate(logits={agent: ...}, value={agent: ...})`` (or one array whose rows follow
  ``env.agents``), or ``env.annotate(agent, logits=..., value=...)`` per agent;
* AEC: ``env.annotate(logits=..., value=...)`` for ``env.agent_selection`` (or name the agent first);
* a recurrent loop's state, with the numbers: ``annotate(..., state=h)`` per agent (``[H]``, or an LSTM's
  ``(h, c)``), or in a parallel env every agent's at once (each part ``[agents, H]`` or ``nn.LSTM``'s
  ``[layers, agents, H]``, rows following ``env.agents``; or ``{agent: state}``): drawn as each agent's memory plot
  (``|h|``, ``|h - h_prev|``) and kept in the ``.npz`` as the single-agent recorders keep it (docs/memory.md).

An episode is recorded with panels when ``annotate`` came before its first step (or policies were given); a
video begun by ``step_trigger`` records frames only, as PettingZoo's.

Importing this module needs PettingZoo (``pip install "rlviz[pettingzoo]"``); torch loads only with a policy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import UsageError, require

require("pettingzoo", "pettingzoo", "recording PettingZoo envs")

from pettingzoo.utils.env import AECEnv, ParallelEnv  # noqa: E402
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper  # noqa: E402

from ..episode_video import RecordOptions  # noqa: E402
from .recording import AgentsRecording, action_mask  # noqa: E402
from .video import AgentsOptions  # noqa: E402

__all__ = ["RecordParallelEpisode", "RecordAECEpisode", "AgentsOptions"]


class RecordParallelEpisode(AgentsRecording, BaseParallelWrapper):  # type: ignore[misc]  # (PettingZoo is untyped)
    """PettingZoo's ``RecordVideoParallel`` (same arguments), plus ``policies`` and ``options`` (an
    :class:`~rlviz.record.agents.video.AgentsOptions` or a :class:`~rlviz.record.RecordOptions`). See the module
    docstring; ``annotate`` before ``step`` gives the loop's own numbers."""

    def __init__(self, env: ParallelEnv, video_folder: str | os.PathLike[str],
                 episode_trigger: Callable[[int], bool] | None = None,
                 step_trigger: Callable[[int], bool] | None = None, video_length: int = 0, name_prefix: str = "rl-video",
                 fps: float | None = None, disable_logger: bool = True,
                 gc_trigger: Callable[[int], bool] | None = lambda episode: True, *, policies: Any = None,
                 options: AgentsOptions | RecordOptions | None = None) -> None:
        if not isinstance(env, ParallelEnv):
            raise UsageError(f"RecordParallelEpisode wraps a PettingZoo ParallelEnv; received {type(env).__name__}. "
                             "For an AEC env (env()) use RecordAECEpisode.")
        BaseParallelWrapper.__init__(self, env)
        self.disable_logger, self.gc_trigger = disable_logger, gc_trigger
        self._setup(env, video_folder, (episode_trigger, step_trigger), video_length, (name_prefix, fps), policies,
                    options)
        self._obs: dict[str, Any] = {}
        self._infos: dict[str, Any] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if self._video is not None and self._video.panels:  # the previous episode was cut by this reset
            self._end(False, False)
        obs, infos = self.env.reset(seed=seed, options=options)
        self.episode_id += 1
        self._seed = seed
        self._obs, self._infos = obs, infos
        self._start_episode(self.env)
        return obs, infos

    def step(self, actions: dict[str, Any]) -> Any:
        video = self._video
        if video is not None and video.settle():
            for a, action in actions.items():
                obs = self._obs.get(a)
                video.decide(a, action, obs, action_mask(obs, self._infos.get(a)))
        before = list(self.env.agents)
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        self._after_step(self.env, rewards, before, lambda left: {a: obs.get(a) for a in left})
        self._obs, self._infos = obs, infos
        if self._video is not None and self._video.panels and not self.env.agents:
            self._end(any(terminations.values()), any(truncations.values()) and not any(terminations.values()))
        return obs, rewards, terminations, truncations, infos

    def render(self) -> Any:
        return self._render(self.env)

    def close(self) -> None:
        try:
            self.finish_videos()
        finally:
            self.mark_closed()
            self.env.close()

    def annotate(self, agent: str | None = None, logits: Any = None, value: Any = None, **extra: Any) -> None:
        """The loop's numbers for the coming ``step``: per agent (``annotate(agent, logits=..., value=...)``) or for
        all at once: each field a dict ``{agent: numbers}`` or an array whose rows follow ``env.agents``. A no-op
        when this episode is not recorded."""
        fields = dict(extra, logits=logits, value=value)
        if agent is not None:
            self._annotate(agent, fields)
            return
        if self._video is None:
            return
        per_agent = _per_agent(fields, list(self.env.agents))
        for a, f in per_agent.items():
            if f:
                self._annotate(a, f)

    def __del__(self) -> None:
        self._del()


class RecordAECEpisode(AgentsRecording, BaseWrapper):  # type: ignore[misc]  # (PettingZoo is untyped)
    """PettingZoo's ``RecordVideo`` for AEC envs (same arguments), plus ``policies`` and ``options`` (see the module
    docstring). One frame per ``step`` (an agent's move); ``annotate`` before ``step`` gives the moving agent's
    numbers."""

    def __init__(self, env: AECEnv, video_folder: str | os.PathLike[str],
                 episode_trigger: Callable[[int], bool] | None = None,
                 step_trigger: Callable[[int], bool] | None = None, video_length: int = 0, name_prefix: str = "rl-video",
                 fps: float | None = None, disable_logger: bool = True,
                 gc_trigger: Callable[[int], bool] | None = lambda episode: True, *, policies: Any = None,
                 options: AgentsOptions | RecordOptions | None = None) -> None:
        if not isinstance(env, AECEnv):
            raise UsageError(f"RecordAECEpisode wraps a PettingZoo AECEnv; received {type(env).__name__}. For a "
                             "parallel env (parallel_env()) use RecordParallelEpisode.")
        BaseWrapper.__init__(self, env)
        self.disable_logger, self.gc_trigger = disable_logger, gc_trigger
        self._setup(env, video_folder, (episode_trigger, step_trigger), video_length, (name_prefix, fps), policies,
                    options)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if self._video is not None and self._video.panels:
            self._end(False, False)
        self.env.reset(seed=seed, options=options)
        self.episode_id += 1
        self._seed = seed
        self._start_episode(self.env)

    def step(self, action: Any) -> None:
        env = self.env
        agent = env.agent_selection
        video = self._video
        dead = bool(env.terminations.get(agent) or env.truncations.get(agent))
        if video is not None and not dead and video.settle():
            obs = env.observe(agent)
            video.decide(agent, action, obs, action_mask(obs, env.infos.get(agent)))
        before = list(env.agents)
        env.step(action)
        rewards = {a: float(r) for a, r in getattr(env, "rewards", {}).items()}
        self._after_step(env, rewards, before, lambda left: {})
        if self._video is not None and self._video.panels and not env.agents:
            term = any(getattr(env, "terminations", {}).values())
            self._end(term, not term)

    def render(self) -> Any:
        return self._render(self.env)

    def close(self) -> None:
        try:
            self.finish_videos()
        finally:
            self.mark_closed()
            self.env.close()

    def annotate(self, agent: str | None = None, logits: Any = None, value: Any = None, **extra: Any) -> None:
        """The numbers of ``agent`` (default: ``env.agent_selection``, the one about to move) for its coming
        ``step``; a no-op when this episode is not recorded."""
        if self._video is None:
            return
        self._annotate(agent if agent is not None else self.env.agent_selection,
                       dict(extra, logits=logits, value=value))

    def __del__(self) -> None:
        self._del()


def _rows(v: Any) -> list[Any]:
    from ..arrays import as_numpy

    arr = as_numpy(v, np.float32)
    return list(arr.reshape(arr.shape[0], -1)) if arr.ndim >= 1 else [arr]


def _per_agent(fields: dict[str, Any], agents: list[str]) -> dict[str, dict[str, Any]]:
    """``annotate``'s fields for all agents at once, split per agent: a dict ``{agent: numbers}``, rows following
    ``agents``, or (``state``) every agent's recurrent state (each part ``[agents, H]`` or ``[layers, agents, H]``)."""
    per_agent: dict[str, dict[str, Any]] = {a: {} for a in agents}
    for key, v in fields.items():
        if v is None:
            continue
        if isinstance(v, dict):
            for a, x in v.items():
                if a not in per_agent:
                    raise UsageError(f"annotate({key}=...) names agent {a!r}, which is not playing; env.agents "
                                     f"is {agents}.")
                per_agent[a][key] = x
            continue
        if key == "state":
            from ..annotated_state import env_state_rows

            rows: list[Any] = env_state_rows(v, list(range(len(agents))), len(agents))
        else:
            rows = _rows(v)
        if len(rows) != len(agents):
            raise UsageError(f"annotate({key}=...) received {len(rows)} rows; expected one per agent of "
                             f"env.agents ({len(agents)}), or a dict {{agent: numbers}}.")
        for a, x in zip(agents, rows):
            per_agent[a][key] = x
    return per_agent
