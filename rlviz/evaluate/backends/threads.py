"""The torch thread policy: rollouts forward small batches (16 rows), where torch's intra-op threads cost
more than they give, and on a loaded machine they collapse (measured: a batch-16 forward 3.6x slower with
2 threads than with 1). So :func:`rlviz.evaluate.rollouts.rollout` (the CLI's and every worker's) runs its forwards
with :data:`DEFAULT_THREADS` unless told otherwise (``threads=``; None leaves torch's setting), and restores
torch's setting afterwards."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from ...errors import UsageError

__all__ = ["torch_threads", "DEFAULT_THREADS"]

#: Torch intra-op threads of a rollout (per process: ``rlviz render`` and each of its workers).
DEFAULT_THREADS = 1


@contextmanager
def torch_threads(threads: int | None):
    """Run the block with ``torch.set_num_threads(threads)``, then restore the previous count; None: leave it."""
    if threads is None:
        yield
        return
    if isinstance(threads, bool) or int(threads) < 1:
        raise UsageError(f"threads={threads!r}; expected a positive number of torch threads, or None to leave "
                         "torch's setting alone.")
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)
