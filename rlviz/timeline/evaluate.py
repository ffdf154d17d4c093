"""Each checkpoint of a run on the run's N seeds: ``rlviz render``'s rollout, statistics and diagnostics of that file.

A checkpoint's rollout is :func:`rlviz.jobs.render.run_rollouts` with the checkpoint's
:meth:`TimelineConfig.render_config` (the same seeds, the same options), so its row equals ``rlviz render FILE``.
``(checkpoint, episodes)`` is the unit of work for ``--workers`` / ``--ray``: the backend opened once for the whole
run (:func:`rlviz.jobs.shards.open_backend`: its start-up is paid once), each checkpoint's episodes shared out to its
workers, each of which loads the checkpoint once (:class:`rlviz.jobs.shards.AgentSource`); the merge is exact, so
the results equal one process's.

:func:`policy_change` compares two consecutive checkpoints' action distributions on the later one's visited states
(the observations of its first episodes, replayed alone by :func:`rlviz.evaluate.replay_episode`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ..agent import LoadedAgent
from ..errors import RlvizError, UsageError
from ..evaluate import replay_episode, summarize
from ..evaluate.diagnostics import diagnose
from ..evaluate.threads import torch_threads
from ..jobs.render import run_rollouts
from ..jobs.shards import share_agent
from .checkpoints import TimelineCheckpoint

__all__ = ["evaluate_checkpoint", "checkpoint_config", "check_same_run", "visited_states", "policy_change",
           "STATE_LIMIT"]

#: Visited states :func:`policy_change` compares the two policies on (the later checkpoint's first episodes).
STATE_LIMIT = 2048


def checkpoint_config(cp: TimelineCheckpoint, config: Any) -> Any:
    """The RenderConfig ``rlviz render`` would run for this checkpoint (its own VecNormalize statistics unless
    ``--vecnormalize`` names some)."""
    rc = config.render_config(cp.path)
    if rc.vecnormalize is None and cp.vecnormalize is not None:
        rc = replace(rc, vecnormalize=cp.vecnormalize)
    return rc


def check_same_run(reference: TimelineCheckpoint, cp: TimelineCheckpoint, agent: LoadedAgent) -> None:
    """A usage error unless ``agent`` runs on the reference checkpoint's env with the same actions."""
    ref = reference.agent
    if ref is None:
        return
    same_env = ref.recipe.to_json() == agent.recipe.to_json()
    if same_env and tuple(ref.action_names) == tuple(agent.action_names):
        return
    what = (f"env {ref.recipe.env_id!r} vs {agent.recipe.env_id!r}" if ref.recipe.env_id != agent.recipe.env_id
            else f"different settings of {agent.recipe.env_id!r}" if not same_env
            else f"{len(ref.action_names)} vs {len(agent.action_names)} actions")
    raise UsageError(f"RUN mixes checkpoints of different runs: {reference.name} and {cp.name} ({what}); a timeline "
                     "plays every checkpoint on the same seeds of one env: pass the checkpoints of one training run.")


def evaluate_checkpoint(cp: TimelineCheckpoint, config: Any, backend: Any = None,
                        reference: TimelineCheckpoint | None = None) -> TimelineCheckpoint:
    """``cp`` with its agent, rollout and summary (``rlviz render``'s); a checkpoint that fails to load or play comes
    back with ``error`` (one line naming the file) instead. ``reference``: an evaluated checkpoint of the run
    (a different env or action set is a UsageError). ``backend``: None or the run's worker pool."""
    rc = checkpoint_config(cp, config)
    try:
        agent = cp.load(rc)
    except UsageError:
        raise
    except RlvizError as exc:
        return replace(cp, error=f"{cp.name}: {exc}")
    if reference is not None:
        check_same_run(reference, cp, agent)
    gamma = float(config.gamma if config.gamma is not None else agent.gamma)
    if backend is not None:
        share_agent(rc, agent)  # forked workers inherit it
    try:
        with torch_threads(config.threads):
            result = run_rollouts(agent, rc, gamma, backend)
    except UsageError:
        raise
    except RlvizError as exc:
        return replace(cp, agent=agent, error=f"{cp.name}: {exc}")
    summary = summarize(result, diagnose(result, agent.policy.kind)).to_dict()
    return replace(cp, agent=agent, result=result, summary=summary, error=None)


