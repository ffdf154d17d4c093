"""Failure heatmaps from rendered frames, at the cost of the frames they read.

An object extractor that reads rendered frames (``needs_frame``: :class:`~rlviz.evaluate.failures.objects.MotionExtractor`,
user functions) would make a rollout render every step, although the heatmap reads only the few frames
before each failure (CartPole: 3 ms a frame in pygame against 29 us a step). So the rollout renders
nothing. Per running episode it keeps an :class:`EpisodeLog`: the episode's seed (its step-0 snapshot: a
seeded reset of the replay's own env, no copy), a copy of the env (``copy.deepcopy``) every
``snapshot_every`` steps, the last two snapshots kept, and the actions since the older one (one small int a
step); at a failure, :class:`FailureReplay` copies the snapshot before the failure's window (or resets its
own env with the seed) and steps it with the logged actions (no policy call), rendering only

1. the frame before the failure, plus the ``history`` frames the extractor remembers (the previous frame
   for motion); when every object is visible there, that is the answer (the common case);
2. otherwise the whole ``lookback`` window before the failure (an object that left the screen is taken
   from the newest frame where it is), from the snapshot again.

The replayed observation on the failing step is checked against the rollout's. Envs that cannot be copied
(ALE's emulator) keep every action instead and are replayed from their seed when the episode ends. The
counts are those of capturing every step (tests compare both on CartPole and ALE Breakout).
"""

from __future__ import annotations

import copy
import warnings
from array import array
from collections.abc import Callable

import numpy as np

from ...envs.ale_seed import seeded_reset
from ...envs.frames import to_rgb_frame
from .heatmap import FailureHeatmap
from .objects import Extractor, last_seen

__all__ = ["FailureReplay", "EpisodeLog", "copies_faithfully", "probe_action"]


def probe_action(space, k: int):
    """A fixed valid action number ``k`` of ``space`` (Discrete: ``k mod n``; Box: one of five evenly spaced points
    of its bounds clipped to [-1, 1], every dimension alike; MultiDiscrete: ``k`` shifted per part), for probes
    that must step any env the same way twice."""
    import gymnasium as gym

    n = getattr(space, "n", None)
    if isinstance(n, (int, np.integer)):
        return int(k % max(1, int(n)))
    if isinstance(space, gym.spaces.Box):
        low, high = np.clip(space.low, -1, 1), np.clip(space.high, -1, 1)
        return (low + (k % 5) / 4 * (high - low)).astype(space.dtype)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return (k + np.arange(space.nvec.size)).reshape(space.nvec.shape) % space.nvec
    if isinstance(space, gym.spaces.MultiBinary):
        return ((k + np.arange(int(np.prod(space.shape)))) % 2).reshape(space.shape).astype(space.dtype)
    return space.sample()


def copies_faithfully(env, seed: int | None, num_actions: int, steps: int = 24) -> bool:
    """Whether ``copy.deepcopy(env)`` gives an env that plays on exactly as ``env`` does (ALE's emulator handle,
    for one, does not copy: its copies share or lose the game). Checked on ``steps`` steps after a seeded reset
    (``(7i + 3) mod num_actions``; num_actions 0: other spaces, :func:`probe_action` of the same numbers); call it
    before ``env`` renders (a pygame clock cannot be copied either)."""
    try:
        seeded_reset(env, seed) if seed is not None else env.reset()
        twin = copy.deepcopy(env)
        for i in range(steps):
            a = (i * 7 + 3) % num_actions if num_actions > 0 else probe_action(env.action_space, i * 7 + 3)
            got = [o[:3] for o in (env.step(a), twin.step(a))]
            if not (_same(got[0][0], got[1][0]) and got[0][1:] == got[1][1:]):
                return False
            if got[0][2]:
                break
        return True
    except Exception:  # a copy that cannot be made or stepped (Box2D bodies, emulator handles)
        return False
    finally:
        env.close()


_SEED = object()  # the snapshot of step 0 of a seeded episode: its seed


class EpisodeLog:
    """What a rollout keeps of one running episode for the heatmap (no frames)."""

    def __init__(self, seed: int | None, typecode: str | None, copyable: bool, index: int = -1):
        self.seed, self.index = seed, index  # index: the episode's, for the heatmap's per-episode contributions
        self.snaps: list[tuple[int, object]] = []  # (step, env copy), oldest first, at most two
        self.base = 0  # the step of actions[0]
        self.actions = array(typecode) if typecode else []  # Box/MultiDiscrete actions: a list of arrays
        self.copyable = copyable
        self.pending: list[int] = []  # failures of an env that cannot be copied: replayed at the episode's end


