"""A recorded episode's internals and its gradient saliency from one pass of the policy.

The policy forwards the episode's T+1 observations in chunks of exactly its forward rows (:mod:`rlviz.agent.rows`,
the last chunk padded), with gradients on: each chunk's heads give the per-step internals (the same numbers
:meth:`~rlviz.agent.policy.Policy.evaluate` gives: same chunks, same kernels), and one backward of that chunk's
targets gives its saliency maps (|d target / d obs|, reduced over channels by the max, as
:class:`rlviz.explain.Gradient`). So a recorded episode of T steps costs T + 1 rows (and the last
chunk's padding), not a forward for the panels and another for the saliency. Observations are read a block at a
time (a disk-backed spool is never loaded whole) and the maps go to a disk-backed array.
"""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import torch

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy, PolicyOutput
from ..errors import UsageError
from ..progress import bar
from .attribution import Gradient
from .gradients import _check_actions, check_no_train_batchnorm, resolve_target, select_target
from .layout import detect_layout
from .saliency import normalise_episode, saliency_label, warn_if_all_zero

__all__ = ["outputs_with_gradient_saliency"]

#: Observations read from the episode per block (each block is forwarded a chunk of forward rows at a time).
BLOCK = 1024


def outputs_with_gradient_saliency(
    policy: Policy,
    observations: Any,
    actions: np.ndarray | None,
    target: str | int = "action",
    *,
    percentile: float = 99.5,
) -> tuple[PolicyOutput, np.ndarray, str]:
    """(the policy's output on each of the T+1 observations [T+1, *obs], the gradient saliency maps float32
    [T+1, h, w] in [0, 1] normalised over the episode (a disk-backed array; flat vector observations: [T+1, D],
    one number per feature), the overlay's label).

    actions: int [T], the actions taken (targets "action" / "logprob"; the last observation's target is its own
    argmax), or None when the target ignores them ("value", an action index).
    """
    n = int(observations.shape[0])
    obs_shape = tuple(observations.shape[1:])
    if n == 0:
        raise UsageError("outputs_with_gradient_saliency received an episode without observations.")
    Gradient.check_policy(policy)
    layout = detect_layout(obs_shape, np.bool_ if np.dtype(getattr(observations, "dtype", np.float32)) == np.bool_
                           else None, vector=True)
    kind, index = resolve_target(target)
    check_no_train_batchnorm(policy)
    rows = policy.rows_for(obs_shape)
    block = max(rows, BLOCK // rows * rows)
    acts = None if actions is None else np.asarray(actions, np.int64).reshape(-1)
    parts: dict = {}
    maps: Any = None
    with bar(n, f"saliency ({Gradient.name})", unit="frame") as progress:  # the same phase as the two-pass path's
        for start in range(0, n, block):
            chunk_block = np.asarray(observations[start : start + block])
            for at in range(0, chunk_block.shape[0], rows):
                s = start + at
                chunk = chunk_block[at : at + rows]
                k = chunk.shape[0]
                if k < rows:
                    chunk = np.concatenate([chunk, np.repeat(chunk[:1], rows - k, axis=0)])
                m = _chunk(policy, chunk, k, None if acts is None else acts[s : s + k], kind, index, layout, parts)
                if maps is None:
                    maps = np.memmap(tempfile.TemporaryFile(prefix="rlviz-saliency-"), dtype=np.float32, mode="w+",
                                     shape=(n,) + m.shape[1:])
                maps[s : s + k] = m
                progress.update(k)
    out = policy.output_of(parts, n)
    warn_if_all_zero(Gradient, maps, n)
    label = saliency_label(Gradient, target, capabilities_of(policy).continuous_actions)
    return out, normalise_episode(maps, percentile, out=maps), label


def _chunk(policy: Policy, chunk: np.ndarray, k: int, acts: np.ndarray | None, kind: str, index: int | None,
           layout: Any, parts: dict) -> np.ndarray:
    """Forward one chunk (``rows`` observations, the first ``k`` real) with gradients: its heads into ``parts``,
    its ``k`` maps (float32 [k, h, w], or [k, D] for vectors, not normalised) returned."""
    x = policy.to_tensor(chunk).detach().requires_grad_(True)
    with torch.enable_grad():
        h = policy.heads(x)
        policy.add_heads(dict(h), parts)
        logits = h["mean"] if "mean" in h else h["logits"]
        value = h.get("value")
        if value is not None:
            value = value.reshape(-1)
        a = None
        if kind == "index":
            a = torch.full((x.shape[0],), int(index or 0), dtype=torch.long, device=logits.device)
        elif kind in ("action", "logprob"):
            a = logits.detach().argmax(dim=-1)  # the last observation (and the padding): its own argmax
            if acts is not None and acts.size:
                a[: acts.size] = torch.as_tensor(acts, dtype=torch.long, device=a.device)
        if a is not None:
            _check_actions(a[:k], logits.shape[-1])
        sel = select_target(kind, logits, value, a, capabilities_of(policy).continuous_actions)[:k]
        grad = torch.autograd.grad(sel.sum(), x, allow_unused=True)[0] if sel.requires_grad else None
    if grad is None:
        grad = torch.zeros_like(x)
    return layout.reduce(grad[:k].abs(), "max").detach().float().cpu().numpy()
