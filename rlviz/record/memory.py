"""A recorded episode's memory, for a recurrent policy (docs/memory.md): what it remembered after each step
(``memory_of`` the state) and, with saliency on, the memory saliency of each step over the last W observations
(:mod:`rlviz.explain.memory`, the method that goes with the saliency method). Added to the episode's
:class:`~rlviz.episode.trace.EpisodeInternals`; :func:`memory_arrays` is what its ``.npz`` keeps.

The ``.npz`` keeps the memory bounded: ``memory`` float16 [T+1, min(D, 256)]: the units themselves when D <= 256,
else the projection on the episode's first 256 principal components (``memory_projection`` says "units" or "pca"),
beside ``memory_norm`` ||h_t||, ``memory_change`` ||h_t - h_{t-1}|| (0 at t = 0, after the reset) and
``memory_saturation`` (the share of units beyond |0.95|; NaN unless ``memory_kind`` is "lstm" or "gru"), all
float32 [T+1] from the full-precision memory, and ``memory_saliency`` float32 [T+1, W]. With a state the loop
annotated (``annotate(state=...)``, :mod:`rlviz.record.annotated_state`) the memory is that state's (row t: the state
carried into step t), and ``state_start_gap`` (float32: the first step's state's largest difference from zeros) and
``state_not_reset`` (bool: that gap above 1e-6, the loop carried its memory across the episode boundary) are added.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..agent.capabilities import capabilities_of, has_memory
from ..agent.obs import FlatView, ObsAdapter, is_plain
from ..draw.panels_memory import memory_series
from ..episode.memory import RESET_ATOL
from ..episode.trace import EpisodeInternals, EpisodeTrace

__all__ = ["has_memory", "add_memory", "memory_arrays", "MAX_SAVED_UNITS", "MAX_SAVED_COMPONENTS"]

#: Units of the memory the ``.npz`` keeps as they are; more are projected on this many principal components.
MAX_SAVED_UNITS = 256
#: The ``.npz`` keeps the components (``memory_components`` [k, D]) only up to this many numbers (2 MB as float16:
#: 256 components of 4096 units); a wider state keeps its projection and statistics, not its components.
MAX_SAVED_COMPONENTS = 256 * 4096


def _principal(m: np.ndarray, components: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``m`` [T, D] (D > 256) on its first k = min(256, T) principal components: (coordinates float32 [T, k], the
    components float32 [k, D] when ``components``, else None), from the T x T Gram matrix of the centred rows,
    accumulated in float64 over blocks of units: memory of T x T and of ``m`` itself, never D x T float64 (a
    100,000-unit state of 500 steps took 1.6 GB through the SVD). Signs fixed so that each component's largest
    coordinate is positive (deterministic)."""
    centred = m - m.mean(axis=0, dtype=np.float64).astype(np.float32)
    gram = np.zeros((m.shape[0], m.shape[0]), np.float64)
    for a in range(0, m.shape[1], _BLOCK):
        block = centred[:, a : a + _BLOCK].astype(np.float64)
        gram += block @ block.T
    w, u = np.linalg.eigh(gram)  # ascending
    order = np.argsort(w)[::-1][:MAX_SAVED_UNITS]
    s = np.sqrt(np.clip(w[order], 0.0, None))
    coords = u[:, order] * s
    flip = np.where(coords[np.abs(coords).argmax(axis=0), np.arange(coords.shape[1])] < 0, -1.0, 1.0)
    if not components:
        return (coords * flip).astype(np.float32), None
    keep = s > (s.max() if s.size else 0.0) * 1e-12
    comps = np.zeros((order.size, m.shape[1]), np.float32)
    for a in range(0, m.shape[1], _BLOCK):
        block = centred[:, a : a + _BLOCK].astype(np.float64)
        comps[keep, a : a + _BLOCK] = (u[:, order[keep]].T @ block) / s[keep, None]
    return (coords * flip).astype(np.float32), comps * flip[:, None].astype(np.float32)


#: Units per block when the Gram matrix and the components are accumulated (float64 blocks of T x 8192).
_BLOCK = 8192


def add_memory(internals: EpisodeInternals, trace: EpisodeTrace, policy: Any, saliency: str | None,
               target: str | int = "action", window: int = 16, observation_space: Any = None) -> EpisodeInternals:
    """``internals`` with the memory after each step and (``saliency`` set, ``window`` >= 1) the memory saliency.
    ``observation_space``: the env's, for observations the policy sees flattened (as :func:`compute_internals`)."""
    if not has_memory(policy) or trace.num_steps == 0:
        return internals
    obs: Any = trace.observations
    if observation_space is not None and not is_plain(observation_space):
        obs = FlatView(ObsAdapter(observation_space, capabilities_of(policy).obs_format), obs)
    elif obs.ndim < 2 or obs.shape[1:] == (0,):  # no observations kept
        return internals
    from ..explain.given_state import carried_states
    from ..explain.memory import memory_method

    states = carried_states(policy, obs)
    n = int(obs.shape[0])
    _, last = policy.step(np.asarray(obs[n - 1 : n]), tuple(s[n - 1 :] for s in states))
    after = tuple(np.concatenate([s[1:], np.asarray(e)]) for s, e in zip(states, last))
    memory = np.asarray(policy.memory_of(after), np.float32).reshape(n, -1)
    shares = None
    if saliency is not None and int(window) >= 1:
        acts = np.append(np.asarray(trace.actions).reshape(trace.num_steps, -1)[:, 0], internals.logits[-1].argmax())
        discrete = internals.mean is None and internals.nvec is None
        shares = memory_method(saliency)(policy, window=int(window)).attribute(
            obs, target=target, actions=acts.astype(np.int64) if discrete else None, states=states)
    return replace(internals, memory=memory, memory_saliency=shares,
                   memory_kind=str(getattr(policy, "memory_kind", "other")))


def memory_arrays(internals: EpisodeInternals) -> dict[str, np.ndarray]:
    """The ``.npz`` entries of the episode's memory (see the module docstring); {} without memory."""
    out: dict[str, np.ndarray] = {}
    if internals.memory_saliency is not None:
        out["memory_saliency"] = np.asarray(internals.memory_saliency, np.float32)
    if internals.memory is None:
        return out
    if internals.memory_start_gap is not None:  # annotate(state=...) at the episode's first step
        out["state_start_gap"] = np.asarray(internals.memory_start_gap, np.float32)
        out["state_not_reset"] = np.asarray(internals.memory_start_gap > RESET_ATOL)
    m = np.asarray(internals.memory, np.float32)
    if m.shape[1] > MAX_SAVED_UNITS:
        wanted = min(MAX_SAVED_UNITS, m.shape[0]) * m.shape[1] <= MAX_SAVED_COMPONENTS  # (100,000 units: 51 MB)
        m, components = _principal(m, wanted)
        projection = "pca"
        if components is not None:
            out["memory_components"] = components.astype(np.float16)
    else:
        projection = "units"
    out.update({"memory": m.astype(np.float16), "memory_projection": np.asarray(projection),
                "memory_kind": np.asarray(internals.memory_kind)})
    out.update({f"memory_{k}": v for k, v in memory_series(internals).items()})
    return out
