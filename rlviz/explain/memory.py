"""Memory saliency: how much of step t's decision comes from each of the last W observations (t, t-1, ...,
t-W+1), through a recurrent policy's memory. One class per method, captum-style ``attribute(inputs, target)``:

>>> shares = MemoryGradient(policy, window=16).attribute(episode_obs, target="action")   # doctest: +SKIP
>>> shares.shape   # [steps, 16]: row t, column k: the share of observation t-k; NaN where t-k < 0

Each row sums to 1 over the k that exist (k <= t); a row whose contributions are all 0 is NaN (nothing to share).

* :class:`MemoryGradient` (``--saliency gradient`` / ``smoothgrad``): truncated backpropagation through time over
  the window. The contribution of observation t-k is |grad_{x_{t-k}} y_t . x_{t-k}| (gradient x input summed over
  the observation: the first-order effect on y_t of zeroing that observation), the state carried into t-W+1 held
  fixed. Computed for every t at once: one forward of the episode's steps (each from the state it was carried in)
  with forward-mode derivatives along the observations, one backward for the targets, then W-1 backwards through
  the state update only (the per-step part of the network, e.g. a CNN, is not run again).
* :class:`MemoryPerturbation` (``--saliency perturbation``): the observation at t-k replaced by zeros and the memory
  run forward again from the state carried into t-k; the contribution is |y_t - y_t(perturbed)|. W batched steps.

The target y_t is as for saliency maps (:func:`rlviz.explain.attribute`): "action" the chosen action's logit
(sb3-contrib's and rlviz's recurrent policies give log-probabilities), "logprob", "value" or an action index.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch

from ..errors import UsageError
from .attribution import ATTRIBUTIONS
from .given_state import carried_states, check_recurrent
from .gradients import continuous_actions, resolve_target, select_target

__all__ = ["MemorySaliency", "MemoryGradient", "MemoryPerturbation", "MEMORY_ATTRIBUTIONS", "DEFAULT_WINDOW",
           "memory_method", "shares_from"]

#: ``--memory-window``'s default: the last 16 observations.
DEFAULT_WINDOW = 16


def shares_from(contrib: np.ndarray) -> np.ndarray:
    """|contributions| [n, W] (NaN where t-k < 0) -> shares summing to 1 over the k that exist; all-zero rows NaN."""
    a = np.abs(contrib.astype(np.float64))
    total = np.nansum(a, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, a / total, np.nan)
    return out.astype(np.float32)


def _exists(n: int, window: int) -> np.ndarray:
    """bool [n, W]: whether observation t-k exists (k <= t)."""
    return np.arange(window)[None, :] <= np.arange(n)[:, None]


class MemorySaliency:
    """The shared part: validation, the carried states, the chunks over time.

    Args:
        policy: a recurrent rlviz policy with the 0.5 contract (``torch_step``; docs/memory.md).
        window: W, the observations looked back over (t..t-W+1), >= 1.
        chunk: steps attributed per pass (each pass also reads the W-1 steps before it).
    """

    def __init__(self, policy: Any, window: int = DEFAULT_WINDOW, chunk: int = 512):
        check_recurrent(policy, f"memory saliency ({type(self).__name__})")
        if int(window) < 1:
            raise UsageError(f"memory window={window}: use a whole number of steps >= 1 (default {DEFAULT_WINDOW}).")
        self.policy, self.window, self.chunk = policy, int(window), max(1, int(chunk))

    def attribute(self, inputs: Any, target: str | int = "action", actions: Any = None,
                  states: tuple | None = None) -> np.ndarray:
        """float32 [n, W] shares for an episode's observations ``inputs`` [n, *obs] in order (from the policy's
        initial state, or ``states``: the rows [n, ...] each step was carried into, :func:`carried_states`);
        ``actions`` int [n] the actions taken (default: each step's argmax)."""
        n = int(inputs.shape[0]) if hasattr(inputs, "shape") and len(inputs.shape) > 1 else 0
        if n == 0:
            raise UsageError(f"memory saliency needs an episode's observations [steps, *obs]; received "
                             f"{getattr(inputs, 'shape', None)}.")
        kind, index = resolve_target(target)
        states = carried_states(self.policy, inputs) if states is None else states
        if any(int(s.shape[0]) != n for s in states):
            raise UsageError(f"states must hold one row per observation ({n}); received {[s.shape for s in states]}.")
        acts = None if actions is None else np.asarray(actions, np.int64).reshape(-1)
        if acts is not None and acts.shape[0] != n:
            raise UsageError(f"actions must be [{n}] (one per observation); received {acts.shape}.")
        contrib = np.full((n, self.window), np.nan, np.float64)
        for a in range(0, n, self.chunk):
            b, lo = min(n, a + self.chunk), max(0, a - self.window + 1)
            x = self.policy.to_tensor(np.asarray(inputs[lo:b]))
            rows = tuple(np.asarray(s[lo:b]) for s in states)
            act = None if acts is None else torch.as_tensor(acts[lo:b], device=x.device)
            c = self._contributions(x, rows, kind, index, act)  # [b - lo, W], row i: target lo + i
            contrib[a:b] = c[a - lo :]
        contrib[~_exists(n, self.window)] = np.nan
        return shares_from(contrib)

    def _target(self, heads: dict, kind: str, index: int | None, actions) -> torch.Tensor:
        logits, value = heads["logits"], heads.get("value")
        if kind == "index":
            actions = torch.full((logits.shape[0],), int(index or 0), dtype=torch.long, device=logits.device)
        elif actions is None and kind in ("action", "logprob") and not continuous_actions(self.policy):
            actions = logits.detach().argmax(-1)
        return select_target(kind, logits, value, actions, continuous_actions(self.policy))

    def _contributions(self, x: torch.Tensor, rows: tuple, kind: str, index: int | None, actions) -> np.ndarray:
        """float64 [m, W]: the signed or absolute contribution of x[i-k] to target i (rows before W-1 may miss
        the older ones: NaN or 0)."""
        raise NotImplementedError


@contextlib.contextmanager
def _forward_ad_kernels():
    """Recurrent kernels with forward-mode derivatives: oneDNN's and cuDNN's fused RNNs have none (torch's own do)."""
    with torch.backends.mkldnn.flags(enabled=False), torch.backends.cudnn.flags(enabled=False):
        yield


class MemoryGradient(MemorySaliency):
    """Truncated BPTT over the window, gradient x input per observation (see the module docstring)."""

    def _contributions(self, x, rows, kind, index, actions):
        import torch.autograd.forward_ad as fwad

        policy, m, w = self.policy, int(x.shape[0]), self.window
        state = tuple(t.detach().clone().requires_grad_(True) for t in policy.state_tensors(rows))
        try:
            with torch.enable_grad(), _forward_ad_kernels(), fwad.dual_level():
                heads, new = policy.torch_step(fwad.make_dual(x, x.detach()), state)
                y_dual = self._target(heads, kind, index, actions)
                y, y_dot = fwad.unpack_dual(y_dual)
                parts = [fwad.unpack_dual(s) for s in new]
        except NotImplementedError as exc:
            raise UsageError(f"memory saliency (gradient) needs forward-mode derivatives of the policy, which torch "
                             f"lacks for one of its operations ({str(exc).splitlines()[0]}); use --saliency "
                             "perturbation.") from None
        new_p = [p.primal for p in parts]
        v = [torch.zeros_like(p.primal) if p.tangent is None else p.tangent.detach() for p in parts]
        out = np.zeros((m, w), np.float64)
        out[:, 0] = (torch.zeros_like(y) if y_dot is None else y_dot).detach().double().cpu().numpy()
        if w == 1 or m == 1 or not y.requires_grad:
            return np.abs(out)
        z = torch.autograd.grad(y.sum(), state, retain_graph=True, allow_unused=True)
        z = [torch.zeros_like(s) if g is None else g for s, g in zip(state, z)]  # cotangent on the state into t
        for k in range(1, w):
            if k >= m:
                break
            # target r + k reads observation r through the state into r + 1: <Z[r + 1], v[r]>
            dot = sum((zi[1:] * vi[:-1]).reshape(m - 1, -1).sum(1) for zi, vi in zip(z, v))
            out[k:, k] = dot[: m - k].double().cpu().numpy()
            if k == w - 1 or k + 1 >= m:
                break
            live = [i for i, zi in enumerate(z) if bool(zi.any())]  # e.g. not a critic LSTM the target never reads
            if not live:
                break
            shifted = [torch.cat([z[i][1:], torch.zeros_like(z[i][:1])]) for i in live]  # cotangent on new[r]: Z[r+1]
            g = torch.autograd.grad([new_p[i] for i in live], state, grad_outputs=shifted, retain_graph=True,
                                    allow_unused=True)
            z = [torch.zeros_like(s) if gi is None else gi for s, gi in zip(state, g)]
        return np.abs(out)


class MemoryPerturbation(MemorySaliency):
    """The observation at t-k zeroed, the memory run forward again (see the module docstring)."""

    @torch.no_grad()
    def _contributions(self, x, rows, kind, index, actions):
        policy, m, w = self.policy, int(x.shape[0]), self.window
        state = policy.state_tensors(rows)
        heads, _ = policy.torch_step(x, state)
        y = self._target(heads, kind, index, actions).double()
        if actions is None and kind in ("action", "logprob") and not continuous_actions(policy):
            actions = heads["logits"].argmax(-1)  # the same targets for the perturbed runs
        out = np.zeros((m, w), np.float64)
        s = state
        for k in range(min(w, m)):
            r = m - k  # sources 0..r-1: their perturbed run reaches step source + k
            inp = torch.zeros_like(x[:r]) if k == 0 else x[k:]
            s = tuple(p[:r] for p in s)
            h, s = policy.torch_step(inp, s)
            acts = None if actions is None else actions[k:]
            yk = self._target(h, kind, index, acts).double()
            out[k:, k] = (yk - y[k:]).abs().cpu().numpy()
        return out


#: ``--saliency`` method -> its memory saliency class: each method of the one registry
#: (:data:`~rlviz.explain.attribution.ATTRIBUTIONS`) carries its variant's name (``SaliencyMethod.memory``).
MEMORY_ATTRIBUTIONS: dict[str, type[MemorySaliency]] = {name: globals()[cls.memory] for name, cls in ATTRIBUTIONS.items()}


def memory_method(saliency: str) -> type[MemorySaliency]:
    """The memory saliency class that goes with saliency method ``saliency``."""
    method = ATTRIBUTIONS.get(str(saliency))
    if method is None:
        raise UsageError(f"memory saliency: method {saliency!r} is not known; use one of "
                         f"{', '.join(map(repr, ATTRIBUTIONS))}.")
    variant: type[MemorySaliency] = globals()[method.memory]
    return variant
