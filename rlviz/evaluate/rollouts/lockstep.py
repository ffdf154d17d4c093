"""The rollouts' hot loop: many episodes on a few envs in lockstep, one batched forward per step.

Per step: the observations sit in one buffer (a row per env, in the observations' own dtype: the
forward converts them to float32 as it would any batch; whole forward chunks of
:meth:`Policy.rows_for` the observations), so a step costs one padded forward of that buffer (rows of idle envs are
stale and ignored: a row's result does not depend on its neighbours), one sampling call on noise each
episode's Generator drew ahead in blocks (a row of a time-major ring), one vectorised pass for the observations'
loop keys, one row of the :class:`~rlviz.evaluate.rollouts.steplog.StepLog` (entropies, the non-finite check, the
diagnostics and the value sequences are computed from it once per episode), then the envs' own steps. The same
:func:`decide` plays lone episodes (:func:`rlviz.evaluate.rollouts.rollout.replay_episode`), so a replay takes exactly the
rollout's actions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from ...agent.actions import actions_from_noise, draw_noise, noise_draw, to_env_action
from ...agent.stepping import plain
from ...gc_pause import resume as resume_gc
from ..statistics.diagnostics import obs_keys
from .steplog import StepLog

__all__ = ["Decision", "decide", "input_buffer", "run_lockstep", "BlockNoise", "Report"]


class Decision:
    """What the policy decided for B envs: env_actions (a list: what env.step takes), indices (int64 [B]: the
    Discrete action, -1 for other kinds: the diagnostics count them), values ([B] or None without a value head),
    out (the PolicyOutput of those rows: the entropies' and the non-finite check's inputs), keys (uint64 [B]: the
    observations' loop keys)."""

    __slots__ = ("env_actions", "indices", "values", "out", "keys")

    def __init__(self, env_actions, indices, values, out, keys):
        self.env_actions, self.indices, self.values, self.out, self.keys = env_actions, indices, values, out, keys


def input_buffer(obs, rows: int) -> np.ndarray:
    """Zeros [rows, *obs_shape] in the dtype of ``obs`` (one observation as the policy takes it): the rows the
    policy is given, and that :func:`~rlviz.evaluate.statistics.diagnostics.obs_keys` keys (bool / uint8 observations
    are keyed on 1 byte each, not the 4 of their float32 form)."""
    a = np.asarray(obs)
    return np.zeros((rows,) + a.shape, dtype=a.dtype if a.dtype != object else np.float32)


def decide(policy, obs: np.ndarray, rows: np.ndarray | None, noise, greedy: bool, spec, forward=None) -> Decision:
    """Forward ``obs`` [N, ...] (an :func:`input_buffer`; batch-invariant :meth:`Policy.evaluate`) and decide for its rows
    ``rows`` (None: all). ``noise(draw)``: the noise [B, k] for those rows (:func:`noise_draw`'s ``draw``;
    None for the greedy action); ``spec``: the env's ActionSpec; ``forward(obs)``: the PolicyOutput in place of
    ``policy.evaluate(obs)`` (a stateful or masked policy's step: :meth:`rlviz.evaluate.rollouts.runner.Runner.evaluate`)."""
    out = policy.evaluate(obs) if forward is None else forward(obs)
    if rows is not None:
        out, obs = _rows(out, rows), obs[rows]
    draw = noise_draw(out, greedy)
    acts = actions_from_noise(out, None if draw is None else noise(draw))
    if spec.kind == "discrete":
        env_actions, indices = acts.tolist(), acts
    else:
        env_actions, indices = [to_env_action(a, spec) for a in acts], np.full(len(acts), -1, np.int64)
    return Decision(env_actions, indices, out.value, out, obs_keys(obs))


def _rows(out, index):
    """The PolicyOutput ``out`` for its rows ``index`` only."""
    def take(a):
        return None if a is None else a[index]

    return replace(out, logits=out.logits[index], probs=out.probs[index], value=take(out.value), mean=take(out.mean),
                   std=take(out.std), quantiles=take(out.quantiles))


class BlockNoise:
    """Each slot's episode Generator drawn ahead in blocks: ``rng.random((K, k))`` yields exactly the numbers
    of K successive ``rng.random((1, k))`` calls (the same for ``standard_normal``), so the rows taken one per
    step are what a lone replay draws, without one Generator call per env per step. Time-major: the noise of
    the t-th :meth:`take` sits in row t of a ring, so a step reads one row; a slot's next block is drawn when due."""

    BLOCK = 64

    def __init__(self, slots: int):
        self.rngs: list = [None] * slots
        self.t = 0  # takes so far: every step takes (a policy that samples) or none does (greedy)
        self.due: dict = {}  # take -> [(slot, rng)] whose next block starts there
        self.ring: Any = None  # [2 * BLOCK, slots, k], allocated on the first take

    def begin(self, i: int, rng: np.random.Generator) -> None:
        """Slot ``i`` starts an episode sampled from ``rng`` at the next take (greedy episodes draw nothing)."""
        self.rngs[i] = rng
        self.due.setdefault(self.t, []).append((i, rng))

    def take(self, draw: tuple, active: np.ndarray) -> np.ndarray:
        """One row of noise per active slot [B, k]."""
        t, size = self.t, 2 * self.BLOCK
        if self.ring is None:
            self.ring = np.zeros((size, len(self.rngs), draw[1]))
        for i, rng in self.due.pop(t, ()):
            if self.rngs[i] is rng:  # (not a slot that has moved on to another episode)
                self.ring[(t + np.arange(self.BLOCK)) % size, i] = draw_noise(rng, draw, self.BLOCK)
                self.due.setdefault(t + self.BLOCK, []).append((i, rng))
        self.t = t + 1
        return self.ring[t % size, active]


class Report:
    """A progress callable in place of a bar: called with each finished episode's return (workers report to
    the driver's one bar this way)."""

    def __init__(self, callback):
        self.callback = callback

    def update(self, n: int = 1, ret: str = "nan") -> None:
        self.callback(float(ret))

    def close(self) -> None:
        pass


class _NoAttention:
    """The attention hooks of a rollout without attention: nothing per step, the records as they are."""

    def observe(self, *args) -> None:
        pass

    def attach(self, records: list) -> list:
        return records


_NO_ATTENTION = _NoAttention()


class _NoProbe:
    """The probe of a rollout without one (``probe`` of :class:`rlviz.evaluate.rollouts.runner.Runner`): nothing per step."""

    def observe(self, *args) -> None:
        pass

    def end(self, *args) -> None:
        pass


_NO_PROBE = _NoProbe()


def run_lockstep(runner, envs: list, indices: Iterable[int], seed_for, progress) -> tuple[list, int]:
    """Play the episodes ``indices`` on ``envs`` in lockstep, one batched forward per step; episode k starts
    from seed ``seed_for(k)`` on whichever env is free. ``runner``: the rollout's per-env stepper
    (:class:`rlviz.evaluate.rollouts.runner.Runner`). Returns (results sorted by index, env steps)."""
    resume_gc()  # (the CLI's start-up is over: rlviz.gc_pause)
    pending = iter(indices)
    n = len(envs)
    slots: list = [None] * n
    chunk: Any = None  # the policy's forward rows for these observations (known at the first reset)
    buf: Any = None  # [whole chunks >= n, *obs_shape] in the observations' dtype: the policy's input, a row per env
    noise = BlockNoise(n)
    log = StepLog(n, runner.clip_values)
    records, steps = [], 0

    def start(i: int) -> None:
        nonlocal buf, chunk
        k = next(pending, None)
        if k is None:
            return
        ob, slots[i] = runner.start(envs[i], k, seed_for(k))
        noise.begin(i, slots[i].rng)
        if buf is None:
            chunk = runner.policy.rows_for(np.shape(ob))
            buf = input_buffer(ob, -(-n // chunk) * chunk)
        buf[i] = ob

    for i in range(n):
        start(i)
    active = [i for i, s in enumerate(slots) if s is not None]
    rows = np.array(active, dtype=np.intp)
    policy, greedy, spec = runner.policy, runner.greedy, runner.spec
    stepwise = not plain(policy)  # a state row per env (RecurrentPPO) or the envs' action masks (MaskablePPO)
    attention = runner.attention or _NO_ATTENTION  # per-object attribution shares (rlviz.analysis.attention)
    probe = runner.probe or _NO_PROBE  # told each step's states and decisions (observe) and episode ends (end)
    # gradient attention: the step's forward is the tracker's (with gradients), its maps from that forward's graph
    forward = runner.attention.forward if getattr(runner.attention, "from_forward", False) else None
    while active:
        used = -(-(active[-1] + 1) // chunk) * chunk
        take = lambda draw, rows=rows: noise.take(draw, rows)  # noqa: E731
        if stepwise:
            d = decide(policy, buf[rows], None, take, greedy, spec, forward=lambda o, act=active: runner.evaluate(
                [envs[i] for i in act], [slots[i] for i in act], o))
        else:
            d = decide(policy, buf[:used], rows if len(active) < used else None, take, greedy, spec, forward=forward)
        log.write(rows, d)
        attention.observe(buf, rows, d.indices, envs, slots)
        probe.observe(buf[:used], rows, d.out, slots, envs)  # e.g. another policy asked (rlviz.disagree.probe)
        rewards, ended = [], []
        for i, action in zip(active, d.env_actions):
            ob, reward, done, term, trunc = runner.step(envs[i], slots[i], action)
            rewards.append(reward)
            if done:
                ended.append((i, term, trunc))
            else:
                buf[i] = ob
        log.end_step(rows, rewards)
        for i, term, trunc in ended:
            log.fold(i, slots[i])
            probe.end(i, slots[i])
            records.append(runner.finish(slots[i], term, trunc))
            progress.update(1, ret=f"{records[-1].ret:.1f}")
            slots[i] = None
            start(i)
        steps += len(active)
        if ended:
            active = [i for i, s in enumerate(slots) if s is not None]
            rows = np.array(active, dtype=np.intp)
        log.roll(slots)
    progress.close()
    records.sort(key=lambda r: r.index)
    return attention.attach(records), steps
