"""The per-env stepper of the rollouts and of single-episode replays: :class:`Runner` starts an episode on an
env (seeded reset, the policy's fresh state), steps it with the action the lockstep loop decided (return, length,
failures, lives, heatmap captures) and turns the finished episode into an :class:`~rlviz.episode.EpisodeResult`.
:class:`EpisodeState` is one env's running episode."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from ...agent.actions import check_policy_actions
from ...agent.capabilities import capabilities_of, has_memory
from ...agent.obs import ObsAdapter
from ...agent.stepping import policy_step, start_state
from ...choices import FAIL_ON
from ...envs.ale_seed import seeded_reset
from ...envs.frames import to_rgb_frame
from ...episode.result import EpisodeResult
from ...episode.trace import returns_to_go
from ...errors import UsageError
from ..failures.objects import last_seen
from ..failures.pixel_heatmap import FailureReplay
from ..statistics.diagnostics import EpisodeDiagnostics
from .memory_sample import MEMORY_EPISODES, MemorySample
from .plan import RolloutPlan

if TYPE_CHECKING:
    from ...agent.policy import Policy
    from ...attention.tracker import AttentionTracker
    from ..failures.heatmap import FailureHeatmap
    from ..failures.objects import Extractor

__all__ = ["Runner", "EpisodeState", "value_sums", "value_moments", "resolve_fail_on", "lives_of"]


class EpisodeState:
    """Per-sub-env state of the running episode."""

    def __init__(self, index: int, seed: int | None, lives: int | None, num_actions: int = 1):
        self.index, self.seed, self.lives = index, seed, lives
        self.diag = EpisodeDiagnostics(num_actions)
        self.rng = np.random.default_rng(seed)
        self.ret, self.length, self.failures, self.ent_sum = 0.0, 0, 0, 0.0
        self.actions: list = []  # the actions taken, in parts (StepLog.fold): the episode replays from them
        self.rewards: list = []  # with a value head: the episode's rewards and values, in parts (StepLog.fold)
        self.values: list = []
        self.recent: deque = deque()  # the last few captures, newest last
        self.log: Any = None  # with a FailureReplay: env snapshots and actions for the heatmap (EpisodeLog)
        self.obs: Any = None  # the observation the next action is chosen on (as the policy sees it)
        self.is_success: bool | None = None
        self.state = None  # a stateful policy's state row for this env (fresh at each episode start)
        self.attention: Any = None  # with attention on: the episode's EpisodeAttention (rlviz.attention.tracker)
        self.memory: MemorySample | None = None  # a recurrent policy's: steps kept for the memory diagnostics


def value_sums(rewards, values, gamma: float) -> tuple:
    r = np.asarray(rewards, dtype=np.float64)
    return value_moments(len(r), values, returns_to_go(r, gamma, dtype=np.float64)[:-1])


def value_moments(steps: int, values, g, finite: bool = False) -> tuple:
    """``EpisodeResult.value_sums`` of an episode of ``steps`` steps: its values [steps] against the discounted
    returns-to-go ``g`` float64 [steps] (non-finite pairs skipped: the diagnostics count them; ``finite``: the
    caller checked that there are none)."""
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    if not finite:
        ok = np.isfinite(v) & np.isfinite(g)
        v, g = v[ok], g[ok]
    return (float(steps), float(v.sum()), float(g.sum()), float(v @ v), float(g @ g), float(v @ g))


def resolve_fail_on(fail_on: str, lives: int | None) -> str:
    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on={fail_on!r}; expected one of {', '.join(map(repr, FAIL_ON))}.")
    if fail_on == "auto":
        return "life-loss" if lives else "termination"
    if fail_on == "life-loss" and lives is None:
        raise UsageError("fail_on='life-loss' but the env reports no info['lives']; use 'termination'.")
    return fail_on


def lives_of(info) -> int | None:
    v = info.get("lives") if isinstance(info, dict) else None
    return None if v is None else int(np.asarray(v))


class Runner:
    """Steps one env per slot, shared by rollout() and replay_episode(): ``plan`` gives greedy, fail_on, gamma,
    max_steps and lookback. extractor / heatmap: the failure heatmap's (None: no heatmap); clip_values: the env
    clips its rewards (the diagnostics know); replay: a :class:`FailureReplay` (frames rendered only for failures,
    by replaying the episode afterwards); attention: an :class:`~rlviz.attention.tracker.AttentionTracker` when
    attention is on; probe: a per-step probe of the lockstep loop, ``observe(obs [rows_used, *obs], rows [B], out,
    slots, envs)`` after each decision (``obs`` the policy's whole padded input, ``out`` its PolicyOutput for
    ``rows``), ``end(slot, episode_state)`` when an episode ends (rlviz.disagree.probe.DisagreementProbe); None:
    nothing is called."""

    def __init__(self, policy: Policy, plan: RolloutPlan, *, extractor: Extractor | None = None,
                 heatmap: FailureHeatmap | None = None, clip_values: bool = False, replay: FailureReplay | None = None,
                 attention: AttentionTracker | None = None, probe: Any = None) -> None:
        self.policy, self.greedy, self.fail_on_arg = policy, bool(plan.greedy), plan.fail_on
        self.lookback = max(1, int(plan.lookback))
        self.extractor, self.heatmap, self.gamma = extractor, heatmap, float(plan.gamma)
        self.clip_values, self.max_steps = clip_values, plan.max_steps
        self.replay: Any = replay
        self.fail_on: str | None = None
        self.obs: Any = None  # ObsAdapter: env observations -> the policy's input
        self.spec: Any = None  # the env's ActionSpec, read on the first start()
        self.attention: Any = attention
        self.probe: Any = probe
        self.memory = has_memory(policy)  # recurrent with the 0.5 contract: each episode keeps a MemorySample

    def start(self, env, index: int, seed: int | None):
        if self.spec is None:
            self.spec = check_policy_actions(self.policy, env.action_space)
        obs, info = seeded_reset(env, seed) if seed is not None else env.reset()
        if self.obs is None:
            self.obs = ObsAdapter(env.observation_space, capabilities_of(self.policy).obs_format)
        obs = self.obs.single(obs)
        # (a Discrete env's action count from its space: a TorchPolicy built without num_actions reads it from its
        # first forward, after the first episodes started, and their action counts must have the same size)
        n = self.spec.size if self.spec.kind == "discrete" else self.policy.num_actions
        ep = EpisodeState(index, seed, lives_of(info), n)
        ep.state = start_state(self.policy)
        if self.memory and index < MEMORY_EPISODES:
            ep.memory = MemorySample()
        if self.fail_on is None:
            self.fail_on = resolve_fail_on(self.fail_on_arg, ep.lives)
        if self.replay is not None:
            ep.log, ep.obs = self.replay.begin(seed, index), obs
        elif self.extractor is not None:
            self.extractor.begin_episode(env)
            ep.recent = deque([self._capture(env)], maxlen=self.lookback)
        if self.attention is not None:
            ep.attention = self.attention.begin(env, obs, index)
        return obs, ep

    def evaluate(self, envs: list, eps: list, obs: np.ndarray):
        """The policy's output on the active envs' observations [B, *obs]: their state rows carried, their action
        masks applied (:func:`rlviz.agent.stepping.policy_step`)."""
        out, states = policy_step(self.policy, obs, [ep.state for ep in eps], envs)
        if self.memory:  # the first episodes keep a sample of steps for the memory diagnostics
            for k, ep in enumerate(eps):
                if ep.memory is not None:
                    ep.memory.offer(ep.length, obs[k], ep.state)
        for ep, state in zip(eps, states):
            ep.state = state
        return out

    def _capture(self, env):
        frame = to_rgb_frame(env.render()) if self.extractor.needs_frame else None
        return self.extractor.capture(frame, env)

    def step(self, env, ep: EpisodeState, action):
        """One env step with ``action`` as the env takes it (:class:`~rlviz.evaluate.rollouts.lockstep.Decision`'s row):
        (observation, reward, done, terminated, truncated). What the policy decided is kept by the
        :class:`~rlviz.evaluate.rollouts.steplog.StepLog`, the reward too."""
        if ep.log is not None:
            self.replay.before_step(ep.log, env, ep.length)
            ep.log.actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        reward = float(reward)
        ep.ret += reward
        ep.length += 1
        lives = lives_of(info) if info else None
        if self.fail_on == "life-loss":
            failed = lives is not None and ep.lives is not None and lives < ep.lives
        elif self.fail_on == "negative-reward":
            failed = reward < 0
        else:
            failed = bool(terminated)
        ep.lives = lives if lives is not None else ep.lives
        if failed:
            ep.failures += 1
            if ep.attention is not None:
                ep.attention.failure(ep.length - 1)
            if ep.log is not None:
                self.replay.failure(ep.log, ep.length - 1, ep.obs, self.obs.single)
            elif self.heatmap is not None:
                self.heatmap.add(last_seen(self.extractor, reversed(ep.recent)), ep.index)  # type: ignore[arg-type]
        if "is_success" in info:
            ep.is_success = bool(np.asarray(info["is_success"]))
        if self.max_steps is not None and ep.length >= self.max_steps and not terminated:
            truncated = True
        done = bool(terminated or truncated)
        if not done and self.extractor is not None and ep.log is None:
            ep.recent.append(self._capture(env))
        obs = self.obs.single(obs)
        if ep.log is not None:
            ep.obs = obs
        return obs, reward, done, bool(terminated), bool(truncated)

    def finish(self, ep: EpisodeState, terminated: bool, truncated: bool) -> EpisodeResult:
        if ep.log is not None:
            self.replay.end(ep.log)
        vs = value_sums(np.concatenate(ep.rewards), np.concatenate(ep.values), self.gamma) if ep.values else None
        diag = ep.diag.finish()
        if ep.memory is not None:
            diag["memory"] = ep.memory.stats(self.policy)
        return EpisodeResult(
            ep.index, ep.seed, ep.ret, ep.length, ep.failures, terminated, truncated, ep.is_success,
            ep.ent_sum / max(ep.length, 1), self.greedy, vs, diag=diag,
            actions=np.concatenate(ep.actions) if ep.actions else None,
        )
