"""A batch's per-step outputs folded into its episodes' results, on the host: the chunks' outputs packed episode
by episode (:func:`pack_chunks`: only the steps taken, not the batch's idle lanes), then each episode's
:class:`~rlviz.episode.EpisodeResult` (return, length, terminated / truncated, failures, mean relative entropy,
value-vs-return sums, diagnostics) and its failures on the heatmap, the whole batch at once (:func:`fold_batch`:
numpy over the packed steps; Python loops only per step index, per episode's result and per failure).

The same numbers as the gymnasium path's per-episode fold, in float64: a return is the running sum of the episode's
rewards in step order (as ``np.add.accumulate`` sums them), the returns-to-go :func:`~rlviz.episode.trace.returns_to_go`'s
recursion run on all episodes at once (the same operations per element), the value sums
:func:`~rlviz.evaluate.rollouts.runner.value_moments` per episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..episode.result import EpisodeResult
from ..evaluate.failures.heatmap import FailureHeatmap
from ..evaluate.rollouts.runner import value_moments
from ..evaluate.statistics.batch_diagnostics import batch_diagnostics

__all__ = ["pack_chunks", "FoldSpec", "fold_batch", "add_failures"]


def pack_chunks(parts: list, count: int, chunk: int) -> tuple[dict, np.ndarray]:
    """The steps of episodes 0..count-1 from the chunks' outputs ``parts`` ([(outputs numpy [chunk, columns] per
    output, the episode each column runs: int [columns])], in step order; a column of an episode >= count, or
    repeating the column before it, is padding): (outputs [S, ...] per output, episode by episode and each one's
    steps in order; lengths int64 [count]). An episode's steps are its rows where ``alive``."""
    columns, alive_of = [], []
    lengths = np.zeros(count, np.int64)
    for ys, lanes in parts:
        lanes = np.asarray(lanes)
        cols = np.flatnonzero((lanes < count) & np.r_[True, lanes[1:] != lanes[:-1]])  # each episode's first column
        alive = np.asarray(ys["alive"])[:, cols].astype(bool)
        lengths[lanes[cols]] += np.count_nonzero(alive, axis=0)
        columns.append(cols)
        alive_of.append(alive)
    starts = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    out = {k: np.empty((total, *np.shape(v)[2:]), np.asarray(v).dtype) for k, v in parts[0][0].items()}
    for c, ((ys, lanes), cols, alive) in enumerate(zip(parts, columns, alive_of)):
        rows, k = np.nonzero(alive)
        col = cols[k]
        at = starts[np.asarray(lanes)[col]] + c * chunk + rows
        for name, y in ys.items():
            out[name][at] = np.asarray(y)[rows, col]
    return out, lengths


@dataclass(frozen=True)
class FoldSpec:
    """How a batch's episodes are folded: the policy's ``kind`` (``q``: values always kept), whether it acted
    ``greedy``, the discount ``gamma`` of the value statistics, and the env's ``num_actions`` (1: continuous)."""

    kind: str
    greedy: bool
    gamma: float
    num_actions: int


def fold_batch(ys: dict, lengths: np.ndarray, indices: np.ndarray, seeds: np.ndarray, spec: FoldSpec,
               hm: FailureHeatmap | None = None) -> list[EpisodeResult]:
    """The results of episodes ``indices`` (int [B]), seeded ``seeds`` (uint32 [B]), whose steps ``ys`` holds end to
    end as :func:`pack_chunks` packs them (``lengths`` int [B] steps each), folded as ``spec`` says; ``hm``: gets
    their failures, episode by episode, each one's in step order."""
    kind, greedy, gamma, num_actions = spec.kind, spec.greedy, spec.gamma, spec.num_actions
    lengths = np.asarray(lengths, np.int64)
    width = len(lengths)
    starts = np.cumsum(lengths) - lengths
    last = np.maximum(starts + lengths - 1, 0)
    ended = lengths > 0
    rewards = np.asarray(ys["reward"]).astype(np.float64)
    ent = np.asarray(ys["entropy"])
    returns, ent_sums = _running_sums(rewards, ent.astype(np.float64), starts, lengths)
    terminated = np.asarray(ys["terminated"])[last] & ended if len(rewards) else np.zeros(width, bool)
    truncated = np.asarray(ys["truncated"])[last] & ended if len(rewards) else np.zeros(width, bool)
    values = np.asarray(ys["value"])
    episode = np.repeat(np.arange(width), lengths)
    has_value = ended & ((kind == "q") | (np.bincount(episode[~np.isnan(values)], minlength=width) > 0))
    togo = _returns_to_go(rewards, starts, lengths, gamma) if has_value.any() else None
    keys = (np.asarray(ys["key1"]).astype(np.uint64) << np.uint64(32)) | np.asarray(ys["key2"]).astype(np.uint64)
    diags = batch_diagnostics(lengths, keys, np.asarray(ys["index"]), ent, rewards, np.asarray(ys["bad"]),
                              num_actions)
    failed = np.asarray(ys["failed"]).astype(bool)
    if hm is not None:
        at = np.flatnonzero(failed)  # episode by episode, each one's failures in step order
        add_failures(hm, np.asarray(ys["objects"])[at], np.asarray(indices, np.int64)[episode[at]])
    failures = np.bincount(episode[failed], minlength=width)
    finite = False
    if togo is not None:
        values = values.astype(np.float64)
        kept = has_value[episode]
        finite = bool(np.isfinite(values[kept]).all() and np.isfinite(togo[kept]).all())
    out = []
    for b in range(width):
        n, s = int(lengths[b]), int(starts[b])
        vs = value_moments(n, values[s:s + n], togo[s:s + n], finite) if togo is not None and has_value[b] else None
        out.append(EpisodeResult(int(indices[b]), int(seeds[b]), float(returns[b]) if n else 0.0, n,
                                 int(failures[b]), bool(terminated[b]), bool(truncated[b]), None,
                                 float(ent_sums[b]) / max(n, 1), bool(greedy), vs, diag=diags[b]))
    return out


