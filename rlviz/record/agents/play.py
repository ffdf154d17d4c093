"""``play_agents``: one episode of a PettingZoo parallel env played by rlviz policies (one shared by every agent, as
CleanRL's and SB3's PettingZoo tutorials train them, or one per agent), with each agent's statistics; on an env
wrapped in :class:`~rlviz.record.agents.pettingzoo.RecordParallelEpisode` the episode is recorded with its panels.

Actions are rlviz's (:func:`rlviz.agent.actions.sample_actions`, one batched forward per policy and step over the
agents playing, in ``env.agents`` order); ``seed`` resets the env and seeds the sampling, so an episode depends only
on (policies, env, seed, greedy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...envs.pettingzoo_envs import split_observation
from ...errors import UsageError

__all__ = ["AgentsEpisodeResult", "play_agents"]


@dataclass(frozen=True)
class AgentsEpisodeResult:
    """How one multi-agent episode went: per agent its ``returns``, ``lengths`` (its steps), whether it
    ``terminated`` or was ``truncated`` (both False: the episode was cut by ``max_steps``); the episode's ``steps``,
    ``seed`` and recorded ``video_path`` (None when not recorded)."""

    seed: int | None
    steps: int
    returns: dict[str, float] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    terminated: dict[str, bool] = field(default_factory=dict)
    truncated: dict[str, bool] = field(default_factory=dict)
    video_path: Path | None = None


def play_agents(env: Any, policies: Any = None, *, seed: int | None = None, greedy: bool = False,
                max_steps: int | None = None) -> AgentsEpisodeResult:
    """Play one episode of the PettingZoo parallel ``env`` with ``policies`` (one for all agents, or
    ``{agent: policy}``; default: the recorder's when ``env`` is a RecordParallelEpisode given ``policies=``)."""
    from ...agent.actions import sample_actions, to_env_action
    from .pettingzoo import RecordParallelEpisode
    from .recording import agent_specs

    recorder = env if isinstance(env, RecordParallelEpisode) else None
    specs = recorder.specs if recorder is not None and policies is None else agent_specs(env, policies)
    missing = [a for a, s in specs.items() if s.policy is None]
    if missing:
        raise UsageError(f"play_agents needs a policy for every agent; {missing} have none: pass policies=... (one "
                         "shared, or {agent: policy}).")
    rng = np.random.default_rng(seed)
    before = recorder.last_video_path if recorder is not None else None
    obs, infos = env.reset(seed=seed)
    returns = {a: 0.0 for a in specs}
    lengths = {a: 0 for a in specs}
    term = {a: False for a in specs}
    trunc = {a: False for a in specs}
    steps = 0
    while env.agents and (max_steps is None or steps < int(max_steps)):
        groups: dict[int, list[str]] = {}
        for a in env.agents:
            groups.setdefault(id(specs[a].policy), []).append(a)
        actions: dict[str, Any] = {}
        for agents in groups.values():
            policy = specs[agents[0]].policy
            out = policy.evaluate(np.stack([np.asarray(split_observation(obs[a])[0]) for a in agents]))
            for a, act in zip(agents, sample_actions(out, rng, greedy)):
                actions[a] = to_env_action(act, specs[a].spec)
        obs, rewards, terminations, truncations, infos = env.step(actions)
        steps += 1
        for a in actions:
            returns[a] += float(rewards.get(a, 0.0))
            lengths[a] += 1
            term[a] = bool(terminations.get(a, False))
            trunc[a] = bool(truncations.get(a, False))
    video = None
    if recorder is not None:
        if recorder.recording:
            recorder.finish_videos()  # (an episode cut by max_steps, or a frames-only video: it ends here)
        after = recorder.last_video_path
        video = after if after != before else None
    return AgentsEpisodeResult(seed, steps, returns, lengths, term, trunc, video)
