"""``run_episode``: play one episode with a policy on any env (wrapped in :class:`RecordEpisode` or not);
``play_actions``: replay a rollout's episode from the actions it took (no policy: the env alone decides the
frames; a recorder's internals then cost one batched pass of the policy over the episode)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from ..envs.ale_seed import seeded_reset
from ..episode.result import EpisodeResult
from ..errors import UsageError
from .record_episode import RecordEpisode

if TYPE_CHECKING:  # torch loads with the policy, not with the recorder
    from ..agent.policy import Policy

__all__ = ["run_episode", "find_recorder", "play_actions"]


def find_recorder(env: gym.Env[Any, Any]) -> RecordEpisode | None:
    """The :class:`RecordEpisode` among ``env``'s wrappers, or None."""
    e = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, RecordEpisode):
            return e
        e = e.env
    return None


def run_episode(
    env: gym.Env[Any, Any],
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
    from ..evaluate.rollouts.rollout import RolloutPlan, replay_episode

    played = replay_episode(None, policy, seed, RolloutPlan(1, greedy=greedy, max_steps=max_steps), env=env, rng=rng)
    if recorder is None:
        return played
    recorded = recorder.finish_episode(truncated=played.truncated)
    return played if recorded is None else replace(played, index=recorded.index, video_path=recorded.video_path)


def play_actions(
    env: gym.Env[Any, Any],
    record: EpisodeResult,
    annotations: Sequence[Mapping[str, float]] | None = None,
) -> EpisodeResult:
    """Replay ``record`` (an episode of :func:`rlviz.rollout`, which keeps its ``actions``) on ``env``: the
    rollouts' seeded reset, then the stored actions, one env step each; no policy runs. When ``env`` records
    (:class:`RecordEpisode`), ``annotations[t]`` (``{name: number}``) annotates step ``t`` before it is taken, and
    the video is written when the episode ends (an episode the rollout cut short, ``max_steps``, is cut here too, as truncated).
    Returns ``record`` with the video's path, and with ``ret`` the return this replay received (the rollout's
    when the env is deterministic under its seed)."""
    if record.actions is None:
        raise UsageError(f"play_actions needs the episode's actions; episode {record.index} carries none (replay it "
                         "with run_episode and its policy instead).")
    recorder = find_recorder(env)
    if record.seed is not None:
        seeded_reset(env, record.seed)
    else:
        env.reset()
    ret = 0.0
    for t, action in enumerate(record.actions):
        if recorder is not None and annotations is not None and t < len(annotations):
            recorder.annotate(**annotations[t])
        _, reward, terminated, truncated, _ = env.step(action.item() if np.ndim(action) == 0 else action)
        ret += float(reward)
        if terminated or truncated:
            break
    recorded = None if recorder is None else recorder.finish_episode(truncated=True)
    video = None if recorded is None else recorded.video_path
    return replace(record, ret=ret, video_path=video)