def _by_length(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order: the episodes longest first, their starts, running[t]: how many of them take a step t) -- the episodes
    taking step t are the first running[t] of the order."""
    order = np.argsort(-lengths, kind="stable")
    longest = int(lengths.max()) if len(lengths) else 0
    running = np.searchsorted(-lengths[order], -np.arange(longest), side="left")
    return order, starts[order], running


def _running_sums(rewards: np.ndarray, entropies: np.ndarray, starts: np.ndarray,
                  lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each episode's return: its rewards summed in step order from the first, as ``np.add.accumulate``;
    0.0 + its entropies summed in step order), float64 [B] each."""
    order, first, running = _by_length(starts, lengths)
    sums = np.zeros((2, len(order)), np.float64)
    if len(running):
        k = int(running[0])
        sums[0, :k] = rewards[first[:k]]
        sums[1, :k] += entropies[first[:k]]
        both = np.stack([rewards, entropies])
        for t in range(1, len(running)):
            k = int(running[t])
            sums[:, :k] += both[:, first[:k] + t]
    out = np.empty_like(sums)
    out[:, order] = sums
    return out[0], out[1]


def _returns_to_go(rewards: np.ndarray, starts: np.ndarray, lengths: np.ndarray, gamma: float) -> np.ndarray:
    """float64 [S]: :func:`~rlviz.episode.trace.returns_to_go` of each episode's rewards (bootstrap 0.0), laid out
    as the rewards are: g[t] = r[t] + gamma * g[t + 1], from the episode's last step back."""
    order, first, running = _by_length(starts, lengths)
    out = np.empty(len(rewards), np.float64)
    after = np.zeros(len(order), np.float64)
    for t in range(len(running) - 1, -1, -1):
        k = int(running[t])
        at = first[:k] + t
        after[:k] = rewards[at] + gamma * after[:k]
        out[at] = after[:k]
    return out


def add_failures(hm: FailureHeatmap, positions: np.ndarray, episodes: np.ndarray) -> None:
    """Failures on the heatmap, in order: failure ``f`` of episode ``episodes[f]`` with the objects at
    ``positions[f]`` (float [F, objects, 2]: (x, y) in the grid's cells). Each object covers one pixel of the grid,
    the cell of its (x, y) (off the grid or not finite: none): what :meth:`FailureHeatmap.add` does with a mask of one
    pixel per object (its counts, its contributions as runs of flat indices), without building the masks."""
    h, w = hm.frame_shape
    xy = np.floor(np.asarray(positions, np.float64).reshape(len(episodes), len(hm.object_names), 2))
    with np.errstate(invalid="ignore"):
        on = np.isfinite(xy).all(axis=-1) & (xy[..., 0] >= 0) & (xy[..., 0] < w) & (xy[..., 1] >= 0) & \
            (xy[..., 1] < h)
    f, i = np.nonzero(on)  # failure by failure, each one's objects in order
    rows, cols = xy[f, i, 1].astype(np.int64), xy[f, i, 0].astype(np.int64)
    for k, name in enumerate(hm.object_names):
        np.add.at(hm.counts[name], (rows[i == k], cols[i == k]), 1)
    cells = rows * w + cols
    runs = np.stack([cells, np.ones_like(cells)], axis=-1).astype(np.int32)
    hm.contributions.extend((e, o, runs[j:j + 1]) for j, (e, o) in
                            enumerate(zip(np.asarray(episodes)[f].tolist(), i.tolist())))
    hm.failures += len(episodes)