class _Visited(gym.Wrapper):
    """Keeps the observations an episode's policy acts on (reset and each step's, but the last)."""

    def __init__(self, env: gym.Env, limit: int):
        super().__init__(env)
        self.seen: list = []
        self.limit = limit

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._keep(obs)
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, term, trunc, info = self.env.step(action)
        if not (term or trunc):
            self._keep(obs)
        return obs, reward, term, trunc, info

    def _keep(self, obs: Any) -> None:
        if len(self.seen) < self.limit:
            self.seen.append(np.array(obs, copy=True))


def visited_states(cp: TimelineCheckpoint, config: Any, limit: int = STATE_LIMIT) -> np.ndarray | None:
    """float/uint8 ``[n <= limit, *obs_shape]``: the observations ``cp``'s policy acted on in the run's first
    episodes (replayed on their seeds), or None when they are not plain arrays (dict/tuple observations) or the
    policy carries state between steps (its distribution depends on more than the state)."""
    from ..envs import make_env

    agent, result = cp.agent, cp.result
    if agent is None or result is None or getattr(agent.policy, "stateful", False):
        return None
    gamma = float(config.gamma if config.gamma is not None else agent.gamma)
    env = _Visited(make_env(agent.recipe, render_mode="rgb_array"), limit)
    try:
        for record in result.episodes:
            if len(env.seen) >= limit:
                break
            with torch_threads(config.threads):
                replay_episode(agent.recipe, agent.policy, record, env=env, fail_on=config.fail_on, gamma=gamma)
    finally:
        env.close()
    if not env.seen or any(np.asarray(s).dtype == object for s in env.seen[:1]):
        return None
    return np.stack(env.seen)


def _tv_kl_categorical(p: np.ndarray, q: np.ndarray, nvec: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """Per state: total variation and KL(p || q) of (products of) categoricals; [B] each."""
    bounds = np.cumsum((0,) + (tuple(nvec) if nvec else (p.shape[1],)))
    tv, kl = np.zeros(p.shape[0]), np.zeros(p.shape[0])
    for a, b in zip(bounds[:-1], bounds[1:]):
        pa, qa = p[:, a:b], q[:, a:b]
        tv += 0.5 * np.abs(pa - qa).sum(axis=1)
        kl += np.where(pa > 0, pa * (np.log(np.clip(pa, 1e-12, None)) - np.log(np.clip(qa, 1e-12, None))), 0).sum(1)
    return tv / (len(bounds) - 1), kl


def _tv_kl_gaussian(m1: np.ndarray, s1: np.ndarray, m0: np.ndarray, s0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per state: KL(N(m1, s1) || N(m0, s0)) summed over dimensions, and the total variation bound
    ``min(1, sqrt(KL / 2))`` (Pinsker; exact TV has no closed form in several dimensions)."""
    s1, s0 = np.maximum(s1, 1e-12), np.maximum(s0, 1e-12)
    kl = (np.log(s0 / s1) + (s1 ** 2 + (m1 - m0) ** 2) / (2 * s0 ** 2) - 0.5).sum(axis=1)
    return np.minimum(1.0, np.sqrt(np.maximum(kl, 0) / 2)), kl


def policy_change(earlier: LoadedAgent, later: LoadedAgent, states: np.ndarray | None) -> dict | None:
    """How the policy changed from ``earlier`` to ``later`` on ``states`` (the later checkpoint's visited states):
    ``{"states", "tv_mean", "kl_mean", "kl_direction": "later||earlier", "distribution"}``; TV is the mean
    total-variation distance (0: the same actions, 1: disjoint); KL is in nats (Gaussian KL for Box actions; TV
    then its Pinsker bound). None without states."""
    if states is None or len(states) == 0:
        return None
    with torch_threads(1):
        new, old = later.policy.evaluate(states), earlier.policy.evaluate(states)
    dist = new.dist
    if new.mean is not None and old.mean is not None and new.std is not None and old.std is not None:
        tv, kl = _tv_kl_gaussian(new.mean, new.std, old.mean, old.std)
    elif new.mean is not None and old.mean is not None:  # deterministic actors: the mean distance of the actions
        return {"states": int(len(states)), "tv_mean": None, "kl_mean": None, "distribution": dist,
                "action_distance_mean": float(np.linalg.norm(new.mean - old.mean, axis=1).mean())}
    else:
        tv, kl = _tv_kl_categorical(new.probs.astype(np.float64), old.probs.astype(np.float64), new.nvec)
    finite = np.isfinite(tv) & np.isfinite(kl)
    if not finite.any():
        warnings.warn("policy_change: the action distributions are not finite on any visited state.", stacklevel=2)
        return None
    return {"states": int(finite.sum()), "tv_mean": float(tv[finite].mean()), "kl_mean": float(kl[finite].mean()),
            "kl_direction": "later||earlier", "distribution": dist}
