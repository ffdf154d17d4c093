"""How one episode went: the one result type of rollouts, replays and recorded episodes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .display import table_html, video_html

__all__ = ["EpisodeResult"]


@dataclass(frozen=True)
class EpisodeResult:
    """One episode, reduced to scalars (no per-step arrays are kept).

    index:        the episode's index in its rollout (or in the recorder's lifetime); -1 when unknown
    seed:         the reset seed (also the action-sampling seed), or None for an unseeded episode
    ret:          sum of rewards (``episode_return``);  length: steps taken
    failures:     failure events (lost lives, terminations... see ``fail_on``)
    terminated, truncated: how it ended (both False when it was cut short)
    is_success:   the env's ``info["is_success"]`` at the end, when it reports one
    mean_entropy: mean relative policy entropy over the steps (NaN when not computed)
    greedy:       the actions were argmax, not sampled
    value_sums:   None without a value head, else float64 [6] = (n, sum v, sum g, sum v^2, sum g^2, sum v*g)
                  over the steps, v = value estimate, g = discounted return that came (with the rewards the
                  value was trained on: sign(r) when the recipe clips)
    video_path:   the MP4 when the episode was recorded, else None
    diag:         per-episode numbers of the diagnostics (:mod:`rlviz.evaluate.statistics.diagnostics`), or None
    attention:    with attention on, the episode's attribution shares per object (:mod:`rlviz.analysis.attention`)
    actions:      the actions the episode took, as the env took them ([T] int32 for Discrete actions, else
                  [T, *action_shape]), from rollouts and replays (None otherwise): its video replays the env from
                  them, without the policy (:func:`rlviz.record.play_actions`)
    """

    index: int
    seed: int | None
    ret: float
    length: int
    failures: int = 0
    terminated: bool = False
    truncated: bool = False
    is_success: bool | None = None
    mean_entropy: float = math.nan
    greedy: bool = False
    value_sums: tuple | None = None
    video_path: Path | None = None
    diag: dict | None = None
    attention: dict | None = None
    actions: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def episode_return(self) -> float:
        return self.ret

    @property
    def episode_id(self) -> int:
        return self.index

    def to_row(self) -> dict:
        """The episode as a row of ``episodes.csv``."""
        return {
            "episode": self.index,
            "seed": self.seed,
            "return": self.ret,
            "length": self.length,
            "failures": self.failures,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "is_success": "" if self.is_success is None else self.is_success,
            "mean_entropy": self.mean_entropy,
        }

    def _repr_html_(self) -> str:
        """Notebooks: the episode's numbers and, when it was recorded, its video playing in the cell."""
        rows: list[tuple[str, object]] = [("episode", self.index), ("seed", self.seed), ("return", self.ret), ("length", self.length),
                ("failures", self.failures), ("terminated", self.terminated), ("truncated", self.truncated)]
        if not math.isnan(self.mean_entropy):
            rows.append(("mean relative entropy", self.mean_entropy))
        video = "" if self.video_path is None else video_html(self.video_path)
        return f"<div class='rlviz-episode'>{video}{table_html(rows)}</div>"
