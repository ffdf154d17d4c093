"""A recurrent agent's memory over one episode, as numbers (numpy only: the recorders draw it without torch)."""

from __future__ import annotations

import numpy as np

__all__ = ["SATURATION_LEVEL", "RESET_ATOL", "saturation", "start_gap"]

#: a tanh unit beyond this magnitude is saturated (its gradient nearly gone)
SATURATION_LEVEL = 0.95

#: an episode's first state farther than this from the initial state was not reset (``state_not_reset``)
RESET_ATOL = 1e-6


def saturation(memory: np.ndarray, level: float = SATURATION_LEVEL) -> np.ndarray:
    """float32 [T+1]: the share of units with |h| > ``level`` at each step (``memory`` [T+1, D], ``memory_of``)."""
    m = np.asarray(memory, np.float32)
    return (np.abs(m) > level).mean(axis=1).astype(np.float32) if m.size else np.zeros(m.shape[0], np.float32)


def start_gap(first: np.ndarray, initial: np.ndarray) -> float:
    """The largest |difference| between the state a loop carried into an episode's first step and the initial state
    (both flattened; inf when their sizes differ): above :data:`RESET_ATOL`, the loop did not reset its memory."""
    a, b = np.asarray(first, np.float64).reshape(-1), np.asarray(initial, np.float64).reshape(-1)
    return float(np.abs(a - b).max()) if a.size == b.size and a.size else float("inf")
