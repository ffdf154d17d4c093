"""What the rollouts keep of a recurrent episode for the memory diagnostics (``memory_unused``,
``memory_saturated``: :mod:`rlviz.evaluate.statistics.memory_checks`): a bounded sample of its steps t >= 1, each
the policy's input and the state row the loop carried into it. Only the episodes of index below
:data:`MEMORY_EPISODES` keep one (the same ones whatever the batch, the workers or the number of episodes), so the
diagnostics cost at most MEMORY_EPISODES x 2 batched forwards of at most SAMPLE_STEPS rows per rollout.

The sample is decided by the episode alone (never by the batch it ran in nor by the worker): every step while at
most :data:`SAMPLE_STEPS` are kept, then every second of them and every second step from then on (the stride
doubles each time the sample fills up), so a long episode keeps between SAMPLE_STEPS / 2 and SAMPLE_STEPS steps
spread evenly over it. When the episode ends, :meth:`MemorySample.stats` re-runs the policy on the kept steps with
their carried state and with the initial state (two batched forwards) and returns the episode's numbers, which
land in ``EpisodeResult.diag["memory"]``. Feed-forward policies keep nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SAMPLE_STEPS", "MEMORY_EPISODES", "MemorySample"]

#: The most steps of one episode the memory diagnostics re-run.
SAMPLE_STEPS = 32
#: The episodes (by index: 0, 1, ...) whose steps the memory diagnostics re-run.
MEMORY_EPISODES = 16


class MemorySample:
    """One episode's kept steps (see the module docstring)."""

    __slots__ = ("stride", "obs", "states")

    def __init__(self) -> None:
        self.stride = 1
        self.obs: list = []
        self.states: list = []

    def offer(self, t: int, obs_row: Any, state_row: tuple) -> None:
        """Step ``t``'s policy input [*obs] and carried state row (a tuple of [1, ...] arrays): kept when sampled."""
        if t < 1 or (t - 1) % self.stride:
            return
        self.obs.append(np.array(obs_row))
        self.states.append(state_row)
        if len(self.obs) > SAMPLE_STEPS:
            self.obs, self.states, self.stride = self.obs[::2], self.states[::2], self.stride * 2

    def stats(self, policy: Any) -> dict:
        """The episode's :func:`~rlviz.evaluate.statistics.memory_checks.memory_stats` on the kept steps."""
        from ..statistics.memory_checks import memory_stats

        if not self.obs:
            return memory_stats(policy, np.zeros((0,)), ())
        states = tuple(np.concatenate(parts) for parts in zip(*self.states))
        return memory_stats(policy, np.stack(self.obs), states)
