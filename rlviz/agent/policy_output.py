"""What a policy says about a batch of observations: :class:`PolicyOutput` (numpy only, so the recorders and
the drawing code read it without importing torch)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..episode.trace import distribution_of
from .actions import policy_entropy

__all__ = ["PolicyOutput"]


@dataclass(frozen=True)
class PolicyOutput:
    """What a policy says about a batch of B observations (numpy, on the CPU).

    Discrete actions (``Discrete(A)``; ``nvec`` None):
    logits: float32 [B, A]  -- action logits; for ``kind="q"`` the Q-values.
    probs:  float32 [B, A]  -- softmax(logits); for ``kind="q"`` the greedy policy (one-hot argmax).

    MultiDiscrete / MultiBinary (``nvec``: the parts' sizes, MultiBinary (2,)*n):
    logits, probs: float32 [B, sum(nvec)], the softmax taken per part (a Bernoulli logit l is the pair (0, l)).

    Box actions [D] (``mean`` not None; ``logits`` is ``mean`` and ``probs`` is [B, 0]):
    mean:   float32 [B, D]  -- Gaussian mean (before tanh when ``squash``); a deterministic actor's action.
    std:    float32 [B, D] or None -- Gaussian standard deviation; None for a deterministic actor.
    squash: True for a tanh-squashed Gaussian (SAC): actions are ``low + (tanh(u) + 1) / 2 * (high - low)``.
    low, high: float32 [D] action bounds (may be infinite) or None.

    value:  float32 [B] or None -- V(s); for ``kind="q"`` max_a Q(s, a); None when the model has no value head.
    kind:   "actor_critic" | "logits" | "q"
    quantiles: float32 [B, N, A] or None -- a distributional Q-network's N quantiles per action (QR-DQN; logits
            are their mean)
    """

    logits: np.ndarray
    probs: np.ndarray
    value: np.ndarray | None
    kind: str
    nvec: tuple | None = None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    squash: bool = False
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    quantiles: np.ndarray | None = None

    @property
    def dist(self) -> str:
        """"categorical" | "multi_categorical" | "gaussian" | "deterministic" (see rlviz.episode.trace.DISTRIBUTIONS)."""
        return distribution_of(self.mean, self.std, self.nvec)

    @property
    def entropy(self) -> np.ndarray:
        """float32 [B]: relative entropy H / ln|A| (discrete; the mean over parts for MultiDiscrete), the Gaussian
        differential entropy in nats summed over dimensions (of the pre-tanh Gaussian when squashed), NaN for a
        deterministic actor."""
        return policy_entropy(self.probs, self.nvec, self.mean, self.std)
