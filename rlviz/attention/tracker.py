"""The rollout's attention pass: every step's attribution share per object, in each episode's running sums.

:meth:`AttentionTracker.observe` runs once per lockstep step (:func:`rlviz.evaluate.rollouts.lockstep.run_lockstep`): the
active envs' states are captured by the object extractor (the heatmap's, a copy of its own: exact extractors read
the env's state, and then the heatmap's own capture of the step is used; extractors that need frames get
``env.render()`` on every step), and each step's attribution map comes

* with :data:`GRADIENT_FROM_FORWARD` (``"gradient"``, |gradient x input|), from the rollout's own forward of that
  step: the tracker forwards the lockstep's input buffer itself (:meth:`AttentionTracker.forward`, the same chunks
  of the policy's forward rows as :meth:`~rlviz.agent.policy.Policy.evaluate`, with gradients on), the loop decides
  on that output, and one backward of the taken actions' targets gives the maps: no second forward;
* otherwise (the default), from attribution passes of their own (:class:`~rlviz.attention.maps.AttributionProbe`:
  a fixed number of rows, so batch-invariant) over the pending steps whose (observation, action) has no map yet: a
  row's map depends on those alone, so small observations' maps are kept (:data:`CACHE_OBS_BYTES`) and a step seen
  before is not attributed again (MinAtar: ~90% of a 1000-episode rollout's steps).

When a pass is due, the pending steps' masks come in one batch (:meth:`~rlviz.evaluate.failures.extractor.Extractor.masks_many`)
and are pooled to observation pixels, and the steps' shares go to their episodes' :class:`EpisodeAttention` (whose
env steps, and failures, are known by then), a run of an episode's steps at once: the before-failure window's sums
and maps, and the per-step track the videos draw.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..agent.stepping import plain, start_state
from ..choices import DEFAULT_SALIENCY_METHOD
from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..explain.attribution import attribution_class
from ..explain.gradients import select_target
from .maps import BATCH_WAVES, AttributionProbe, pooling, stacked_fractions, step_shares

__all__ = ["AttentionSpec", "AttentionTracker", "EpisodeAttention", "GRADIENT_FROM_FORWARD"]

#: Gradient attention from the rollout's own forward of each step (True: no row forwarded twice), or from attribution
#: passes of its own over pending batches of steps (False: one forward + backward of
#: :data:`~rlviz.attention.maps.BATCH_WAVES` chunks per 16 steps of 16 envs). Measured on the shipped MinAtar agent
#: (CPU, 1 thread): the backward through 16 steps' small graphs and the forward with gradients cost more than one
#: batched pass of 256 rows (150-episode rollout with attention: 2.53 / 2.68 s min / median against 2.24 / 2.33 s;
#: 1.18 s without attention), so the batched pass stays the default. Both give the same numbers.
GRADIENT_FROM_FORWARD = False
#: Observations of at most this many bytes (MinAtar's 400) have their maps cached by (observation, action): a step
#: seen before is not attributed again. Larger ones (Atari's 28,224) rarely repeat: each is attributed.
CACHE_OBS_BYTES = 4096
#: The cache's size limit (keys and maps; MinAtar: ~80,000 entries); beyond it no new map is kept.
CACHE_BYTES = 64 << 20
#: With the cache on, steps pending for at most this many attribution passes' rows (their captures and rows): the
#: pass waits until its rows are full of misses.
PENDING_PASSES = 16
#: ... and within this many bytes of captures (a capture may be a frame).
PENDING_BYTES = 32 << 20


class AttentionSpec:
    """What the rollout's attention pass computes: ``method`` (a saliency method), ``target`` (as saliency's)."""

    def __init__(self, method: str = DEFAULT_SALIENCY_METHOD, target: str | int = "action"):
        self.method, self.target = str(method), target

    def __repr__(self) -> str:
        return f"AttentionSpec({self.method!r}, {self.target!r})"


class EpisodeAttention:
    """One episode's running sums; shares float64 [K + 1] per step (objects, then "other"). Steps arrive in order
    (:meth:`add`, when their attribution pass ran), failures as the steps that led to them (:meth:`failure`,
    always before that step's :meth:`add`)."""

    def __init__(self, names: tuple, hw: tuple[int, int], window: int):
        k = len(names) + 1
        self.names, self.window = names, window
        self.steps, self.total = 0, np.zeros(k, np.float64)
        self.area = np.zeros(k - 1, np.float64)  # the objects' summed cover of the observation (fraction of pixels)
        self.before_steps, self.before = 0, np.zeros(k, np.float64)
        self.seen, self.before_seen = np.zeros(k - 1, np.int64), np.zeros(k - 1, np.int64)  # steps it was visible
        self.map_before: np.ndarray | None = None
        self.hw = hw
        self.fail_steps: list = []
        self.recent: deque = deque(maxlen=window)  # (shares, map) of the steps not yet in a failure's window
        self.track: list = []  # each step's shares of the objects (the videos' share track)

    def failure(self, t: int) -> None:
        """Step ``t``'s action led to a failure."""
        self.fail_steps.append(int(t))

    def add(self, t: int, shares: np.ndarray, amap: np.ndarray, area: np.ndarray) -> None:
        """Step ``t``'s shares and map; a failure at ``t`` counts it and the steps before it in its window (those
        not already counted for an earlier failure)."""
        self.add_many(t, np.asarray(shares)[None], np.asarray(amap)[None], np.asarray(area)[None])

    def add_many(self, t0: int, shares: np.ndarray, maps: np.ndarray, area: np.ndarray) -> None:
        """Steps ``t0``, ``t0 + 1``, ... at once (shares [n, K + 1], maps [n, h, w], area [n, K]): the numbers of
        :meth:`add` for each in turn, the running sums added in the same order (``np.add.accumulate``)."""
        n = len(shares)
        self.track.append(shares[:, :-1])
        valid = ~np.isnan(shares[:, 0])
        vs, va = (shares, area) if valid.all() else (shares[valid], area[valid])
        if len(vs):
            self.steps += len(vs)
            self.total = np.add.accumulate(np.concatenate([self.total[None], vs]), axis=0)[-1]
            self.area = np.add.accumulate(np.concatenate([self.area[None], va]), axis=0)[-1]
            self.seen += (va > 0).sum(axis=0)
        pos = 0
        for t in sorted({f for f in self.fail_steps if t0 <= f < t0 + n}):
            j = t - t0
            lo = max(pos, j + 1 - self.window)
            keep = self.window - (j + 1 - lo)
            old = list(self.recent)[max(0, len(self.recent) - keep):] if keep > 0 else []
            for item in old + [_item(shares[r], maps[r], area[r]) for r in range(lo, j + 1)]:
                if item is not None:
                    self.before_steps += 1
                    self.before += item[0]
                    self.before_seen += item[2]
                    s = float(item[1].sum())
                    if s > 0:
                        if self.map_before is None:
                            self.map_before = np.zeros(self.hw, np.float64)
                        self.map_before += item[1] / s
            self.recent.clear()
            pos = j + 1
        self.recent.extend(_item(shares[r], maps[r], area[r]) for r in range(max(pos, n - self.window), n))

    def result(self) -> dict:
        """What ``EpisodeResult.attention`` holds: names, steps, total (sum of shares), before_steps, before,
        failures, map_before (float32 [h, w], the sum of the before-failure steps' maps each normalised to 1, or
        None without one), track (float32 [T, K]: each step's share per object, NaN where its map was all zero)."""
        return {"names": self.names, "steps": self.steps, "total": self.total, "area": self.area,
                "before_steps": self.before_steps, "seen": self.seen, "before_seen": self.before_seen,
                "before": self.before, "failures": len(self.fail_steps),
                "map_before": None if self.map_before is None else self.map_before.astype(np.float32),
                "track": (np.concatenate(self.track) if self.track else np.zeros((0, len(self.names)))
                          ).astype(np.float32).reshape(-1, len(self.names))}


def _nbytes(captured) -> int:
    """The bytes of one capture (an array, or a tuple or dict of them; other objects count as small)."""
    if isinstance(captured, np.ndarray):
        return captured.nbytes
    if isinstance(captured, (tuple, list)):
        return sum(_nbytes(c) for c in captured)
    if isinstance(captured, dict):
        return sum(_nbytes(c) for c in captured.values())
    return 64


def _item(shares: np.ndarray, amap: np.ndarray, area: np.ndarray):
    """A step waiting in :attr:`EpisodeAttention.recent`: (shares, map, visible), None when its map was all zero."""
    return None if np.isnan(shares[0]) else (shares, amap, area > 0)


class AttentionTracker:
    """The rollout's attention pass. ``begin`` (each episode start), ``forward`` (gradient attention: the lockstep's
    forward, with gradients), ``observe`` (each lockstep step: the step's maps, or its rows to attribute, and its
    masks join a pending batch, whose shares go to their episodes when it is full), ``attach`` (at the end: the last
    batch, then each result gets its episode's numbers)."""

    def __init__(self, spec: AttentionSpec, policy, extractor, window: int, waves: int = BATCH_WAVES):
        if extractor is None:
            raise UsageError("attention needs the heatmap's object masks; turn the heatmap on (--heatmap).")
        self.spec, self.policy, self.window, self.waves = spec, policy, max(1, int(window)), waves
        self.extractor = copy.deepcopy(extractor)  # its own per-env state (motion), apart from the heatmap's
        self.probe: Any = None  # an AttributionProbe from the first episode's observation
        self.pool: Any = None  # a Pooling from the first masks' frame size
        self.names: tuple = ()
        self.episodes: dict = {}  # episode index -> EpisodeAttention
        self.method = {"method": spec.method, "target": spec.target}
        #: gradient attention comes from the rollout's own forward (:meth:`forward`; a policy without state or masks)
        self.from_forward = GRADIENT_FROM_FORWARD and attribution_class(spec.method).from_forward and plain(policy)
        self.graph: list = []  # the current step's forward chunks: (x [rows, *obs] with grad, heads)
        # the pending rows (steps of envs): their episodes and steps, the extractor's captures, and where their maps
        # come from (an index into ``found``: maps known from the cache, or rows of the next attribution pass)
        self.who: list = []  # (EpisodeAttention, t) per row
        self.caps: list = []  # the extractor's capture per row
        self.src: list = []  # per row: its map's index in ``found``
        self.found: list = []  # float32 [h, w] maps, or None for the misses (filled by the pass)
        self.misses: dict = {}  # key (observation bytes, action) -> index in ``found``: the pass's rows
        self.targets: list = []  # gradient from the forward: each pending step's :meth:`_targets`
        #: maps already computed, by (observation bytes, action): a row's map depends on them alone (see
        #: :class:`~rlviz.attention.maps.AttributionProbe`), and small observations repeat (MinAtar: ~90% of
        #: a 1000-episode rollout's steps), so each distinct one is attributed once; None: off (large observations)
        self.cache: dict | None = None
        self.cache_bytes = 0
        self.miss_rows: list = []  # the misses' observations and actions, in ``misses``' order
        self.miss_acts: list = []
        self.limit = 0  # the rows pending at most (set by the first capture's size)
        #: the step's capture is the heatmap's (the runner's ``EpisodeState.recent[-1]``, taken of the same state by
        #: an equal extractor) when captures depend on the env's state alone: no frame, no memory of earlier ones
        self.share_captures = not self.extractor.needs_frame and not getattr(self.extractor, "history", 0)
        #: a recurrent policy: each running episode's state carried into its next step (id(EpisodeAttention) ->
        #: state row), from its start; the env slot holds the state after the step (the lockstep decides first)
        self.carried: dict = {}
        self.miss_states: list = []  # the misses' carried state rows (a recurrent policy)

    def begin(self, env, obs, index: int) -> EpisodeAttention:
        if self.probe is None:
            self.probe = AttributionProbe(self.policy, obs, self.spec.method, self.spec.target, self.waves)
            if not self.from_forward and np.asarray(obs).nbytes <= CACHE_OBS_BYTES and not self.probe.recurrent:
                self.cache = {}
        self.extractor.begin_episode(env)
        if self.share_captures:
            self.extractor.capture(None, env)  # (it sees each episode's first state itself: MinAtar's learns channels)
        if not self.names:
            self.names = tuple(self.extractor.names or self._masks(env))
        ep = self.episodes[index] = EpisodeAttention(self.names, self.probe.hw, self.window)
        if self.probe.recurrent:  # the state its first step is taken in
            self.carried[id(ep)] = start_state(self.policy)
        return ep

    def _masks(self, env) -> dict:
        x = self.extractor
        frame = to_rgb_frame(env.render()) if x.needs_frame else None
        masks = x.masks(x.capture(frame, env))
        if self.pool is None and masks:
            self.pool = pooling(np.shape(next(iter(masks.values())))[:2], self.probe.hw)
        return masks

    def forward(self, obs: np.ndarray) -> Any:
        """The lockstep's forward of its input buffer ``obs`` [N, *obs] with gradients on: the PolicyOutput it
        decides on (the numbers :meth:`~rlviz.agent.policy.Policy.evaluate` gives: the same chunks of the policy's
        forward rows, the last padded), its graph kept for :meth:`observe`."""
        policy = self.policy
        rows = policy.rows_for(obs.shape[1:])
        parts: dict = {}
        self.graph = []
        for at in range(0, obs.shape[0], rows):
            chunk = np.array(obs[at : at + rows])  # a copy: the buffer's rows change before the backward
            if chunk.shape[0] < rows:
                chunk = np.concatenate([chunk, np.repeat(chunk[:1], rows - chunk.shape[0], axis=0)])
            x = policy.to_tensor(chunk).detach().requires_grad_(True)
            with torch.enable_grad():
                h = policy.heads(x)
            policy.add_heads(dict(h), parts)
            self.graph.append((x, h))
        return policy.output_of(parts, obs.shape[0])

    def _targets(self, rows: np.ndarray, indices: np.ndarray) -> tuple:
        """The step's forward (its graph taken from :meth:`forward`) and what :meth:`_graph_maps` needs of it: (the
        chunks' inputs, logits and values, the active rows ``rows`` and their actions ``indices``)."""
        graph, self.graph = self.graph, []
        value = graph[0][1].get("value")
        return ([x for x, _ in graph], [h["logits"] for _, h in graph],
                None if value is None else [h["value"].reshape(-1) for _, h in graph], rows, indices)

    def _graph_maps(self, steps: list) -> np.ndarray:
        """float32 [B, h, w]: |gradient x input| of the pending steps' active rows (``steps``: each step's
        :meth:`_targets`, in order), from their own forwards' graphs: one backward for them all."""
        probe = self.probe
        xs = [x for step in steps for x in step[0]]
        size = xs[0].shape[0]
        # every step's rows as rows of one [sum of chunks x size] table: the targets are taken in one gather
        base = np.cumsum([0] + [len(step[0]) * size for step in steps])[:-1]
        where = torch.as_tensor(np.concatenate([b + step[3] for b, step in zip(base, steps)]), dtype=torch.long)
        with torch.enable_grad():
            logits = torch.cat([lg for step in steps for lg in step[1]])
            value = None if steps[0][2] is None else torch.cat([v for step in steps for v in step[2]])
            if probe.kind == "index":
                a = torch.full((logits.shape[0],), int(probe.index), dtype=torch.long)
            else:
                a = torch.zeros(logits.shape[0], dtype=torch.long)
                a[where] = torch.as_tensor(np.maximum(np.concatenate([step[4] for step in steps]), 0))
            total = select_target(probe.kind, logits, value, a.to(logits.device))[where.to(logits.device)].sum()
            grads = torch.autograd.grad(total, xs, allow_unused=True) if total.requires_grad else [None] * len(xs)
        g = torch.cat([torch.zeros_like(x) if gi is None else gi for x, gi in zip(xs, grads)])
        maps = probe.layout.reduce(g.abs() * torch.cat(xs).detach().abs(), "sum")[where.to(g.device)]
        return maps.float().cpu().numpy()

    def observe(self, buf: np.ndarray, rows: np.ndarray, indices: np.ndarray, envs: list, slots: list) -> None:
        """The step of the active envs ``rows`` (their observations in the input buffer ``buf``, their actions
        ``indices``): the extractor's captures of their states, and the targets of the step's forward (gradient)
        or the rows to attribute (those not attributed already), join the pending batch (whose maps and shares are
        computed first when its attribution pass is full)."""
        probe, n = self.probe, len(rows)
        if len(self.misses) + n > probe.rows or len(self.who) + n > self.limit:
            self._run()
        x = self.extractor
        if self.share_captures:
            for i in rows:
                recent = getattr(slots[i], "recent", None)
                self.caps.append(recent[-1] if recent else x.capture(None, envs[i]))
        else:
            frames = x.needs_frame
            self.caps.extend(x.capture(to_rgb_frame(envs[i].render()) if frames else None, envs[i]) for i in rows)
        if self.limit == 0:  # the rows pending at most: a few passes' with the cache on, within PENDING_BYTES
            most = probe.rows * (PENDING_PASSES if self.cache is not None else 1)
            self.limit = max(probe.rows, min(most, PENDING_BYTES // max(1, _nbytes(self.caps[0]))))
        self.who.extend((slots[i].attention, slots[i].length) for i in rows)
        if self.from_forward:
            self.targets.append(self._targets(rows, np.asarray(indices, np.int64)))
            return
        cache, found, misses, src = self.cache, self.found, self.misses, self.src
        recurrent = self.probe.recurrent
        for i, a in zip(rows.tolist(), np.asarray(indices).tolist()):
            key: tuple = (buf[i].tobytes(), a)
            if recurrent:  # the map depends on the state too
                state = self.carried[id(slots[i].attention)]
                self.carried[id(slots[i].attention)] = slots[i].state
                key += (b"".join(np.asarray(p).tobytes() for p in state),)
            at = misses.get(key)
            if at is None:
                known = None if cache is None else cache.get(key)
                at = len(found)
                found.append(known)
                if known is None:
                    misses[key] = at
                    self.miss_rows.append(buf[i].copy())
                    self.miss_acts.append(a)
                    if recurrent:
                        self.miss_states.append(state)
            src.append(at)

    def _run(self) -> None:
        """The pending rows' maps (one backward through the steps' own forwards, or one attribution pass padded to
        the probe's rows for the rows not attributed before) and object masks (one batch); their shares to their
        episodes (whose env steps, and failures, are known by now)."""
        if not self.who:
            return
        n = len(self.who)
        masks = self.extractor.masks_many(self.caps)
        if self.pool is None and masks:
            self.pool = pooling(np.shape(next(iter(masks.values())))[1:3], self.probe.hw)
        fr = (stacked_fractions(masks, n, self.names, self.pool) if self.pool is not None
              else np.zeros((n, len(self.names), *self.probe.hw), np.float32))
        maps = self._graph_maps(self.targets) if self.from_forward else self._maps()
        shares = step_shares(maps, fr)
        area = fr.mean(axis=(2, 3), dtype=np.float64)
        groups: dict = {}  # an episode's rows, in step order
        for j, (ep, _) in enumerate(self.who):
            groups.setdefault(id(ep), []).append(j)
        for idx in groups.values():
            ep, t0 = self.who[idx[0]]
            if len(idx) == 1:
                ep.add_many(t0, shares[idx[0] : idx[0] + 1], maps[idx[0] : idx[0] + 1], area[idx[0] : idx[0] + 1])
            elif self.who[idx[-1]][1] - t0 == len(idx) - 1:  # (consecutive steps: always, as the rollout steps)
                ep.add_many(t0, shares[idx], maps[idx], area[idx])
            else:
                for j in idx:
                    ep.add(self.who[j][1], shares[j], maps[j], area[j])
        self.who, self.caps, self.targets = [], [], []

    def _maps(self) -> np.ndarray:
        """float32 [B, h, w]: the pending rows' maps, the misses' from one attribution pass (kept in the cache)."""
        found, misses = self.found, self.misses
        if misses:
            keys = list(misses)
            states = tuple(np.concatenate(p) for p in zip(*self.miss_states)) if self.miss_states else None
            computed = self.probe.maps(np.stack(self.miss_rows), np.asarray(self.miss_acts, np.int64), states)
            cache = self.cache
            for key, m in zip(keys, computed):
                found[misses[key]] = m
                if cache is not None and self.cache_bytes < CACHE_BYTES:
                    cache[key] = m
                    self.cache_bytes += len(key[0]) + m.nbytes
        maps = np.stack([found[i] for i in self.src]) if self.src else np.zeros((0, *self.probe.hw), np.float32)
        self.src, self.found, self.misses, self.miss_rows, self.miss_acts = [], [], {}, [], []
        self.miss_states = []
        return maps

    def attach(self, records: list) -> list:
        """The rollout's results, each with its episode's ``attention`` (after the last pass)."""
        self._run()
        return [replace(r, attention={**self.method, **self.episodes.pop(r.index).result()}) for r in records]
