"""How many rows every policy forward has: the fixed shape that makes an agent's numbers batch-invariant.

A batched forward's last float bits depend on the batch's size (not, at a fixed size, on the other rows or a
row's position). So every forward of :meth:`rlviz.agent.policy.Policy.evaluate` has exactly the same number of
rows, the last chunk padded: an episode gets the same numbers alone, among 16 envs, or in any worker.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FORWARD_ROWS", "PIXEL_FORWARD_ROWS", "PIXEL_ELEMENTS", "forward_rows_for"]

#: Rows of every forward of :meth:`~rlviz.agent.policy.Policy.evaluate` (the last chunk padded): what makes results batch-invariant.
FORWARD_ROWS = 16
#: Rows of every forward for large observations (:data:`PIXEL_ELEMENTS` or more numbers each, e.g. 4x84x84 Atari
#: frames). Measured (1 CPU thread, the shipped NatureCNN): a forward of 8 rows costs 0.53x one of 16, two of 8
#: cost 1.06x one of 16; so 8 envs pay no padding and 16 envs pay 6% of the forward. Small observations keep 16:
#: their forward is mostly fixed cost (MinAtar: 16 rows cost 1.10x 8 rows).
PIXEL_FORWARD_ROWS = 8
PIXEL_ELEMENTS = 4096


def forward_rows_for(obs_shape: tuple) -> int:
    """Rows of every forward for observations of ``obs_shape`` (one observation's): :data:`FORWARD_ROWS`, or
    :data:`PIXEL_FORWARD_ROWS` from :data:`PIXEL_ELEMENTS` numbers per observation. A function of the
    observation's shape only, so an agent's rows are the same for any batch, env count, worker count or
    machine."""
    return PIXEL_FORWARD_ROWS if int(np.prod(obs_shape, dtype=np.int64)) >= PIXEL_ELEMENTS else FORWARD_ROWS