class FailureReplay:
    """Adds the masks of failures to ``heatmap`` by replaying from snapshots, or from the seed.

    env: an env of its own (``render_mode="rgb_array"``) built like the rollout's, for replays from seeds
    (never copied, so it may have rendered); closed by :meth:`close`.
    """

    def __init__(self, env, extractor: Extractor, heatmap: FailureHeatmap, lookback: int, num_actions: int,
                 copyable: bool = True):
        self.env, self.num_actions = env, int(num_actions)
        self.extractor, self.heatmap = extractor, heatmap
        self.lookback, self.history = max(1, int(lookback)), max(0, int(getattr(extractor, "history", 0)))
        # a copy costs ~100 steps of a classic-control env (copy.deepcopy of the wrapper stack): one every 128
        # steps, and a failure replays at most 256 steps
        self.snapshot_every = max(128, 2 * (self.lookback + self.history))
        self.copyable = copyable  # False: snapshots off (see copies_faithfully), episodes replayed from seeds
        self.frames_rendered = 0

    # -- during the rollout ------------------------------------------------------------------------
    def begin(self, seed: int | None, index: int = -1) -> EpisodeLog:
        typecode = None if self.num_actions <= 0 else "B" if self.num_actions <= 256 else "q"  # None: any action
        log = EpisodeLog(seed, typecode, self.copyable, index)
        if seed is not None:
            log.snaps.append((0, _SEED))  # step 0 is the seeded reset: replayed on our own env, never copied
        return log

    def before_step(self, log: EpisodeLog, env, step: int) -> None:
        """Called before the action chosen on frame ``step`` is taken: snapshot the env when one is due."""
        if not log.copyable or step % self.snapshot_every or (step == 0 and log.snaps):
            return
        try:
            snap = copy.deepcopy(env)
        except Exception:  # e.g. an emulator handle: keep every action, replay from the seed
            log.copyable = self.copyable = False
            log.snaps = []
            return
        log.snaps.append((step, snap))
        if len(log.snaps) > 2:
            log.snaps.pop(0)
            keep_from = log.snaps[0][0]
            del log.actions[: keep_from - log.base]
            log.base = keep_from

    def failure(self, log: EpisodeLog, t: int, obs_t, flatten: Callable) -> None:
        """The action chosen on frame ``t`` (already logged) failed; ``obs_t``: the observation it was chosen on,
        as ``flatten`` gives it."""
        if not log.copyable:
            log.pending.append(t)
            return
        found = self._from_snapshot(log, {t: t}, obs_t, flatten)
        if found is not None and not all(m.any() for m in found[t].values()):
            found = self._from_snapshot(log, {t: max(0, t - self.lookback + 1)}, obs_t, flatten)
        if found is not None:
            self.heatmap.add(found[t], log.index)

    def end(self, log: EpisodeLog) -> None:
        """The episode ended: replay it from its seed for the failures no snapshot could serve."""
        if log.pending:
            self.add(log.seed, log.actions, log.pending, log.index)

    def _from_snapshot(self, log: EpisodeLog, windows: dict, obs_t, flatten: Callable) -> dict | None:
        first = max(0, min(windows[t] for t in windows) - self.history)
        step, snap = next((s for s in reversed(log.snaps) if s[0] <= first), (None, None))
        t = max(windows)
        if snap is _SEED:
            env = self.env
            seeded_reset(env, log.seed)  # type: ignore[arg-type]  # a logged episode has its seed
        else:
            env = copy.deepcopy(snap)  # (not closed: a classic-control close() would quit pygame for everyone)
        found, obs = self._play(env, step, lambda s: log.actions[s - log.base], windows)  # type: ignore[arg-type]
        if t not in found or (t > step and not _same(flatten(obs), obs_t)):
            how = "Its seed" if snap is _SEED else "A copy of the env (copy.deepcopy)"
            warnings.warn(
                f"{how} did not reproduce episode seed {log.seed} for the heatmap; it stops copying envs and replays "
                "later episodes from their seeds when they end (this failure is left out).",
                stacklevel=4,
            )
            self.copyable = False
            return None
        return found

    # -- replays from the seed ---------------------------------------------------------------------
    def add(self, seed: int | None, actions, fail_frames: list[int], episode: int = -1) -> None:
        """Episode ``episode`` reset with ``seed`` and stepped with ``actions``; ``fail_frames``: the frame index
        (steps taken) on which each failing action was chosen."""
        if not fail_frames:
            return
        found = self._from_seed(seed, actions, {t: t for t in fail_frames})
        incomplete = {t: max(0, t - self.lookback + 1) for t, m in found.items() if not all(v.any() for v in m.values())}
        if incomplete:
            found.update(self._from_seed(seed, actions, incomplete))
        for t in fail_frames:
            if t in found:
                self.heatmap.add(found[t], episode)

    def _from_seed(self, seed, actions, windows: dict[int, int]) -> dict[int, dict]:
        seeded_reset(self.env, seed) if seed is not None else self.env.reset()
        return self._play(self.env, 0, lambda s: actions[s], windows)[0]

    def _play(self, env, start: int, action_at: Callable, windows: dict[int, int]) -> tuple[dict, object]:
        """Step ``env`` (at frame ``start``) to the last failure; ``windows`` {failure frame t: first frame of its
        window}. Returns ({t: last_seen masks over frames t, t-1, ... down to its window's first frame}, the
        observation of the last frame, or None when no step was taken)."""
        ex = self.extractor
        ex.begin_episode(env)
        render: set[int] = set()
        for t, first in windows.items():
            render.update(range(max(start, first - self.history), t + 1))
        captures: dict[int, object] = {}
        out: dict[int, dict] = {}
        last, obs = max(windows), None
        for s in range(start, last + 1):
            if s in render:
                captures[s] = ex.capture(to_rgb_frame(env.render()), env)
                self.frames_rendered += 1
            if s in windows:
                out[s] = last_seen(ex, (captures[u] for u in range(s, windows[s] - 1, -1)))
            keep_from = min((windows[t] for t in windows if t > s), default=s + 1)
            for u in [u for u in captures if u < keep_from]:
                del captures[u]  # (what a capture remembers lives in the extractor)
            if s == last:
                break
            a = action_at(s)  # Discrete: an int (the log's array); other spaces: the array the rollout stepped with
            obs, _, terminated, truncated, _ = env.step(int(a) if self.num_actions > 0 else a)
            if terminated or truncated:
                warnings.warn(
                    f"Replaying an episode for the heatmap, the env ended at step {s + 1} but the rollout went on "
                    f"to step {last + 1}: the env is not deterministic under its seed; this episode's later "
                    "failures are left out of the heatmap.",
                    stacklevel=4,
                )
                break
        return out, obs

    def close(self) -> None:
        self.env.close()


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
