"""Tolerances argued from the computation, for comparing two float32 computations of the same numbers made along
different code paths (another batch size, another kernel: AVX2 and AVX-512 sum in other orders).

:func:`recurrent_atol` is the tolerance at each step of an LSTM rollout. The argument:

* One feed-forward pass: :data:`STEP_ATOL` on O(1) outputs, the suite's tolerance for torch outputs (~170 U, U =
  2**-24 float32's unit roundoff: dot products of a few thousand terms summed in another order round differently,
  typically ~U sqrt(K) of their scale each).
* The recurrence: the LSTM cell state is a running sum, ``c_t = f * c_{t-1} + i * g`` with ``f, i, |g| <= 1``, so
  ``|c_t| <= t + 1`` (reached by an agent whose gates saturate: CleanRL's test agent counts, ``|c_195|`` = 196).
  Each update rounds with a relative error <= U of ``|c_s| <= s + 1``; rounding errors are unbiased and
  independent, so after ``t`` steps they add in quadrature: ``|dc_t| ~ U sqrt(sum_s (s+1)^2) ~ U (t+1)^1.5 /
  sqrt(3)`` (1.4e-4 measured against float64 at t=195 for that agent: 1.5x this, the gates' own rounding riding on
  it). ``h = o * tanh(c)`` is 1-Lipschitz in ``c``.
* The heads: an output computed from ``h`` through layers ``W_1 .. W_n`` (with 1-Lipschitz activations: tanh,
  ReLU, softmax) moves by at most the product of their spectral norms times the error of ``h`` (an error spread
  over the units, as rounding errors are).
* Two float32 computations each carry that error (a factor 2), and the gates' own rounding another 2:
  ``atol_t = STEP_ATOL + 4 U gain (t+1)^1.5``.

A state carried wrongly (a step late, not reset, not carried) moves the cell state by O(1) per unit, orders of
magnitude beyond this; a fixed ``atol`` either fails on some CPU after enough steps or is loose at the first ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["U", "STEP_ATOL", "gain", "sb3_gains", "recurrent_atol", "assert_close_along"]

#: float32's unit roundoff (2**-24): the relative error of one rounded operation
U = float(np.finfo(np.float32).eps) / 2
#: one feed-forward pass's tolerance on O(1) outputs
STEP_ATOL = 1e-5


def gain(*weights: Any) -> float:
    """How much an error of ``h`` can grow through layers of these weights (torch tensors or arrays, [out, in]):
    the product of their spectral norms (their activations 1-Lipschitz). No weights: 1 (``h`` itself)."""
    out = 1.0
    for w in weights:
        w = w.detach().cpu().numpy() if hasattr(w, "detach") else np.asarray(w)
        out *= float(np.linalg.norm(np.asarray(w, np.float64), 2))
    return out


def sb3_gains(model: Any) -> tuple[float, float]:
    """An SB3 RecurrentPPO's (net_arch [n]) gains from its LSTM output: to the logits (its policy layer, then its
    action net) and to the value (its value layer, then its value net)."""
    p = model.policy
    return (gain(p.mlp_extractor.policy_net[0].weight, p.action_net.weight),
            gain(p.mlp_extractor.value_net[0].weight, p.value_net.weight))


def recurrent_atol(head_gain: float, steps: int) -> np.ndarray:
    """The tolerance at each step ``t < steps`` of a float32 LSTM rollout for an output of gain ``head_gain``
    (see the module docstring)."""
    return STEP_ATOL + 4 * U * head_gain * (np.arange(steps) + 1.0) ** 1.5


def assert_close_along(actual: Any, desired: Any, atol: np.ndarray, start: int = 0) -> None:
    """``|actual - desired| <= atol[start + i]`` at every step ``i`` (the first axis); the worst step named."""
    actual, desired = np.asarray(actual, np.float64), np.asarray(desired, np.float64)
    n = actual.shape[0] if actual.ndim else 1
    bound = np.asarray(atol)[start: start + n]
    excess = np.abs(actual - desired).reshape(n, -1).max(1) - bound
    t = int(excess.argmax())
    assert excess[t] <= 0, (f"step {start + t}: |difference| {excess[t] + bound[t]:.3g} exceeds its tolerance "
                            f"{bound[t]:.3g}")
