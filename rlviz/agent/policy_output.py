"""What a policy says about a batch of observations: :class:`PolicyOutput` (numpy only, so the recorders and
the drawing code read it without importing torch)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..episode.trace import PolicyFields
from .actions import policy_entropy

__all__ = ["PolicyOutput"]


@dataclass(frozen=True)
class PolicyOutput(PolicyFields):
    """What a policy says about a batch of B observations (numpy, on the CPU): the fields of
    :class:`~rlviz.episode.trace.PolicyFields` (declared there once, shared with
    :class:`~rlviz.episode.trace.EpisodeInternals`), positional in that order: ``logits, probs, value, kind, nvec,
    mean, std, squash, low, high, quantiles``.
    """

    @property
    def entropy(self) -> np.ndarray:
        """float32 [B]: relative entropy H / ln|A| (discrete; the mean over parts for MultiDiscrete), the Gaussian
        differential entropy in nats summed over dimensions (of the pre-tanh Gaussian when squashed), NaN for a
        deterministic actor."""
        return policy_entropy(self.probs, self.nvec, self.mean, self.std)
