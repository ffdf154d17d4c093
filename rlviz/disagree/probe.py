"""Each agent's states given to the other agent too, during compare's rollouts: per state, how far apart the two
action distributions are and what each agent's value head says.

:class:`DisagreementProbe` is the rollout's probe (:attr:`rlviz.evaluate.runner.Runner.probe`): after each
decision of the playing agent, one batched forward of the other agent on the same input rows (the playing agent's
whole padded input: :meth:`~rlviz.agent.policy.Policy.evaluate` forwards fixed-size chunks, so the numbers do not
depend on how many envs share the batch); its per-slot columns are written with numpy per step (no per-env
Python) and cut into one :class:`EpisodeDisagreement` per episode when it ends. With an object extractor that
reads no frames (the rollout's heatmap on: MinAtar, classic control, ALE colour extractors; one that reads
frames gets those states rendered), the objects of every state where the two agents' greedy actions differ go into a :class:`~rlviz.evaluate.heatmap.FailureHeatmap` (an
"event" is such a state): where on the screen they disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..agent.stepping import plain
from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..evaluate.distance import action_distance, greedy_actions
from ..evaluate.heatmap import FailureHeatmap
from ..evaluate.lockstep import _rows

__all__ = ["EpisodeDisagreement", "DisagreementProbe", "check_probe_policies", "BOX_DIFFER_TV"]

#: Box actions have no greedy action to compare: a state counts as one where they choose differently from this TV
#: (the Pinsker bound of the Gaussians' distance) on.
BOX_DIFFER_TV = 0.5


@dataclass(frozen=True)
class EpisodeDisagreement:
    """Episode ``index`` (seed ``seed``) played by agent ``side`` ("a" or "b"), the other agent asked on each of
    its T states (T = the episode's length; state t is the observation action t was chosen on).

    tv:          float32 [T]  total-variation distance of the two action distributions (0: the same, 1: disjoint;
                 Box: the Pinsker bound); NaN where the other agent has no distribution (a deterministic actor)
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


class DisagreementProbe:
    """The probe of ``side``'s rollout asking ``other`` (a Policy) on its states. ``extractor``: the rollout's
    object extractor (with the heatmap on) for the disagreement heatmap, or None (extractors that remember earlier
    frames, ``history``, are left out: these states are rendered alone). After the rollout,
    ``episodes`` holds an :class:`EpisodeDisagreement` per episode index and ``heatmap`` the disagreement heatmap
    (or None)."""

    def __init__(self, other: Any, side: str, extractor: Any = None):
        self.other, self.side, self.extractor = other, side, extractor
        self.episodes: dict[int, EpisodeDisagreement] = {}
        self.heatmap: FailureHeatmap | None = None
        self.cols: dict[str, np.ndarray] = {}  # name -> [slots, capacity]
        self.pos: np.ndarray = np.zeros(0, np.int64)  # per slot: states written this episode

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
        theirs = self.other.evaluate(obs)
        theirs = _rows(theirs, rows)
        dist = action_distance(out, theirs)
        tv = np.full(len(rows), np.nan) if dist is None else dist[0]
        mine, other = greedy_actions(out), greedy_actions(theirs)
        differ = (mine != other).any(axis=1) if mine is not None and other is not None else tv >= BOX_DIFFER_TV
        self._ensure(len(slots), 0)
        at = self.pos[rows]
        self._ensure(len(slots), int(at.max()) + 1)
        c = self.cols
        c["tv"][rows, at] = tv
        c["own"][rows, at] = np.nan if out.value is None else out.value
        c["other"][rows, at] = np.nan if theirs.value is None else theirs.value
        c["differ"][rows, at] = differ
        self.pos[rows] = at + 1
        if self.extractor is not None and differ.any():
            for i in rows[differ]:
                recent = getattr(slots[i], "recent", None)
                if self.extractor.needs_frame:  # rendered for these states only
                    self._add(self.extractor(to_rgb_frame(envs[i].render()), envs[i]))
                elif recent:  # the capture of this state (exact extractors capture every step)
                    self._add(self.extractor.masks(recent[-1]))

    def _add(self, masks: dict) -> None:
        if not masks:
            return
        if self.heatmap is None:
            shape = np.shape(next(iter(masks.values())))
            names = tuple(self.extractor.names or masks)
            self.heatmap = FailureHeatmap(shape[:2], names, "")
        self.heatmap.add({k: v for k, v in masks.items() if k in self.heatmap.object_names})

    def end(self, slot: int, ep: Any) -> None:
        """Episode ``ep`` (an :class:`~rlviz.evaluate.runner.EpisodeState`) on ``slot`` ended: its columns become
        an :class:`EpisodeDisagreement`."""
        n = int(self.pos[slot]) if slot < len(self.pos) else 0
        c = self.cols
        take = (lambda k: c[k][slot, :n].copy()) if c else (lambda k: np.zeros(0))
        self.episodes[int(ep.index)] = EpisodeDisagreement(
            self.side, int(ep.index), int(ep.seed) if ep.seed is not None else -1, take("tv").astype(np.float32),
            take("own").astype(np.float32), take("other").astype(np.float32), take("differ").astype(bool))
        if slot < len(self.pos):
            self.pos[slot] = 0

