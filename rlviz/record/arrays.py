"""Numbers handed to a recorder by a training loop, read as numpy without importing torch."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_numpy"]


def as_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    """``x`` as a numpy array: any array-like; a torch tensor (any device, with or without grad, bfloat16
    included) through its own ``detach().cpu()``, recognised by those methods, so torch is never imported here;
    objects with ``__array__`` or ``__dlpack__`` (jax, cupy: ``np.asarray`` copies them to the host)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor (or a look-alike)
        x = x.detach().cpu()
        if hasattr(x, "numpy"):
            try:
                x = x.numpy()
            except TypeError:  # a dtype numpy has no equivalent for (bfloat16): widen it first
                x = x.float().numpy()
    elif hasattr(x, "get") and type(x).__module__.startswith("cupy"):  # cupy refuses implicit host copies
        x = x.get()
    return np.asarray(x, dtype=dtype)
