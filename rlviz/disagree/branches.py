"""Both agents played from the same saved state: the branches of a disagreement state.

To reach state t of episode k of agent X, the episode is replayed on its seed (:func:`reach_many`): with the actions
its rollout recorded, X's action generator advanced by the noise each step drew, or with X's policy and generator
(the picked episodes in lockstep, one batched forward per step, each row what a lone replay computes: the rollout's
episode exactly, forwards being batch-invariant), so the env, its wrappers (frame stacks, time limits, life
counters) and X's generator are where the rollout had them. The env's state is saved there (:mod:`rlviz.envs.snapshot`), then each agent plays from a
restored copy for the horizon (or to the episode's end), with a copy of the same generator: the same env
randomness and the same action noise for both. A branch of X itself is therefore the original episode's
continuation, step for step.

The branches of many states are played in lockstep (:func:`play_many`: one batched forward per step, each row
stepped by the rollouts' :class:`~rlviz.evaluate.rollouts.runner.Runner` on a :class:`Resumed` env, whose ``reset()`` hands
back the saved observation instead of resetting, and sampled with its own copy of the generator: each branch is
what it would be alone). Kept for a video, a branch's frames, observations and actions are collected as it is
played (:class:`Collect`), and the caller draws them with the branch agent's panels (:mod:`.run`: both branches
composed side by side and encoded once), starting from the shared frame.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from ..agent.actions import action_spec, draw_noise, noise_draw
from ..agent.capabilities import capabilities_of
from ..agent.stepping import plain, policy_step, start_state
from ..envs import make_env, to_rgb_frame
from ..envs.snapshot import EnvSnapshot, NotRestorable, restore, save, snapshot_kind
from ..episode.trace import EpisodeTrace, Spool, make_spool
from ..errors import EnvError
from ..evaluate.failures.pixel_heatmap import copies_faithfully
from ..evaluate.rollouts.lockstep import decide, input_buffer
from ..evaluate.rollouts.plan import RolloutPlan
from ..evaluate.rollouts.runner import Runner

__all__ = ["Resumed", "SavedState", "BranchResult", "reach", "reach_many", "play_branch", "play_kept", "play_many",
           "check_restorable", "Collect"]


class _Tap(gym.Wrapper):
    """Keeps the last observation and info the env returned (raw, as the wrappers give them)."""

    def reset(self, **kwargs: Any) -> Any:
        self.last = self.env.reset(**kwargs)
        return self.last

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.last = (out[0], out[4])
        return out


class Resumed(gym.Wrapper):
    """An env restored at a saved state: ``reset()`` returns the saved (observation, info) without resetting, and
    ``render()`` the saved frame until the first step (an ALE emulator's screen is not part of its state)."""

    def __init__(self, env: Any, obs: Any, info: dict, frame: Any):
        super().__init__(env)
        self._saved, self._frame = (obs, dict(info)), frame

    def reset(self, **kwargs: Any) -> Any:
        return copy.deepcopy(self._saved)

    def step(self, action: Any) -> Any:
        self._frame = None
        return self.env.step(action)

    def render(self) -> Any:
        return self._frame if self._frame is not None else self.env.render()

    def close(self) -> None:  # the restored copy may share its emulator (ALE) or pygame with others: left open
        pass


@dataclass(frozen=True)
class SavedState:
    """Step ``step`` of an episode, saved: the env (``snapshot``, frame included), the observation and info there
    (raw, as the env returned them), the playing agent's action generator at that step and the recurrent agents'
    memories there (``memory``)."""

    step: int
    snapshot: EnvSnapshot
    obs: Any
    info: dict
    rng: np.random.Generator
    #: recurrent agents' state rows there, by side ("a", "b"): each one's memory run along this episode to the step
    memory: dict | None = None


@dataclass(frozen=True)
class BranchResult:
    """One agent played from a saved state: return over the branch, steps, failures (the run's ``fail_on``),
    and whether the episode ended (terminated) within it."""

    agent: str
    ret: float
    steps: int
    failures: int
    terminated: bool

    @property
    def failed(self) -> bool:
        return self.failures > 0


class _IndexedActions(gym.ActionWrapper):
    """Action k of a non-Discrete space as a fixed valid action (for :func:`copies_faithfully`'s probe actions)."""

    def action(self, action: Any) -> Any:
        space, k = self.env.action_space, int(action)
        if isinstance(space, gym.spaces.Box):
            low, high = np.clip(space.low, -1, 1), np.clip(space.high, -1, 1)
            return (low + (k % 5) / 4 * (high - low)).astype(space.dtype)
        if isinstance(space, gym.spaces.MultiDiscrete):
            return (k + np.arange(space.nvec.size)) % space.nvec
        return space.sample()


def check_restorable(recipe: Any, seed: int, num_actions: int) -> str:
    """"ale" or "copy": how this env's states are saved; :class:`NotRestorable` when they cannot be (a deep copy
    that fails or does not play on exactly as the original)."""
    env = make_env(recipe, render_mode="rgb_array")
    kind = snapshot_kind(env)
    if kind == "ale":
        env.close()
        return kind
    if not isinstance(env.action_space, gym.spaces.Discrete):
        env, num_actions = _IndexedActions(env), 5
    if not copies_faithfully(env, seed, num_actions):  # (closes env)
        raise NotRestorable(f"{recipe.env_id}'s state cannot be saved and restored exactly (a copy of it does not "
                            "play on as the original)")
    return kind


def reach(agent: Any, env: Any, seed: int, step: int, *, greedy: bool, fail_on: str, gamma: float) -> SavedState:
    """Replay ``agent``'s episode on seed ``seed`` on ``env`` (built from its recipe, ``rgb_array``) up to state
    ``step`` and save it there (:func:`reach_many` for one state)."""
    return reach_many(agent, [env], [(seed, step)], greedy=greedy, fail_on=fail_on, gamma=gamma)[0]


def reach_many(agent: Any, envs: list, targets: list, *, greedy: bool, fail_on: str, gamma: float,
               actions: list | None = None, carry: dict | None = None) -> list[SavedState]:
    """State ``step`` of each ``(seed, step)`` in ``targets`` of ``agent``'s episodes, saved: the episodes replayed
    in lockstep, one on each of ``envs`` (``rgb_array``; left at the saved states, ALE snapshots need them),
    one batched forward per step. Each row is what a lone replay computes (forwards of fixed-size chunks) and
    samples with its episode's own generator, so each state is the rollout's. ``actions``: each episode's actions
    as the rollout took them (``EpisodeResult.actions``, at least ``step`` of them): replayed without the policy,
    the generator advanced by the noise each step draws (one forward tells its shape), the same states.
    ``carry``: side -> a recurrent policy whose memory is run along each replayed episode to the state
    (``SavedState.memory``; the playing agent's own is its rollout's)."""
    policy = agent.policy
    runner = Runner(policy, RolloutPlan(1, greedy=greedy, fail_on=fail_on, gamma=float(gamma)))
    taps = [_Tap(e) for e in envs]
    starts = [runner.start(tap, -1, seed) for tap, (seed, _) in zip(taps, targets)]
    eps = [ep for _, ep in starts]
    buf = input_buffer(starts[0][0], len(taps))
    for i, (ob, _) in enumerate(starts):
        buf[i] = ob
    goal = [int(step) for _, step in targets]
    memory = _Memories(carry or {}, len(taps))
    if actions is not None:
        _replay(runner, taps, eps, goal, actions, noise_draw(policy.evaluate(buf[:1]), greedy), targets, memory)
    active = [i for i in range(len(taps)) if goal[i] > eps[i].length]
    while active:
        rows = np.array(active, np.intp)
        memory.step(buf, active)
        obs_in, rows_in = _inputs(runner, buf[: len(taps)], rows)
        d = decide(policy, obs_in, rows_in, lambda draw, act=tuple(active): np.concatenate(
            [draw_noise(eps[i].rng, draw) for i in act]), greedy, runner.spec, forward=_forward(runner, taps, eps, active))
        for i, action in zip(active, d.env_actions):
            ob, _, done, _, _ = runner.step(taps[i], eps[i], action)
            if done:
                raise _ended(targets[i][0], goal[i], eps[i].length)
            buf[i] = ob
        active = [i for i in active if eps[i].length < goal[i]]
    saved = []
    for i, (tap, env, ep, step) in enumerate(zip(taps, envs, eps, goal)):
        obs, info = tap.last
        saved.append(SavedState(step, save(env, to_rgb_frame(env.render())), obs, dict(info), ep.rng,
                                memory.of(i)))
    return saved


class _Memories:
    """Recurrent policies' state rows (``carry``: side -> policy), one per replayed episode, stepped on the
    observations the episodes reach (each from the policy's initial state)."""

    def __init__(self, carry: dict, n: int):
        self.carry = {side: p for side, p in carry.items() if capabilities_of(p).recurrent}
        self.rows = {side: [start_state(p) for _ in range(n)] for side, p in self.carry.items()}

    def step(self, buf: np.ndarray, active: list) -> None:
        for side, p in self.carry.items():
            _, new = policy_step(p, buf[active], [self.rows[side][i] for i in active], [None] * len(active))
            for i, state in zip(active, new):
                self.rows[side][i] = state

    def step_one(self, buf: np.ndarray, i: int) -> None:
        """Episode ``i``'s memories stepped on ``buf`` [1, *obs]."""
        for side, p in self.carry.items():
            self.rows[side][i] = policy_step(p, buf, [self.rows[side][i]], [None])[1][0]

    def of(self, i: int) -> dict | None:
        return {side: rows[i] for side, rows in self.rows.items()} or None


def _inputs(runner: Runner, buf: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """decide()'s (obs, rows): a stateful policy's step takes the active rows only (their state rows carried)."""
    return (buf[rows], None) if not plain(runner.policy) else (buf, rows)


def _forward(runner: Runner, envs: list, eps: list, active: list) -> Any:
    """decide()'s ``forward``: a stateful policy stepped with its rows' states (None: ``policy.evaluate``)."""
    if plain(runner.policy):
        return None
    return lambda obs: runner.evaluate([envs[i] for i in active], [eps[i] for i in active], obs)


def _replay(runner: Runner, taps: list, eps: list, goal: list, actions: list, draw: Any, targets: list,
            memory: _Memories) -> None:
    """Each episode stepped with its recorded actions up to its goal, its generator advanced as the rollout's (and
    the carried memories stepped on its observations)."""
    discrete = runner.spec.kind == "discrete"
    buf = input_buffer(runner.obs.single(taps[0].last[0]), 1) if memory.carry else None
    for i, (tap, ep, step, taken, (seed, _)) in enumerate(zip(taps, eps, goal, actions, targets)):
        taken = np.asarray(taken)
        if taken.shape[0] < step:
            raise EnvError(f"Episode seed {seed} has {taken.shape[0]} recorded actions; state {step} needs {step}.")
        for a in taken[:step]:
            if buf is not None:
                buf[0] = runner.obs.single(tap.last[0])
                memory.step_one(buf, i)
            _, _, done, _, _ = runner.step(tap, ep, int(a) if discrete else a)
            if done:
                raise _ended(seed, step, ep.length)
        if draw is not None and step:
            draw_noise(ep.rng, draw, step)  # what ``step`` one-row draws take from the stream


def _ended(seed: int, step: int, length: int) -> EnvError:
    return EnvError(f"Replaying episode seed {seed} to step {step} ended at step {length}: the env is not "
                    "deterministic under its seed, so its states cannot be branched from.")


class Collect(gym.Wrapper):
    """Keeps a branch's episode as it is played: frames (``render()``, RGB), observations (raw), actions, rewards
    and lives, in disk spools (:class:`~rlviz.episode.trace.Spool`, never a whole episode in RAM);
    :meth:`trace` hands them over as an :class:`~rlviz.episode.trace.EpisodeTrace`, :meth:`close` frees them."""

    def __init__(self, env: Any, action_names: Any = None):
        super().__init__(env)
        from ..record.setup import action_labels

        self.actions = action_spec(env.action_space)
        self.action_names = action_labels(env, self.actions, action_names)
        self._frames: Any = None
        self._obs: Any = None
        self._actions: list = []
        self._rewards: list = []
        self._lives: list = []
        self.ended = (False, False)  # (terminated, truncated), as the loop saw it
        self.memory: Any = None  # a recurrent agent's state row at the branch's start (set by play_many)

    def _keep(self, obs: Any, info: dict) -> None:
        frame = to_rgb_frame(self.env.render())
        if self._frames is None:
            self._frames, self._obs = Spool(frame.shape, np.uint8, name="frames"), make_spool(obs, name="obs")
        self._frames.append(frame)
        self._obs.append(obs)
        self._lives.append(int(info.get("lives", -1)))

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._keep(obs, info)
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._actions.append(np.asarray(action))
        self._rewards.append(float(reward))
        self._keep(obs, info)
        return obs, reward, terminated, truncated, info

    def trace(self, fps: float) -> EpisodeTrace:
        """The branch as played (valid until :meth:`close`); how it ended: ``ended``, set by :func:`play_kept`."""
        terminated, truncated = self.ended
        steps, spec = len(self._rewards), self.actions
        actions = np.asarray(self._actions).reshape((steps,) + tuple(spec.shape))
        lives = np.asarray(self._lives, np.int32)
        env_id = getattr(self.env.unwrapped.spec, "id", None) or type(self.env.unwrapped).__name__
        return EpisodeTrace(
            frames=self._frames.view(), observations=self._obs.view(),
            actions=actions.astype(np.float32 if spec.continuous else np.int64),
            rewards=np.asarray(self._rewards, np.float32), lives=None if (lives < 0).all() else lives,
            terminated=bool(terminated), truncated=bool(truncated), action_names=self.action_names, episode_id=0,
            seed=None, fps=float(fps), env_id=str(env_id))

    def close(self) -> None:  # the spools only: the restored env is left open (see Resumed.close)
        for spool in (self._frames, self._obs):
            if spool is not None:
                spool.close()
        self._frames = self._obs = None


def play_branch(agent: Any, side: str, saved: SavedState, horizon: int | None, *, greedy: bool, fail_on: str,
                gamma: float) -> BranchResult:
    """``agent`` (labelled ``side``) played from ``saved`` for ``horizon`` steps (None: to the episode's end)."""
    return play_many(agent, side, [saved], horizon, greedy=greedy, fail_on=fail_on, gamma=gamma)[0][0]


def play_kept(agent: Any, side: str, saved: SavedState, horizon: int | None, *, greedy: bool, fail_on: str,
              gamma: float) -> tuple[BranchResult, Collect]:
    """:func:`play_branch`, the branch's episode kept: its :class:`Collect` (frames, observations, actions; its
    ``trace()`` is what the branch's video is drawn from). The caller closes it."""
    result, kept = play_many(agent, side, [saved], horizon, keep=[True], greedy=greedy, fail_on=fail_on,
                             gamma=gamma)[0]
    return result, cast(Collect, kept)  # keep=[True]: kept


def _resume(ep: Any, saved: SavedState, env: Any, side: str) -> None:
    """Episode state ``ep`` set where ``saved`` was: its action generator and, for a recurrent agent, its memory of
    the episode so far (kept on a :class:`Collect` too: the branch's video reads the branch from there)."""
    ep.rng = copy.deepcopy(saved.rng)
    if saved.memory and side in saved.memory:
        ep.state = saved.memory[side]
        if isinstance(env, Collect):
            env.memory = saved.memory[side]


def play_many(agent: Any, side: str, saved: list[SavedState], horizon: int | None, *, keep: list[bool] | None = None,
              greedy: bool, fail_on: str, gamma: float) -> list[tuple[BranchResult, Collect | None]]:
    """``agent`` (labelled ``side``) played from each of ``saved`` for ``horizon`` steps (None: to the episode's
    end), the branches in lockstep: one batched forward per step, each row sampled with a copy of its state's
    generator, so each branch is what it would be played alone (forwards are batch-invariant). ``keep[j]``: branch
    j's episode kept (its :class:`Collect`, which the caller closes; else None). The saved states must be of
    different envs (ALE copies share their env's emulator: one branch of each state at a time)."""
    keep = keep or [False] * len(saved)
    runner = Runner(agent.policy, RolloutPlan(1, greedy=greedy, fail_on=fail_on, gamma=float(gamma), max_steps=horizon))
    envs: list[Any] = []
    try:
        for s, k in zip(saved, keep):  # each restored now: an ALE copy's emulator is set to its state here
            env = Resumed(restore(s.snapshot), s.obs, s.info, s.snapshot.frame)
            envs.append(Collect(env, agent.action_names) if k else env)
        starts = [runner.start(env, -1, None) for env in envs]  # (Resumed.reset: the saved observation)
        eps = [ep for _, ep in starts]
        for ep, s, env in zip(eps, saved, envs):
            _resume(ep, s, env, side)
        buf = input_buffer(starts[0][0], len(envs))
        for i, (ob, _) in enumerate(starts):
            buf[i] = ob
        results: list[Any] = [None] * len(envs)
        active = list(range(len(envs)))
        while active:
            obs_in, rows_in = _inputs(runner, buf, np.array(active, np.intp))
            d = decide(agent.policy, obs_in, rows_in, lambda draw, act=tuple(active): np.concatenate(
                [draw_noise(eps[i].rng, draw) for i in act]), greedy, runner.spec,
                forward=_forward(runner, envs, eps, active))
            still = []
            for i, action in zip(active, d.env_actions):
                ob, _, done, terminated, truncated = runner.step(envs[i], eps[i], action)
                if not done:
                    buf[i] = ob
                    still.append(i)
                    continue
                ep = eps[i]
                results[i] = BranchResult(side, float(ep.ret), int(ep.length), int(ep.failures), bool(terminated))
                if isinstance(envs[i], Collect):
                    envs[i].ended = (bool(terminated), bool(truncated))
            active = still
    except BaseException:
        for env in envs:
            if isinstance(env, Collect):
                env.close()
        raise
    return [(r, env if isinstance(env, Collect) else None) for r, env in zip(results, envs)]
