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

__all__ = ["has_memory", "add_memory", "memory_arrays", "MAX_SAVED_UNITS"]

#: Units of the memory the ``.npz`` keeps as they are; more are projected on this many principal components.
MAX_SAVED_UNITS = 256


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
        centred = m - m.mean(axis=0)
        _, _, vt = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
        m, projection = (centred @ vt[:MAX_SAVED_UNITS].T).astype(np.float32), "pca"
        out["memory_components"] = vt[:MAX_SAVED_UNITS].astype(np.float16)
    else:
        projection = "units"
    out.update({"memory": m.astype(np.float16), "memory_projection": np.asarray(projection),
                "memory_kind": np.asarray(internals.memory_kind)})
    out.update({f"memory_{k}": v for k, v in memory_series(internals).items()})
    return out
