"""The diagnostics of many episodes at once: :class:`~rlviz.evaluate.statistics.diagnostics.EpisodeDiagnostics`'s
per-episode numbers (its :meth:`~EpisodeDiagnostics.finish` dicts) from the steps of a batch of episodes laid end to
end, one numpy pass over them instead of one :meth:`~EpisodeDiagnostics.fold` per episode (the JAX engine's batches
of 1000 episodes).

The same numbers as folding each episode's steps in one :meth:`~EpisodeDiagnostics.fold` call: the counts are the
same comparisons, counted per episode; the loop detection runs per episode, only on the episodes whose observations'
keys may repeat (the others start no run, as :meth:`~EpisodeDiagnostics.fold` finds by itself).
"""

from __future__ import annotations

import numpy as np

from .diagnostics import THRESHOLDS, EpisodeDiagnostics

__all__ = ["batch_diagnostics"]


def batch_diagnostics(lengths: np.ndarray, keys: np.ndarray, actions: np.ndarray, entropies: np.ndarray,
                      rewards: np.ndarray, bad: np.ndarray, num_actions: int) -> list[dict]:
    """The :meth:`EpisodeDiagnostics.finish` dict of each of B episodes whose S steps lie end to end: episode ``b``
    is ``lengths[b]`` steps, after episode ``b - 1``'s.

    lengths: int [B] (summing to S); keys: uint64 [S] (:func:`~rlviz.evaluate.statistics.diagnostics.obs_keys` of
    the observations the actions were chosen on); actions: int [S] (the Discrete action, -1 for other kinds);
    entropies: relative entropies [S]; rewards: [S]; bad: bool [S] (non-finite internals)."""
    lengths = np.asarray(lengths, np.int64)
    width = len(lengths)
    starts = np.cumsum(lengths) - lengths
    episode = np.repeat(np.arange(width), lengths)
    bad = np.asarray(bad, bool)
    low = (np.asarray(entropies, np.float64) < THRESHOLDS["collapsed_entropy"]) & ~bad
    r = np.asarray(rewards)
    size = max(int(num_actions), 1)
    a = np.asarray(actions).astype(np.int64)
    valid = (a >= 0) & (a < size)
    counts = np.bincount(episode[valid] * size + a[valid], minlength=width * size).reshape(width, size)

    def per_episode(mask: np.ndarray) -> np.ndarray:
        return np.bincount(episode[mask], minlength=width)

    low_n, pos, neg, nonfinite = per_episode(low), per_episode(r > 0), per_episode(r < 0), per_episode(bad)
    first_bad = np.zeros(width, np.int64)
    bad_at = np.flatnonzero(bad)
    if len(bad_at):
        eps, first = np.unique(episode[bad_at], return_index=True)  # steps are in order: an episode's first
        first_bad[eps] = bad_at[first] - starts[eps]
    keys = np.asarray(keys, np.uint64)
    repeated = _repeated(keys, episode)
    out = []
    for b in range(width):
        n = int(lengths[b])
        loop_steps = loop_period = 0
        if b in repeated:
            diag = EpisodeDiagnostics(size)
            diag.fold(keys[starts[b]:starts[b] + n], np.full(n, -1), np.ones(n), np.zeros(n))
            loop_steps, loop_period = diag.loop_steps, diag.loop_period
        out.append({"steps": n, "nonfinite_steps": int(nonfinite[b]),
                    "first_nonfinite_step": int(first_bad[b]) if nonfinite[b] else None,
                    "low_entropy_steps": int(low_n[b]), "action_counts": counts[b].tolist(),
                    "positive_rewards": int(pos[b]), "negative_rewards": int(neg[b]),
                    "loop_steps": loop_steps, "loop_period": loop_period})
    return out


def _repeated(keys: np.ndarray, episode: np.ndarray) -> set[int]:
    """The episodes in which some key may occur twice: each (episode, key) pair mixed into one uint64 (equal pairs,
    equal numbers), sorted once; a rare collision of two different pairs only names an episode whose loops are then
    looked for (and not found) by :meth:`EpisodeDiagnostics.fold`."""
    mixed = keys ^ (episode.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    ordered = np.sort(mixed)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    return set(episode[np.isin(mixed, twice)].tolist()) if len(twice) else set()
