"""Each agent's states given to the other agent too, during compare's rollouts: per state, how far apart the two
action distributions are and what each agent's value head says.

:class:`DisagreementProbe` is the rollout's probe (``probe`` of :class:`rlviz.evaluate.rollouts.runner.Runner`). The other
agent is asked once per distinct observation: states repeat a lot (MinAtar Breakout: 3,952 distinct observations in 32,452
steps of 200 episodes), so its outputs are kept by the observation's digest (BLAKE2b, 128 bits) and the new
observations wait until there are enough to fill whole forward chunks (``16 x rows_for(obs)``, or the rollout's
end: :meth:`~DisagreementProbe.finish`); they are then evaluated together
(:meth:`~rlviz.agent.policy.Policy.evaluate`: fixed-size chunks, so a row's numbers are the same whatever else is in
the batch, and a kept output is what a fresh forward gives). Results are written with numpy into a row of per-state
columns per episode, cut into one :class:`EpisodeDisagreement` per episode once it has ended and its last state
is written (an episode's end forces no forward).

With an object extractor (the rollout's heatmap on), the objects of every state where the two agents' greedy actions
differ go into a :class:`~rlviz.evaluate.failures.heatmap.FailureHeatmap` (an "event" is such a state): where on the screen
they disagree. Exact extractors' captures of the step are used (MinAtar, classic control, ALE colours); extractors
that read frames get the waiting states rendered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..agent.capabilities import capabilities_of
from ..agent.stepping import policy_step, start_state
from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..evaluate.failures.heatmap import FailureHeatmap
from ..evaluate.statistics.distance import ACTION_GAP, TV, disagreement, greedy_actions

__all__ = ["EpisodeDisagreement", "DisagreementProbe", "check_probe_policies", "compare_outputs", "BOX_DIFFER_TV",
           "BOX_DIFFER_GAP"]

#: Box actions have no greedy action to compare: a state counts as one where they choose differently from this TV
#: (the Pinsker bound of the Gaussians' distance) on.
BOX_DIFFER_TV = 0.5
#: Deterministic Box actors (measured by :func:`~rlviz.evaluate.statistics.distance.action_gap`): a state counts as one where
#: they choose differently from this gap on (a tenth of the action bounds' width).
BOX_DIFFER_GAP = 0.1
#: Forward chunks of new observations evaluated together.
FLUSH_CHUNKS = 16


@dataclass(frozen=True)
class EpisodeDisagreement:
    """Episode ``index`` (seed ``seed``) played by agent ``side`` ("a" or "b"), the other agent asked on each of
    its T states (T = the episode's length; state t is the observation action t was chosen on).

    tv:          float32 [T]  the probe's ``measure`` of how far apart the two agents are there: the total-variation
                 distance of the two action distributions (0: the same, 1: disjoint; Box: the Pinsker bound), or for
                 deterministic Box actors the action gap (:func:`~rlviz.evaluate.statistics.distance.action_gap`: the actions'
                 distance scaled by the bounds); NaN where neither applies
    own_value:   float32 [T]  the playing agent's value there (NaN without a value head)
    other_value: float32 [T]  the other agent's value there
    differ:      bool [T]     the greedy actions differ (Box: ``tv >= BOX_DIFFER_TV``, or ``BOX_DIFFER_GAP``)
    """

    side: str
    index: int
    seed: int
    tv: np.ndarray
    own_value: np.ndarray
    other_value: np.ndarray
    differ: np.ndarray

    @property
    def length(self) -> int:
        return int(self.tv.shape[0])


def check_probe_policies(own: Any, other: Any) -> None:
    """A usage error unless ``other`` can be asked on ``own``'s states: both unmasked (a masked policy's distribution
    depends on the env), the same observation format. A recurrent one is asked with its memory run along the
    playing agent's episode (its own state row per episode, fresh at the episode's start)."""
    for p in (own, other):
        if capabilities_of(p).action_masks:
            raise UsageError(f"disagreements ask each agent on the other's states, but {type(p).__name__} needs the "
                             "env's action masks; compare without --disagreements.")
    fa, fb = getattr(own, "obs_format", "flat"), getattr(other, "obs_format", "flat")
    if fa != fb:
        raise UsageError(f"disagreements give one agent's inputs to the other, but they read observations as {fa!r} "
                         f"and {fb!r}; compare without --disagreements.")


def compare_outputs(mine: Any, theirs: Any, n: int, spec: Any = None,
                    measure: str = TV) -> tuple[str, np.ndarray, np.ndarray]:
    """Two :class:`~rlviz.agent.policy.PolicyOutput` on the same ``n`` states: (measure, tv float [n], differ bool [n]).
    ``tv``: :func:`~rlviz.evaluate.statistics.distance.disagreement`'s numbers (NaN where no measure applies, the
    ``measure`` given then kept); ``differ``: the greedy actions differ (Box: ``tv >= BOX_DIFFER_TV``, or
    ``BOX_DIFFER_GAP`` for the action gap). ``spec``: the action spec scaling the action gap."""
    found = disagreement(mine, theirs, spec)
    tv = np.full(n, np.nan) if found is None else found[1]
    measure = measure if found is None else found[0]
    ga, gb = greedy_actions(mine), greedy_actions(theirs)
    differ = (ga != gb).any(axis=1) if ga is not None and gb is not None else \
        tv >= (BOX_DIFFER_GAP if measure == ACTION_GAP else BOX_DIFFER_TV)
    return measure, tv, differ


_FIELDS = ("logits", "probs", "value", "mean", "std")


class _Outputs:
    """PolicyOutput rows kept in growing arrays, a row per distinct observation (or per waiting state)."""

    def __init__(self) -> None:
        self.template: Any = None
        self.arrays: dict[str, np.ndarray] = {}
        self.n = 0

    def add(self, out: Any, index: Any = slice(None)) -> np.ndarray:
        """Append ``out``'s rows ``index``; their row numbers here."""
        if self.template is None:
            self.template = out
        rows = {k: np.asarray(getattr(out, k))[index] for k in _FIELDS if getattr(out, k) is not None}
        m = len(next(iter(rows.values())))
        for k, v in rows.items():
            have = self.arrays.get(k)
            if have is None or have.shape[0] < self.n + m:
                grown = np.zeros((max(256, 2 * (self.n + m)), *v.shape[1:]), v.dtype)
                if have is not None:
                    grown[: self.n] = have[: self.n]
                self.arrays[k] = grown
            self.arrays[k][self.n : self.n + m] = v
        self.n += m
        return np.arange(self.n - m, self.n)

    def take(self, idx: np.ndarray) -> Any:
        """A PolicyOutput of the rows ``idx``."""
        kw = {k: (self.arrays[k][idx] if k in self.arrays else None) for k in _FIELDS}
        return replace(self.template, quantiles=None, **kw)


