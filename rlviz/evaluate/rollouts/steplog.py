"""The lockstep's per-step numbers, written a whole batch at a time and folded into each episode when it ends.

Per step, :func:`~rlviz.evaluate.rollouts.lockstep.run_lockstep` writes one row per array for the batch (the observations'
loop keys, the actions, the policy's outputs, values, rewards), time-major: every active env steps at
every batch step, so an env's episode is one contiguous stretch of a column. When the episode ends (or the log is
full: long episodes are folded in parts) its stretch is folded at once into the episode's accumulators: the
entropies (:func:`~rlviz.agent.actions.policy_entropy`, row by row the same numbers as per step), their sum (in
step order), the non-finite check, the diagnostics (:meth:`~rlviz.evaluate.statistics.diagnostics.EpisodeDiagnostics.fold`) and the value and
reward sequences of the value statistics. So no Python runs per env step for them.
"""

from __future__ import annotations

import numpy as np

from ...agent.actions import policy_entropy
from ..statistics.diagnostics import nonfinite_rows

__all__ = ["StepLog"]


class StepLog:
    """Rows for ``slots`` envs; ``clip``: value statistics on reward signs (the recipe clips rewards)."""

    ROWS = 512

    def __init__(self, slots: int, clip: bool):
        self.clip, self.g = clip, 0
        self.slots = slots
        self.start = np.zeros(slots, np.intp)  # each slot's first row not yet folded
        self.arrays: dict[str, np.ndarray] = {}  # name -> [ROWS, slots, ...], allocated on the first write

    def _allocate(self, d) -> None:
        n, out = self.slots, d.out
        heads = {"logits": out.logits, "probs": out.probs, "mean": out.mean, "std": out.std, "value": d.values}
        self.nvec = out.nvec
        self.arrays = {"keys": np.zeros((self.ROWS, n), np.uint64), "index": np.zeros((self.ROWS, n), np.int64),
                       "reward": np.zeros((self.ROWS, n), np.float64)}
        for name, a in heads.items():
            if a is not None:
                self.arrays[name] = np.zeros((self.ROWS, n) + a.shape[1:], a.dtype)
        if len(d.indices) and d.indices[0] < 0:  # not Discrete: the actions as the env took them
            taken = np.asarray(d.env_actions)
            self.arrays["action"] = np.zeros((self.ROWS, n) + taken.shape[1:], taken.dtype)

    def write(self, cols, d) -> None:
        """The current row of the slots ``cols`` (an index array, in the order of the Decision ``d``'s rows)."""
        if not self.arrays:
            self._allocate(d)
        g, arr, out = self.g, self.arrays, d.out
        arr["keys"][g, cols] = d.keys
        arr["index"][g, cols] = d.indices
        for name, a in (("logits", out.logits), ("probs", out.probs), ("mean", out.mean), ("std", out.std),
                        ("value", d.values)):
            if a is not None:
                arr[name][g, cols] = a
        if "action" in arr:
            arr["action"][g, cols] = np.asarray(d.env_actions)

    def end_step(self, cols, rewards: list) -> None:
        """The rewards the slots ``cols`` received; moves to the next row."""
        self.arrays["reward"][self.g, cols] = rewards
        self.g += 1

    def roll(self, eps: list) -> None:
        """When the log is full: fold the running episodes ``eps`` (one per slot, None for an idle slot) and
        start again from the first row. Call after the step's ended episodes were folded."""
        if self.g == self.ROWS:
            for i, ep in enumerate(eps):
                if ep is not None:
                    self.fold(i, ep)
            self.g = 0
            self.start[:] = 0

    def fold(self, i: int, ep) -> None:
        """Fold slot ``i``'s rows since its last fold into its episode ``ep`` (an :class:`~rlviz.evaluate.rollouts.runner.EpisodeState`)."""
        rows, arr = slice(self.start[i], self.g), self.arrays
        self.start[i] = self.g
        if rows.start == rows.stop:
            return
        col = {k: a[rows, i] for k, a in arr.items()}
        ent = policy_entropy(col.get("probs"), self.nvec, col.get("mean"), col.get("std"))
        bad = nonfinite_rows(col["logits"], col["probs"], col.get("value"))  # row by row: as per step
        ep.diag.fold(col["keys"], col["index"], ent, col["reward"], None if bad is None else np.flatnonzero(bad))
        ep.actions.append(col["action"].copy() if "action" in col else col["index"].astype(np.int32))
        ep.ent_sum = float(np.add.accumulate(np.concatenate([[ep.ent_sum], ent.astype(np.float64)]))[-1])
        if "value" in col:
            r = col["reward"]
            ep.values.append(col["value"].astype(np.float64))
            ep.rewards.append((r > 0).astype(np.float64) - (r < 0) if self.clip else r.copy())
