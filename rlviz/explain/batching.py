"""How a saliency method's maps are computed over a batch: validated once, then chunk by chunk, in chunks sized to
a memory budget (:meth:`rlviz.explain.attribution.SaliencyMethod.maps` and ``.attribute`` run :func:`iter_chunks`),
and the reductions a chunk's attribution goes through (:func:`chunk_layout`: per pixel, |x input| for attention, or
none at all for an attribution shaped like the input)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy
from ..errors import UsageError
from .gradients import _batch_size, _check_actions, check_no_train_batchnorm, resolve_target
from .layout import ObsLayout, detect_layout

__all__ = ["iter_chunks", "chunk_layout"]


def _check_forward(policy: Policy, obs) -> None:
    """One forward of the first observation: a shape the policy cannot take is a one-line UsageError (a single
    observation passed without its batch axis is the usual cause), not torch's matrix-shape text."""
    try:
        with torch.no_grad():
            policy.forward(policy.to_tensor(np.asarray(obs[:1])))
    except (RuntimeError, ValueError, IndexError) as exc:
        if isinstance(exc, UsageError):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"attribute() passed the policy observations of shape {tuple(obs.shape[1:])} (a batch of "
            f"{obs.shape[0]}), and it failed: {first}. attribute() takes a batch [B, *obs_shape]: for one "
            "observation pass obs[None]."
        ) from exc


class _Elementwise:
    """A layout whose reduce keeps every element: the attribution shaped like the input (captum's contract)."""

    def __init__(self, layout: ObsLayout):
        self.layout, self.spec, self.hw = layout, layout.spec, layout.hw

    def reduce(self, g: torch.Tensor, how: str = "max") -> torch.Tensor:
        return g


class _TimesInput:
    """A layout whose reduce multiplies by |input| and sums over channels (attention's |gradient x input|)."""

    def __init__(self, layout: Any, x: torch.Tensor):
        self.layout, self.absx = layout, x.abs()
        self.spec, self.hw = layout.spec, layout.hw

    def reduce(self, g: torch.Tensor, how: str = "sum") -> torch.Tensor:
        return self.layout.reduce(g * self.absx[: g.shape[0]], "sum")


def chunk_layout(method: Any, layout: ObsLayout, x: torch.Tensor, times_input: bool,
                 elementwise: bool = False) -> Any:
    """The layout a method's :meth:`~SaliencyMethod.chunk_maps` reduces the chunk ``x`` with: the observations' own,
    attention's |attribution x input| (``times_input``, gradient methods) or no reduction (``elementwise``)."""
    if method.spatial:
        return layout
    base = _Elementwise(layout) if elementwise else layout
    return _TimesInput(base, x) if times_input else base


def iter_chunks(method: Any, obs: Any, target: Any, actions: Any, elementwise: bool = False):
    """Validate everything once, then yield (start, maps float32 ndarray [F, H, W]) chunk by chunk (``elementwise``:
    the attribution [F, *obs_shape], a spatial score given to every channel of its pixel)."""
    cls, policy = type(method), method.policy
    if not isinstance(policy, Policy):
        raise UsageError(
            f"attribute() needs an rlviz Policy; received {type(policy).__name__}. Wrap a torch module with "
            "rlviz.TorchPolicy(module) (and call module.eval() if it has BatchNorm or dropout)."
        )
    if not hasattr(obs, "shape") or len(obs.shape) < 2 or obs.shape[0] == 0:
        raise UsageError(
            f"attribute() needs a batch of observations [B, *obs_shape]; received {type(obs).__name__} of shape "
            f"{getattr(obs, 'shape', None)}. Add a batch axis (obs[None]) for a single observation."
        )
    cls.check_policy(policy)
    if capabilities_of(policy).recurrent:
        raise UsageError(f"attribute() on a recurrent policy ({type(policy).__name__}) needs the state each observation "
                         "was seen in: pass rlviz.explain.GivenState(policy, state_rows), or use episode_saliency() on "
                         "the episode's observations in order (it carries the state).")
    is_bool = obs.dtype in (np.bool_, torch.bool)
    lay = detect_layout(obs.shape[1:], np.bool_ if is_bool else None, method.layout, vector=True)
    if lay.is_vector and cls.spatial:
        raise UsageError(
            f"{cls.name.capitalize()} saliency blurs image regions; the observations are a vector of {lay.obs_shape[0]} numbers "
            "with no regions to blur. Use --saliency gradient (or smoothgrad; API: method='gradient'), which gives "
            "one number per observation feature."
        )
    kind, index = resolve_target(target)
    opts = cls.resolve_options(method.options, lay.hw)
    check_no_train_batchnorm(policy)
    b = int(obs.shape[0])
    if actions is not None:
        actions = torch.as_tensor(np.asarray(actions.cpu() if isinstance(actions, torch.Tensor) else actions))
        if actions.shape != (b,) or actions.dtype.is_floating_point or actions.dtype == torch.bool:
            raise UsageError(f"actions must be integers shaped [{b}] (one per frame); received {tuple(actions.shape)} "
                             f"{actions.dtype}.")
        actions = actions.to(device=policy.device, dtype=torch.long)
    _check_forward(policy, obs)
    bs = _batch_size(policy, policy.to_tensor(obs[:1]), cls.gradients, method.batch_size, method.memory_budget_mb)
    num_actions = int(policy.num_actions)
    if num_actions > 0 and index is not None and index >= num_actions:
        raise UsageError(f"target={index} but the policy has {num_actions} actions (0..{num_actions - 1}).")
    if num_actions > 0 and actions is not None and kind in ("action", "logprob"):
        _check_actions(actions, num_actions)
    frames_per_chunk = max(1, bs // cls.inputs_per_frame(opts, lay.hw))
    for s in range(0, b, frames_per_chunk):
        e = min(b, s + frames_per_chunk)
        x = policy.to_tensor(obs[s:e])
        acts = None if actions is None else actions[s:e]
        m = cls.chunk_maps(policy, x, chunk_layout(cls, lay, x, method.times_input, elementwise), kind, index, acts,
                           opts, bs)
        if elementwise and cls.spatial:
            m = lay.expand(m)
        yield s, m.float().cpu().numpy()
