"""The JAX engine's host-side fold of a whole batch (numpy only, no JAX): its per-episode numbers are exactly the
per-episode fold's (EpisodeDiagnostics.fold, np.add.accumulate, returns_to_go, value_sums), bit for bit, on
episodes of many lengths with looping observations, non-finite steps, NaN values and negative rewards."""

from __future__ import annotations

import numpy as np

from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.evaluate.rollouts.runner import value_sums
from rlviz.evaluate.statistics.batch_diagnostics import batch_diagnostics
from rlviz.evaluate.statistics.diagnostics import EpisodeDiagnostics
from rlviz.jax.fold import FoldSpec, fold_batch, pack_chunks


def _episodes(rng, count=40):
    """Per episode: (keys uint64, actions, entropies float32, rewards float32, values float32, bad bool)."""
    out = []
    for b in range(count):
        n = int(rng.choice([1, 2, 7, 8, 9, 63, 64, 65, 130, 300]))
        keys = rng.integers(0, 2**63, n, dtype=np.uint64)
        if b % 3 == 0 and n > 120:  # a loop: the same 5 observations over and over from step 10
            keys[10:] = np.resize(keys[10:15], n - 10)
        if b % 4 == 1 and n > 3:
            keys[n // 2] = keys[0]  # one repeat, no loop
        actions = rng.integers(-1, 4, n)
        ent = rng.random(n).astype(np.float32) * np.where(rng.random(n) < 0.3, 0.001, 1.0).astype(np.float32)
        rewards = rng.normal(size=n).astype(np.float32) * (rng.random(n) < 0.5)
        values = rng.normal(size=n).astype(np.float32)
        bad = rng.random(n) < (0.05 if b % 5 == 2 else 0.0)
        values[bad] = np.nan
        if b % 7 == 3:
            values[:] = np.nan
        out.append((keys, actions, ent, rewards, values, bad))
    return out


def test_batch_diagnostics_equal_the_per_episode_fold():
    eps = _episodes(np.random.default_rng(1))
    lengths = np.array([len(e[0]) for e in eps])
    flat = [np.concatenate([e[i] for e in eps]) for i in range(6)]
    got = batch_diagnostics(lengths, flat[0], flat[1], flat[2], flat[3].astype(np.float64), flat[5], 3)
    want = []
    for keys, actions, ent, rewards, _, bad in eps:
        d = EpisodeDiagnostics(3)
        d.fold(keys, actions, ent, rewards.astype(np.float64), np.flatnonzero(bad) if bad.any() else None)
        want.append(d.finish())
    assert got == want
    assert any(w["loop_steps"] >= 100 for w in want) and any(w["nonfinite_steps"] for w in want)


def test_fold_batch_equals_the_per_episode_fold_from_shuffled_chunks():
    rng = np.random.default_rng(2)
    eps = _episodes(rng)
    chunk, count = 32, len(eps)
    longest = max(len(e[0]) for e in eps)
    # chunks of a batch whose columns are episodes in a shuffled order, with a padding column repeating the last
    # one, and an episode past `count` (padding of the last batch): pack_chunks keeps only the steps taken
    order = rng.permutation(count)
    lanes = np.r_[order, order[-1], count]  # [..., last, last (repeat), count (past the batch)]
    parts = []
    for c in range(-(-longest // chunk)):
        rows = np.arange(c * chunk, (c + 1) * chunk)
        ys = {k: [] for k in ("alive", "reward", "value", "entropy", "index", "key1", "key2", "terminated",
                              "truncated", "failed", "bad", "objects")}
        for lane in lanes:
            keys, actions, ent, rewards, values, bad = eps[min(lane, count - 1)]
            n = len(keys)
            alive = rows < n
            at = np.minimum(rows, n - 1)
            ys["alive"].append(alive)
            ys["reward"].append(np.where(alive, rewards[at], 99.0).astype(np.float32))  # garbage after the end
            ys["value"].append(values[at])
            ys["entropy"].append(ent[at])
            ys["index"].append(actions[at].astype(np.int32))
            ys["key1"].append((keys[at] >> np.uint64(32)).astype(np.uint32))
            ys["key2"].append((keys[at] & np.uint64(0xFFFFFFFF)).astype(np.uint32))
            ys["terminated"].append(rows == n - 1)
            ys["truncated"].append(np.zeros(chunk, bool))
            ys["failed"].append(rewards[at] < -1.0)
            ys["bad"].append(bad[at])
            ys["objects"].append(_objects(at))
        parts.append(({k: np.stack(v, 1) for k, v in ys.items()}, lanes))
    packed, lengths = pack_chunks(parts, count, chunk)
    assert lengths.tolist() == [len(e[0]) for e in eps]
    hm = FailureHeatmap((10, 10), ("ball", "paddle"))
    spec = FoldSpec(kind="logits", greedy=False, gamma=0.9, num_actions=3)
    got = fold_batch(packed, lengths, np.arange(count) + 100, np.arange(count, dtype=np.uint32), spec, hm)
    failures, counts, contributions = 0, np.zeros((2, 10, 10), np.int64), []
    for b, (keys, _, ent, rewards, values, _) in enumerate(eps):
        r = got[b]
        n = len(keys)
        assert (r.index, r.seed, r.length, r.terminated, r.truncated) == (b + 100, b, n, True, False)
        assert r.ret == float(np.add.accumulate(rewards.astype(np.float64))[-1])
        assert r.mean_entropy == float(np.add.accumulate(np.r_[0.0, ent.astype(np.float64)])[-1]) / n
        assert r.value_sums == (None if np.isnan(values).all() else value_sums(rewards, values, 0.9))
        assert r.failures == int(np.count_nonzero(rewards < -1.0))
        failures += r.failures
        for t in np.flatnonzero(rewards < -1.0):
            for i, (x, y) in enumerate(_objects(np.array([t]))[0].astype(int)):
                if x >= 10:  # off the grid: on no pixel
                    continue
                counts[i, y, x] += 1
                contributions.append((b + 100, i, y * 10 + x))
    finite = dict(packed, value=np.nan_to_num(packed["value"]))  # no NaN value in the batch: the sums unmasked
    again = fold_batch(finite, lengths, np.arange(count), np.arange(count, dtype=np.uint32), spec)
    assert [r.value_sums for r in again] == [value_sums(e[3], np.nan_to_num(e[4]), 0.9) for e in eps]
    assert hm.failures == failures > 0
    assert [hm.counts["ball"].tolist(), hm.counts["paddle"].tolist()] == counts.tolist()
    assert [(e, i, runs.tolist()) for e, i, runs in hm.contributions] == [(e, i, [[f, 1]]) for e, i, f in contributions]


def _objects(steps):
    """float32 [len(steps), 2, 2]: a made-up ball and paddle (x, y) at each step (the ball off the 10x10 grid at
    x = 10, 11)."""
    return np.stack([np.stack([steps % 12, steps % 7], -1), np.stack([steps % 3, np.full(len(steps), 9)], -1)],
                    1).astype(np.float32)
