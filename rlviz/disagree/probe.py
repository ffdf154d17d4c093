"""Each agent's states given to the other agent too, during compare's rollouts: per state, how far apart the two
action distributions are and what each agent's value head says.

:class:`DisagreementProbe` is the rollout's probe (``probe`` of :class:`rlviz.evaluate.runner.Runner`). The other agent is
asked once per distinct observation: states repeat a lot (MinAtar Breakout: 3,952 distinct observations in 32,452
steps of 200 episodes), so its outputs are kept by the observation's digest (BLAKE2b, 128 bits) and the new
observations wait until there are enough to fill whole forward chunks (``16 x rows_for(obs)``) or an episode with
states still waiting ends; they are then evaluated together (:meth:`~rlviz.agent.policy.Policy.evaluate`: fixed-size
chunks, so a row's numbers are the same whatever else is in the batch, and a kept output is what a fresh forward
gives). Results are written into per-slot columns with numpy and cut into one :class:`EpisodeDisagreement` per
episode when it ends.

With an object extractor (the rollout's heatmap on), the objects of every state where the two agents' greedy actions
differ go into a :class:`~rlviz.evaluate.heatmap.FailureHeatmap` (an "event" is such a state): where on the screen
they disagree. Exact extractors' captures of the step are used (MinAtar, classic control, ALE colours); extractors
that read frames get the waiting states rendered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..agent.stepping import plain
from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..evaluate.distance import action_distance, greedy_actions
from ..evaluate.heatmap import FailureHeatmap

__all__ = ["EpisodeDisagreement", "DisagreementProbe", "check_probe_policies", "BOX_DIFFER_TV"]

#: Box actions have no greedy action to compare: a state counts as one where they choose differently from this TV
#: (the Pinsker bound of the Gaussians' distance) on.
BOX_DIFFER_TV = 0.5
#: Forward chunks of new observations evaluated together.
FLUSH_CHUNKS = 16


@dataclass(frozen=True)
class EpisodeDisagreement:
    """Episode ``index`` (seed ``seed``) played by agent ``side`` ("a" or "b"), the other agent asked on each of
    its T states (T = the episode's length; state t is the observation action t was chosen on).

    tv:          float32 [T]  total-variation distance of the two action distributions (0: the same, 1: disjoint;
                 Box: the Pinsker bound); NaN where an agent has no distribution (a deterministic actor)
    own_value:   float32 [T]  the playing agent's value there (NaN without a value head)
    other_value: float32 [T]  the other agent's value there
    differ:      bool [T]     the greedy actions differ (Box: ``tv >= BOX_DIFFER_TV``)
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
    """A usage error unless ``other`` can be asked on ``own``'s states: both stateless and unmasked (a recurrent
    policy's distribution depends on its history, a masked one's on the env), the same observation format."""
    for p in (own, other):
        if not plain(p):
            raise UsageError(f"disagreements ask each agent on the other's states, but {type(p).__name__} carries a "
                             "state between steps or needs the env's action masks; compare without --disagreements.")
    fa, fb = getattr(own, "obs_format", "flat"), getattr(other, "obs_format", "flat")
    if fa != fb:
        raise UsageError(f"disagreements give one agent's inputs to the other, but they read observations as {fa!r} "
                         f"and {fb!r}; compare without --disagreements.")


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
    frames, ``history``, are left out: these states are looked at alone). After the rollout, ``episodes`` holds
    an :class:`EpisodeDisagreement` per episode index, ``heatmap`` the disagreement heatmap (or None) and
    ``forwarded`` the observations the other agent was asked on."""

    def __init__(self, other: Any, side: str, extractor: Any = None):
        self.other, self.side, self.extractor = other, side, extractor
        self.episodes: dict[int, EpisodeDisagreement] = {}
        self.heatmap: FailureHeatmap | None = None
        self.forwarded = 0
        self.cols: dict[str, np.ndarray] = {}  # name -> [slots, capacity]
        self.pos: np.ndarray = np.zeros(0, np.int64)  # per slot: states written this episode
        self.known: dict[bytes, int] = {}  # observation digest -> row of self.theirs
        self.theirs = _Outputs()  # the other agent's output per distinct observation
        self.new: dict[bytes, np.ndarray] = {}  # digests waiting for a forward -> their observation
        self.mine = _Outputs()  # the playing agent's output of each waiting state
        self.waiting: list[tuple[int, int, bytes, int, Any]] = []  # (slot, position, digest, row of mine, capture)
        self.flush_rows = 0

    def _ensure(self, slots: int, need: int) -> None:
        """Room for ``slots`` slots and ``need`` states each."""
        if self.pos.shape[0] < slots:
            self.pos = np.concatenate([self.pos, np.zeros(slots - self.pos.shape[0], np.int64)])
        have = self.cols["tv"].shape if self.cols else (0, 0)
        if have[0] >= slots and have[1] >= need:
            return
        n, cap = max(slots, have[0]), max(256, 2 * have[1], need)
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
        self._ensure(len(slots), 0)
        at = self.pos[rows]
        self._ensure(len(slots), int(at.max()) + 1)
        self.pos[rows] = at + 1
        self.cols["own"][rows, at] = np.nan if out.value is None else out.value
        mine = self.mine.add(out)
        for j, i in enumerate(rows.tolist()):
            key = hashlib.blake2b(obs[i].tobytes(), digest_size=16).digest()
            if key not in self.known and key not in self.new:
                self.new[key] = obs[i].copy()
            self.waiting.append((i, int(at[j]), key, int(mine[j]), self._capture(slots[i], envs[i])))
        if len(self.new) >= self.flush_rows:
            self.flush()
        elif len(self.waiting) >= self.flush_rows:
            self._resolve()  # the states whose observations are known already

    def _capture(self, ep: Any, env: Any) -> Any:
        if self.extractor is None:
            return None
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
        ready = [w for w in self.waiting if w[2] in self.known]
        if not ready:
            return
        self.waiting = [w for w in self.waiting if w[2] not in self.known]
        slot = np.array([w[0] for w in ready], np.intp)
        at = np.array([w[1] for w in ready], np.intp)
        mine = self.mine.take(np.array([w[3] for w in ready], np.intp))
        theirs = self.theirs.take(np.array([self.known[w[2]] for w in ready], np.intp))
        dist = action_distance(mine, theirs)
        tv = np.full(len(ready), np.nan) if dist is None else dist[0]
        ga, gb = greedy_actions(mine), greedy_actions(theirs)
        differ = (ga != gb).any(axis=1) if ga is not None and gb is not None else tv >= BOX_DIFFER_TV
        c = self.cols
        c["tv"][slot, at] = tv
        c["other"][slot, at] = np.nan if theirs.value is None else theirs.value
        c["differ"][slot, at] = differ
        if self.extractor is not None:
            for w in (w for w, d in zip(ready, differ) if d and w[4] is not None):
                self._add(self.extractor.masks(w[4]))
        if not self.waiting:
            self.mine = _Outputs()  # nothing refers to the kept rows any more

    def _add(self, masks: dict) -> None:
        if not masks:
            return
        if self.heatmap is None:
            shape = np.shape(next(iter(masks.values())))
            self.heatmap = FailureHeatmap(shape[:2], tuple(self.extractor.names or masks), "")
        self.heatmap.add({k: v for k, v in masks.items() if k in self.heatmap.object_names})

    def end(self, slot: int, ep: Any) -> None:
        """Episode ``ep`` (an :class:`~rlviz.evaluate.runner.EpisodeState`) on ``slot`` ended: its columns become
        an :class:`EpisodeDisagreement` (its waiting states are asked first)."""
        if any(w[0] == slot for w in self.waiting):
            self.flush()
        n = int(self.pos[slot]) if slot < len(self.pos) else 0
        c = self.cols

        def take(k: str, dtype: Any) -> np.ndarray:
            return c[k][slot, :n].astype(dtype) if c else np.zeros(0, dtype)

        self.episodes[int(ep.index)] = EpisodeDisagreement(
            self.side, int(ep.index), int(ep.seed) if ep.seed is not None else -1, take("tv", np.float32),
            take("own", np.float32), take("other", np.float32), take("differ", bool))
        if slot < len(self.pos):
            self.pos[slot] = 0
