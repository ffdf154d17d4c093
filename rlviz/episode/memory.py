"""A recurrent agent's memory over one episode, as numbers (numpy only: the recorders draw it without torch)."""

from __future__ import annotations

import numpy as np

__all__ = ["SATURATION_LEVEL", "saturation"]

#: a tanh unit beyond this magnitude is saturated (its gradient nearly gone)
SATURATION_LEVEL = 0.95


def saturation(memory: np.ndarray, level: float = SATURATION_LEVEL) -> np.ndarray:
    """float32 [T+1]: the share of units with |h| > ``level`` at each step (``memory`` [T+1, D], ``memory_of``)."""
    m = np.asarray(memory, np.float32)
    return (np.abs(m) > level).mean(axis=1).astype(np.float32) if m.size else np.zeros(m.shape[0], np.float32)
