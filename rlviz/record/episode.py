"""``run_episode``: play one episode with a policy on any env (wrapped in :class:`RecordEpisode` or not)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from ..episode.result import EpisodeResult
from ..errors import UsageError
from .wrapper import RecordEpisode

if TYPE_CHECKING:  # torch loads with the policy, not with the recorder
    from ..agent.policy import Policy

__all__ = ["run_episode", "find_recorder"]


def find_recorder(env: gym.Env) -> RecordEpisode | None:
    """The :class:`RecordEpisode` among ``env``'s wrappers, or None."""
    e = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, RecordEpisode):
            return e
        e = e.env
    return None


def run_episode(
    env: gym.Env,
    policy: Policy | None = None,
    *,
    seed: int | None = None,
    greedy: bool = False,
    rng: np.random.Generator | int | None = None,
    max_steps: int | None = None,
) -> EpisodeResult:
    """Play one episode with ``policy`` (default: the RecordEpisode wrapper's) and return how it went.

    Seeding is the rollouts' scheme (:func:`rlviz.replay_episode`): ``seed`` resets the env and seeds the
    action sampling, so ``run_episode(env, seed=s)`` plays what episode seed ``s`` of a rollout plays. ``rng``
    (a Generator, or an int seeding one) samples the actions instead. ``greedy`` takes the argmax.
    ``max_steps`` cuts the episode short (marked truncated). When ``env`` records, the result carries the
    video's path (``result.video_path``).
    """
    recorder = find_recorder(env)
    policy = policy or (recorder.policy if recorder is not None else None)
    if policy is None:
        raise UsageError("run_episode needs a policy: pass policy=..., or wrap env in RecordEpisode(..., policy=...).")
    if rng is not None and not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    from ..evaluate.rollout import replay_episode

    played = replay_episode(None, policy, seed, env=env, greedy=greedy, max_steps=max_steps, rng=rng)
    if recorder is None:
        return played
    recorded = recorder.finish_episode(truncated=played.truncated)
    return played if recorded is None else replace(played, index=recorded.index, video_path=recorded.video_path)
