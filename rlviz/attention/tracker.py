"""The rollout's attention pass: every step's attribution share per object, in each episode's running sums.

:meth:`AttentionTracker.observe` runs once per lockstep step (:func:`rlviz.evaluate.lockstep.run_lockstep`): the
active envs' object masks (the heatmap's extractor, a copy of its own: exact extractors read the env's state;
extractors that need frames get ``env.render()`` on every step) are pooled to observation pixels, and each step's
attribution map comes

* for ``"gradient"`` (|gradient x input|), from the rollout's own forward of that step: the tracker forwards the
  lockstep's input buffer itself (:meth:`AttentionTracker.forward`, the same chunks of the policy's forward rows as
  :meth:`~rlviz.agent.policy.Policy.evaluate`, with gradients on), the loop decides on that output, and one backward
  of the taken actions' targets gives the maps: no second forward;
* for the other methods (and policies that step with a state or masks), from attribution passes of their own over a
  pending batch (:class:`~rlviz.attention.maps.AttributionProbe`: a fixed number of rows, so batch-invariant).

A step's shares go to its episode's :class:`EpisodeAttention` after the env has taken the step (so its failure is
known): the before-failure window's sums and maps, and the per-step track the videos draw.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..agent.stepping import plain
from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..explain.saliency import _select
from .maps import BATCH_WAVES, AttributionProbe, object_fractions, pooling, step_shares

__all__ = ["AttentionSpec", "AttentionTracker", "EpisodeAttention", "GRADIENT_FROM_FORWARD"]

#: Gradient attention from the rollout's own forward of each step (True: no row forwarded twice), or from attribution
#: passes of its own over pending batches of steps (False: one forward + backward of
#: :data:`~rlviz.attention.maps.BATCH_WAVES` chunks per 16 steps of 16 envs). Measured on the shipped MinAtar agent
#: (CPU, 1 thread): the backward through 16 steps' small graphs and the forward with gradients cost more than one
#: batched pass of 256 rows (150-episode rollout with attention: 2.53 / 2.68 s min / median against 2.24 / 2.33 s;
#: 1.18 s without attention), so the batched pass stays the default. Both give the same numbers.
GRADIENT_FROM_FORWARD = False


class AttentionSpec:
    """What the rollout's attention pass computes: ``method`` (a saliency method), ``target`` (as saliency's)."""

    def __init__(self, method: str = "gradient", target: str | int = "action"):
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
        self.track.append(shares[:-1])
        if np.isnan(shares[0]):
            self.recent.append(None)
        else:
            self.steps += 1
            self.total += shares
            self.area += area
            self.seen += area > 0
            self.recent.append((shares, amap, area > 0))
        if t in self.fail_steps:
            for item in self.recent:
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

    def result(self) -> dict:
        """What ``EpisodeResult.attention`` holds: names, steps, total (sum of shares), before_steps, before,
        failures, map_before (float32 [h, w], the sum of the before-failure steps' maps each normalised to 1, or
        None without one), track (float32 [T, K]: each step's share per object, NaN where its map was all zero)."""
        return {"names": self.names, "steps": self.steps, "total": self.total, "area": self.area,
                "before_steps": self.before_steps, "seen": self.seen, "before_seen": self.before_seen,
                "before": self.before, "failures": len(self.fail_steps),
                "map_before": None if self.map_before is None else self.map_before.astype(np.float32),
                "track": np.asarray(self.track, np.float32).reshape(len(self.track), len(self.names))}


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
        self.from_forward = GRADIENT_FROM_FORWARD and spec.method == "gradient" and plain(policy)
        self.graph: list = []  # the current step's forward chunks: (x [rows, *obs] with grad, heads)
        # (obs [B, *obs] or None, actions [B] or maps [B, h, w], fractions [B, K, h, w], [(EpisodeAttention, t)])
        self.pending: list = []
        self.count = 0  # rows pending

    def begin(self, env, obs, index: int) -> EpisodeAttention:
        if self.probe is None:
            self.probe = AttributionProbe(self.policy, obs, self.spec.method, self.spec.target, self.waves)
        self.extractor.begin_episode(env)
        if not self.names:
            self.names = tuple(self.extractor.names or self._masks(env))
        ep = self.episodes[index] = EpisodeAttention(self.names, self.probe.hw, self.window)
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
            total = _select(probe.kind, logits, value, a.to(logits.device))[where.to(logits.device)].sum()
            grads = torch.autograd.grad(total, xs, allow_unused=True) if total.requires_grad else [None] * len(xs)
        g = torch.cat([torch.zeros_like(x) if gi is None else gi for x, gi in zip(xs, grads)])
        maps = probe.layout.reduce(g.abs() * torch.cat(xs).detach().abs(), "sum")[where.to(g.device)]
        return maps.float().cpu().numpy()

    def observe(self, buf: np.ndarray, rows: np.ndarray, indices: np.ndarray, envs: list, slots: list) -> None:
        """The step of the active envs ``rows`` (their observations in the input buffer ``buf``, their actions
        ``indices``): the targets of the step's forward (gradient) or its observations and actions, and its
        object masks, join the pending batch (whose maps and shares are computed first when it is full)."""
        if self.count + len(rows) > self.probe.rows:
            self._run()
        masks = [self._masks(envs[i]) for i in rows]
        if self.from_forward:
            obs, what = None, self._targets(rows, np.asarray(indices, np.int64))
        else:
            obs, what = buf[rows].copy(), np.asarray(indices, np.int64).copy()
        self.pending.append((obs, what, object_fractions(masks, self.names, self.pool),
                             [(slots[i].attention, slots[i].length) for i in rows]))
        self.count += len(rows)

    def _run(self) -> None:
        """The pending rows' maps (one backward through the steps' own forwards, or one attribution pass padded to
        the probe's rows); their shares to their episodes (whose env steps, and failures, are known by now)."""
        if not self.pending:
            return
        fr = np.concatenate([p[2] for p in self.pending])
        if self.from_forward:
            maps = self._graph_maps([p[1] for p in self.pending])
        else:
            maps = self.probe.maps(np.concatenate([p[0] for p in self.pending]),
                                   np.concatenate([p[1] for p in self.pending]))
        shares = step_shares(maps, fr)
        area = fr.mean(axis=(2, 3), dtype=np.float64)
        for j, (ep, t) in enumerate(who for p in self.pending for who in p[3]):
            ep.add(t, shares[j], maps[j], area[j])
        self.pending, self.count = [], 0

    def attach(self, records: list) -> list:
        """The rollout's results, each with its episode's ``attention`` (after the last pass)."""
        self._run()
        return [replace(r, attention={**self.method, **self.episodes.pop(r.index).result()}) for r in records]
