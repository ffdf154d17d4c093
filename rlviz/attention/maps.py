"""Where the agent looks: each object's share of a step's attribution, for a whole forward batch at once.

Attribution per pixel of the observation, by the method classes of :mod:`rlviz.explain.attribution` with
``times_input`` (reduced over channels and stacked frames by a sum, so shares add up): |gradient x input| (Shrikumar
et al. 2016; the plain |gradient| of saliency also lights pixels where nothing is: the share must land on what is
present), the SmoothGrad mean |gradient| times |input|, or the Greydanus et al. (2018) score, already spatial.

:class:`AttributionProbe` computes the maps of a forward batch (the rollout's input buffer) in chunks of exactly the
policy's forward rows (:mod:`rlviz.agent.rows`, the last chunk padded): one backward per chunk, and a row's map
does not depend on how many envs share the batch. :func:`pooling` and :func:`object_fractions` turn an extractor's
masks (frame pixels) into the fraction of each observation pixel each object covers, and :func:`step_shares` gives
each step's shares, objects then "other", summing to 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy
from ..choices import DEFAULT_SALIENCY_METHOD
from ..errors import UsageError
from ..explain.attribution import ATTRIBUTIONS, attribution_class
from ..explain.batching import chunk_layout
from ..explain.gradients import check_no_train_batchnorm, resolve_target
from ..explain.layout import detect_layout

__all__ = ["AttributionProbe", "Pooling", "pooling", "object_fractions", "stacked_fractions", "step_shares", "ATTRIBUTION", "BATCH_WAVES"]

#: Rows of every attribution pass: this many forward chunks of the policy's rows (:mod:`rlviz.agent.rows`), so 256
#: MinAtar observations or 128 Atari frames per forward + backward (a small network's pass is mostly fixed cost).
BATCH_WAVES = 16
#: (frame, mask) pairs per forward of the perturbation method.
_PERTURBATION_PAIRS = 4096

#: What each method's attribution is, as the docs and summary.json name it.
ATTRIBUTION = {name: cls.object_attribution for name, cls in ATTRIBUTIONS.items()}


class AttributionProbe:
    """Attribution maps of one policy for a batch of observations, chunked to its forward rows.

    policy: the rollout's :class:`Policy` (not stateful); obs: one observation (no batch axis) as the policy takes it;
    method: a saliency method's name or class (:data:`~rlviz.explain.attribution.ATTRIBUTIONS`); target: as :func:`rlviz.explain.attribute` ("action": the
    chosen action's logit; for perturbation, the paper's score over all logits). Every pass has exactly
    ``rows`` = :data:`BATCH_WAVES` x the policy's forward rows (the last one padded): a row's map depends on its
    observation (and action) only, not on the rows beside it.
    """

    def __init__(self, policy: Policy, obs: np.ndarray, method: Any = DEFAULT_SALIENCY_METHOD, target: str | int = "action",
                 waves: int = BATCH_WAVES):
        self.method = attribution_class(method)
        self.method.check_policy(policy)
        obs = np.asarray(obs)
        try:
            self.layout = detect_layout(obs.shape, np.bool_ if obs.dtype == np.bool_ else None)
        except UsageError as exc:
            raise UsageError(f"attention needs image observations to put objects on: {exc}") from None
        self.policy = policy
        self.kind, self.index = resolve_target(target)
        self.opts = self.method.resolve_options({}, self.layout.hw)
        self.rows = policy.rows_for(obs.shape) * max(1, int(waves))
        self.recurrent = capabilities_of(policy).recurrent  # its maps are given each row's carried state
        check_no_train_batchnorm(policy)

    @property
    def hw(self) -> tuple[int, int]:
        return self.layout.hw

    def maps(self, obs: np.ndarray, actions: np.ndarray | None = None, states: tuple | None = None) -> np.ndarray:
        """float32 [n, h, w] >= 0 for observations [n, *obs] (passes of exactly :attr:`rows`, the last padded);
        ``actions`` int64 [n]: the actions taken (targets "action" and "logprob"; None: each row's argmax);
        ``states``: a recurrent policy's state rows [n, ...] each observation was seen in (required for one)."""
        n, rows = int(obs.shape[0]), self.rows
        if (states is None) == self.recurrent:
            raise UsageError("attention on a recurrent policy takes the state each observation was seen in "
                             "(states=...); a policy without state takes none.")
        out = np.empty((n, *self.hw), np.float32)
        for s in range(0, n, rows):
            chunk = np.asarray(obs[s : s + rows])
            k = chunk.shape[0]
            acts = None if actions is None else np.asarray(actions[s : s + rows], np.int64)
            st = None if states is None else tuple(np.asarray(p[s : s + rows]) for p in states)
            if k < rows:
                chunk = np.concatenate([chunk, np.repeat(chunk[:1], rows - k, axis=0)])
                acts = None if acts is None else np.concatenate([acts, np.repeat(acts[:1], rows - k)])
                st = None if st is None else tuple(np.concatenate([p, np.repeat(p[:1], rows - k, axis=0)]) for p in st)
            out[s : s + k] = self._chunk(chunk, acts, st)[:k]
        return out

    def _chunk(self, chunk: np.ndarray, acts: np.ndarray | None, states: tuple | None = None) -> np.ndarray:
        if states is not None:  # each row given its carried state: the chunk at once (gradient) or row by row
            from ..explain.given_state import GivenState

            if self.method.single_pass:
                return self._chunk_of(GivenState(self.policy, states), chunk, acts)
            return np.concatenate([self._chunk_of(GivenState(self.policy, tuple(p[i : i + 1] for p in states)),
                                                  chunk[i : i + 1], None if acts is None else acts[i : i + 1])
                                   for i in range(chunk.shape[0])])
        return self._chunk_of(self.policy, chunk, acts)

    def _chunk_of(self, policy: Any, chunk: np.ndarray, acts: np.ndarray | None) -> np.ndarray:
        x = policy.to_tensor(chunk)
        a = None if acts is None or self.kind not in ("action", "logprob") else torch.as_tensor(
            np.maximum(acts, 0), dtype=torch.long, device=x.device)
        cls = self.method  # perturbation pairs (frame, mask) per forward; gradient methods: the chunk's rows
        m = cls.chunk_maps(policy, x, chunk_layout(cls, self.layout, x, times_input=True), self.kind, self.index, a,
                           self.opts, _PERTURBATION_PAIRS if cls.spatial else self.rows)
        return m.detach().float().cpu().numpy()


def _area_weights(n_in: int, n_out: int) -> np.ndarray:
    """float64 [n_out, n_in]: the fraction of output cell j's span covered by input pixel i (rows sum to 1)."""
    edges = np.arange(n_out + 1) * (n_in / n_out)
    lo, hi = edges[:-1, None], edges[1:, None]
    pix = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(hi, pix + 1) - np.maximum(lo, pix), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class Pooling:
    """Frame pixels -> observation pixels by area: ``rows`` float64 [h, H], ``cols`` float64 [w, W]."""

    rows: np.ndarray
    cols: np.ndarray

    def down(self, mask: np.ndarray) -> np.ndarray:
        """bool/float [H, W] (frame) -> float64 [h, w]: the fraction of each observation pixel it covers."""
        return self.rows @ np.asarray(mask, np.float64) @ self.cols.T

    def up(self, grid: np.ndarray) -> np.ndarray:
        """float [h, w] (observation) -> float64 [H, W] (frame): each frame pixel takes its observation pixel's
        value, weighted by the overlap (the map of a frame-sized picture)."""
        r = self.rows / self.rows.sum(axis=0, keepdims=True).clip(1e-12)
        c = self.cols / self.cols.sum(axis=0, keepdims=True).clip(1e-12)
        return r.T @ np.asarray(grid, np.float64) @ c


def pooling(frame_hw: tuple[int, int], obs_hw: tuple[int, int]) -> Pooling:
    """The area pooling from frames of ``frame_hw`` to observations of ``obs_hw`` (the whole frame resized, as
    the Atari preprocessing and MinAtar's grid are; identity when the sizes match)."""
    return Pooling(_area_weights(int(frame_hw[0]), int(obs_hw[0])), _area_weights(int(frame_hw[1]), int(obs_hw[1])))


def object_fractions(masks: list, names: tuple, pool: Pooling) -> np.ndarray:
    """float32 [B, K, h, w]: for each of B steps' masks ({name: bool [H, W]} in frame pixels), each named object's
    cover of each observation pixel. Objects are made exclusive in frame pixels, in ``names``' order (a pixel of an
    earlier object is not counted again), so a pixel's fractions sum to <= 1. Pooled over each mask's bounding box
    only (objects are small: an Atari ball is 8 of 33,600 frame pixels). The masks are stacked and handed to
    :func:`stacked_fractions` (a name missing on a step: an empty mask there, which adds nothing)."""
    n = len(masks)
    shape: tuple[int, ...] = next((tuple(np.shape(m[k])) for m in masks for k in names if k in m), ())
    stacked: dict[str, np.ndarray] = {}
    for name in names if shape else ():
        if any(name in m for m in masks):
            arr = np.zeros((n, *shape), dtype=np.bool_)
            for b, m in enumerate(masks):
                if name in m:
                    arr[b] = np.asarray(m[name], bool)
            stacked[name] = arr
    return stacked_fractions(stacked, n, names, pool)


def stacked_fractions(masks: dict, n: int, names: tuple, pool: Pooling) -> np.ndarray:
    """:func:`object_fractions` of B = ``n`` steps' masks given stacked ({name: bool [B, H, W]}, as
    :meth:`~rlviz.evaluate.failures.extractor.Extractor.masks_many` gives them; a name left out is absent on every step):
    the same numbers, the exclusivity and the copy (same sizes) vectorised over the steps."""
    h, w = pool.rows.shape[0], pool.cols.shape[0]
    same = (pool.rows.shape[1], pool.cols.shape[1]) == (h, w)
    out = np.zeros((n, len(names), h, w), np.float32)
    covered = None
    for k, name in enumerate(names):
        if name not in masks:
            continue
        mk = np.asarray(masks[name], bool)
        if covered is not None:
            mk = mk & ~covered
        covered = mk if covered is None else covered | mk
        if same:
            out[:, k] = mk
            continue
        for b in np.flatnonzero(mk.any(axis=(1, 2))):
            m = mk[b]
            rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
            r0, r1, c0, c1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
            out[b, k] = pool.rows[:, r0:r1] @ m[r0:r1, c0:c1] @ pool.cols[:, c0:c1].T
    return out


def step_shares(maps: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """float64 [B, K + 1]: per step, each object's share of the attribution and "other" last (sums to 1);
    maps float32 [B, h, w], fractions float32 [B, K, h, w]. A step whose map is all zero gets NaN."""
    m = maps.astype(np.float64)
    total = m.sum(axis=(1, 2))
    obj = np.einsum("bhw,bkhw->bk", m, fractions.astype(np.float64))
    out = np.concatenate([obj, (total - obj.sum(axis=1))[:, None]], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = out / total[:, None]
    out[total <= 0] = np.nan
    return np.clip(out, 0.0, 1.0)