class DisagreementProbe:
    """The probe of ``side``'s rollout asking ``other`` (a Policy) on its states. ``extractor``: the rollout's
    object extractor (with the heatmap on) for the disagreement heatmap, or None (extractors that remember earlier
    frames, ``history``, are left out: these states are looked at alone). After the rollout and :meth:`finish`,
    ``episodes`` holds an :class:`EpisodeDisagreement` per episode index, ``heatmap`` the disagreement heatmap (or
    None) and ``forwarded`` the observations the other agent was asked on.

    Each running episode writes its states into a row of per-state columns (``cols``); an episode that ends keeps
    its row until its last waiting state is written (an episode's end does not force a forward), then becomes an
    :class:`EpisodeDisagreement` and its row is reused. Waiting states sit in step-sized chunks of arrays."""

    def __init__(self, other: Any, side: str, extractor: Any = None):
        self.other, self.side, self.extractor = other, side, extractor
        #: a recurrent ``other``: its state row per column row (running episode), run along the episode's states
        self.memory: dict[int, Any] | None = {} if capabilities_of(other).recurrent else None
        self.episodes: dict[int, EpisodeDisagreement] = {}
        self.heatmap: FailureHeatmap | None = None
        self.forwarded = 0
        self.measure = TV  # what ``tv`` holds: TV, or ACTION_GAP for deterministic actors (rlviz.evaluate.statistics.distance)
        self.cols: dict[str, np.ndarray] = {}  # name -> [rows, capacity]
        self.pos = np.zeros(0, np.int64)  # per row: states written so far
        self.pending = np.zeros(0, np.int64)  # per row: states waiting for the other agent's output
        self.row_of: np.ndarray = np.zeros(0, np.int64)  # per slot: the row of its running episode (-1: none yet)
        self.free: list[int] = []  # rows free for the next episode
        self.ended: dict[int, tuple[int, int, int]] = {}  # row -> (episode index, seed, length): ended, waiting
        self.known: dict[bytes, int] = {}  # observation digest -> row of self.theirs
        self.theirs = _Outputs()  # the other agent's output per distinct observation
        self.new: dict[bytes, np.ndarray] = {}  # digests waiting for a forward -> their observation
        self.mine = _Outputs()  # the playing agent's output of each waiting state
        # waiting states, a chunk per step: (row, position, row of mine, row of theirs or -1, digests, captures)
        self.waiting: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list, list | None]] = []
        self.num_waiting = 0
        self.unknown = 0  # waiting states left by the last resolve (their observations not asked yet)
        self.flush_rows = 0

    def _rows_for(self, slots: np.ndarray, count: int) -> np.ndarray:
        """The column rows of the running episodes on ``slots`` (``count`` slots in all), new episodes given one."""
        if self.row_of.shape[0] < count:
            self.row_of = np.concatenate([self.row_of, np.full(count - self.row_of.shape[0], -1, np.int64)])
        rows = self.row_of[slots]
        for j in np.flatnonzero(rows < 0).tolist():
            rows[j] = self.row_of[slots[j]] = self._new_row()
            if self.memory is not None:
                self.memory[int(rows[j])] = start_state(self.other)
        return rows

    def _new_row(self) -> int:
        if self.free:
            return self.free.pop()
        n = self.pos.shape[0]
        self.pos, self.pending = np.append(self.pos, 0), np.append(self.pending, 0)
        self._grow(n + 1, 0)
        return n

    def _grow(self, rows: int, need: int) -> None:
        """Room for ``rows`` rows of ``need`` states each."""
        have = self.cols["tv"].shape if self.cols else (0, 0)
        if have[0] >= rows and have[1] >= need:
            return
        n = have[0] if have[0] >= rows else max(rows, 2 * have[0], 16)
        cap = have[1] if have[1] >= need else max(256, 2 * have[1], need)
        dtypes = {"tv": np.float32, "own": np.float32, "other": np.float32, "differ": bool}
        grown = {k: np.zeros((n, cap), dt) for k, dt in dtypes.items()}
        for k, old in self.cols.items():
            grown[k][: old.shape[0], : old.shape[1]] = old
        self.cols = grown

    def observe(self, obs: np.ndarray, rows: np.ndarray, out: Any, slots: list, envs: list) -> None:
        """One step: ``obs`` the playing agent's padded input [used, *obs], ``rows`` [B] the active ones, ``out`` its
        PolicyOutput on them; ``slots`` the running episodes and ``envs`` the envs, a row each."""
        if not self.flush_rows:
            self.flush_rows = FLUSH_CHUNKS * int(self.other.rows_for(obs.shape[1:]))
        rows = np.asarray(rows, np.intp)
        r = self._rows_for(rows, len(slots))
        at = self.pos[r]
        self._grow(self.pos.shape[0], int(at.max()) + 1)
        self.pos[r] = at + 1
        self.pending[r] += 1
        self.cols["own"][r, at] = np.nan if out.value is None else out.value
        mine = self.mine.add(out)
        if self.memory is not None:  # asked now, its memory carried: the outputs depend on the episode so far
            self._ask_with_memory(obs, rows, r, mine, slots, envs)
            return
        keys = [hashlib.blake2b(obs[i].tobytes(), digest_size=16).digest() for i in rows.tolist()]
        known, new = self.known, self.new
        theirs = np.array([known.get(k, -1) for k in keys], np.int64)
        for j in np.flatnonzero(theirs < 0).tolist():
            if keys[j] not in new:
                new[keys[j]] = obs[rows[j]].copy()
        caps = None if self.extractor is None else [self._capture(slots[i], envs[i]) for i in rows.tolist()]
        self.waiting.append((r, at, mine, theirs, keys, caps))
        self.num_waiting += len(keys)
        if len(self.new) >= self.flush_rows:
            self.flush()
        elif self.num_waiting >= self.unknown + self.flush_rows:
            self._resolve()  # the states whose observations are known already

    def _ask_with_memory(self, obs: np.ndarray, rows: np.ndarray, r: np.ndarray, mine: np.ndarray, slots: list,
                         envs: list) -> None:
        """A recurrent other agent stepped on this step's states with each episode's memory of it (batch-invariant
        steps: the numbers do not depend on the episodes beside it), its states written at once."""
        memory = self.memory if self.memory is not None else {}
        out, new = policy_step(self.other, obs[rows], [memory[int(k)] for k in r.tolist()],
                               [envs[i] for i in rows.tolist()])
        for k, state in zip(r.tolist(), new):
            memory[int(k)] = state
        self.forwarded += len(rows)
        theirs = self.theirs.add(out)
        caps = None if self.extractor is None else [self._capture(slots[i], envs[i]) for i in rows.tolist()]
        self.waiting.append((r, self.pos[r] - 1, mine, theirs, [b""] * len(rows), caps))
        self.num_waiting += len(rows)
        self._resolve()
        self.theirs = _Outputs()  # every state written: none of these rows is asked for again

    def _capture(self, ep: Any, env: Any) -> Any:
        if self.extractor.needs_frame:
            return self.extractor.capture(to_rgb_frame(env.render()), env)
        recent = getattr(ep, "recent", None)  # exact extractors capture every step: this state's
        return recent[-1] if recent else None

    def flush(self) -> None:
        """Ask the other agent on the waiting observations (whole chunks) and write every waiting state."""
        if self.new:
            keys = list(self.new)
            out = self.other.evaluate(np.stack([self.new[k] for k in keys]))
            self.known.update(zip(keys, self.theirs.add(out).tolist()))
            self.forwarded += len(keys)
            self.new.clear()
        self._resolve()

    def _resolve(self) -> None:
        """Write the waiting states whose observation the other agent has been asked on."""
        if not self.waiting:
            return
        r, at, mine, theirs = (np.concatenate([w[i] for w in self.waiting]) for i in range(4))
        keys = [k for w in self.waiting for k in w[4]]
        caps = None if self.extractor is None else [c for w in self.waiting for c in w[5]]  # type: ignore[union-attr]
        for j in np.flatnonzero(theirs < 0).tolist():
            theirs[j] = self.known.get(keys[j], -1)
        ready = theirs >= 0
        if not ready.any():
            self.waiting, self.unknown = [(r, at, mine, theirs, keys, caps)], self.num_waiting
            return
        ri, ai = r[ready], at[ready]
        mo, to = self.mine.take(mine[ready]), self.theirs.take(theirs[ready])
        measure, tv, differ = compare_outputs(mo, to, len(ri), getattr(self.other, "action_spec", None),
                                              self.measure)
        self.measure = measure
        c = self.cols
        c["tv"][ri, ai] = tv
        c["other"][ri, ai] = np.nan if to.value is None else to.value
        c["differ"][ri, ai] = differ
        if caps is not None:
            for j in np.flatnonzero(ready)[differ].tolist():
                if caps[j] is not None:
                    self._add(self.extractor.masks(caps[j]))
        np.subtract.at(self.pending, ri, 1)
        rest = np.flatnonzero(~ready)
        if rest.size:  # the waiting rows of mine, moved to a fresh store
            kept = _Outputs()
            kept.add(self.mine.take(mine[rest]))
            self.mine = kept
            self.waiting = [(r[rest], at[rest], np.arange(rest.size), theirs[rest], [keys[j] for j in rest.tolist()],
                             None if caps is None else [caps[j] for j in rest.tolist()])]
        else:
            self.mine, self.waiting = _Outputs(), []
        self.num_waiting = self.unknown = int(rest.size)
        for row in [row for row in self.ended if not self.pending[row]]:
            self._finalize(row)

    def _add(self, masks: dict) -> None:
        if not masks:
            return
        if self.heatmap is None:
            shape = np.shape(next(iter(masks.values())))
            self.heatmap = FailureHeatmap(shape[:2], tuple(self.extractor.names or masks), "")
        self.heatmap.add({k: v for k, v in masks.items() if k in self.heatmap.object_names})

    def end(self, slot: int, ep: Any) -> None:
        """Episode ``ep`` (an :class:`~rlviz.evaluate.rollouts.runner.EpisodeState`) on ``slot`` ended: it becomes an
        :class:`EpisodeDisagreement` once its waiting states are written (at the latest by :meth:`finish`)."""
        row = int(self.row_of[slot]) if slot < self.row_of.shape[0] else -1
        if row < 0:  # an episode without a state (none in gymnasium)
            self.episodes[int(ep.index)] = _episode(self.side, ep, {}, -1, 0)
            return
        self.row_of[slot] = -1
        if self.memory is not None:
            self.memory.pop(row, None)
        self.ended[row] = (int(ep.index), int(ep.seed) if ep.seed is not None else -1, int(self.pos[row]))
        if not self.pending[row]:
            self._finalize(row)

    def _finalize(self, row: int) -> None:
        index, seed, n = self.ended.pop(row)
        self.episodes[index] = _episode(self.side, (index, seed), self.cols, row, n)
        self.pos[row] = 0
        self.free.append(row)

    def finish(self) -> None:
        """After the rollout: the states still waiting asked and written, every episode's numbers in
        ``episodes``."""
        self.flush()


def _episode(side: str, ep: Any, cols: dict, row: int, n: int) -> EpisodeDisagreement:
    index, seed = ep if isinstance(ep, tuple) else (int(ep.index), int(ep.seed) if ep.seed is not None else -1)

    def take(k: str, dtype: Any) -> np.ndarray:
        return cols[k][row, :n].astype(dtype) if cols else np.zeros(0, dtype)

    return EpisodeDisagreement(side, int(index), int(seed), take("tv", np.float32), take("own", np.float32),
                               take("other", np.float32), take("differ", bool))
