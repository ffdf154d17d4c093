"""Recorded episodes: disk-backed, so memory does not grow with episode length.

:class:`Spool` appends fixed-shape items to a file in a private temporary folder and reads them
back as a read-only ``np.memmap``. :class:`EpisodeTrace` is what the recorder hands to the
later stages; :class:`EpisodeInternals` is what the policy (and saliency) said about it.

Alignment (T = number of steps): ``frames[t]`` and ``observations[t]`` are what the agent saw
when it chose ``actions[t]``; ``rewards[t]`` came from that action; ``frames[T]`` is the frame
after the last step and has no action.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import UsageError

__all__ = ["Spool", "EpisodeTrace", "EpisodeInternals", "returns_to_go"]


class Spool:
    """Append-only array of items of one shape and dtype, kept in a file, not in RAM.

    ``append(item)`` writes one item; ``view()`` maps everything written so far as
    ``ndarray [N, *shape]`` (read-only memmap). ``close()`` deletes the file.
    """

    def __init__(self, shape: Sequence[int], dtype, dir: str | os.PathLike | None = None, name: str = "spool"):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._dir = tempfile.mkdtemp(prefix="rlviz-", dir=dir)
        self.path = os.path.join(self._dir, f"{name}.bin")
        self._fh = open(self.path, "wb")
        self._n = 0
        self._itemsize = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def append(self, item) -> None:
        arr = np.ascontiguousarray(item, dtype=self.dtype)
        if arr.shape != self.shape:
            raise UsageError(
                f"Spool of items shaped {self.shape} received an item shaped {arr.shape}; "
                "observations and frames must keep one shape for the whole episode."
            )
        self._fh.write(arr.tobytes())
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def view(self) -> np.ndarray:
        """Everything appended so far, [N, *shape] (read-only; a zero-length array when empty)."""
        if self._fh is not None:
            self._fh.flush()
        if self._n == 0 or self._itemsize == 0:
            return np.zeros((self._n,) + self.shape, dtype=self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self._n,) + self.shape)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


def returns_to_go(rewards: np.ndarray, gamma: float, bootstrap: float = 0.0) -> np.ndarray:
    """Discounted return from each frame on: float32 [T+1] for rewards [T]; entry T is ``bootstrap``."""
    r = np.asarray(rewards, dtype=np.float64)
    out = np.empty(r.shape[0] + 1, dtype=np.float64)
    out[-1] = bootstrap
    for t in range(r.shape[0] - 1, -1, -1):
        out[t] = r[t] + gamma * out[t + 1]
    return out.astype(np.float32)


@dataclass(frozen=True)
class EpisodeTrace:
    """One recorded episode of T steps.

    frames:       uint8 [T+1, H, W, 3]  RGB, usually a read-only memmap
    observations: [T+1, *obs_shape] in the env's dtype, what the policy saw (memmap)
    actions:      int64 [T]
    rewards:      float32 [T]
    lives:        int32 [T+1] or None (ALE lives before each action; last entry after the last step)
    terminated, truncated: how the episode ended (both False when it was cut short by close())
    action_names: tuple of A strings
    episode_id:   index of the episode in the wrapped env's lifetime
    seed:         the reset seed, or None
    fps:          playback rate of the video
    env_id:       the env spec's id, or the env's class name
    """

    frames: np.ndarray
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    lives: np.ndarray | None
    terminated: bool
    truncated: bool
    action_names: tuple
    episode_id: int
    seed: int | None
    fps: float
    env_id: str

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def episode_return(self) -> float:
        return float(np.sum(self.rewards, dtype=np.float64))


@dataclass(frozen=True)
class EpisodeInternals:
    """What the policy said on each of the T+1 frames of an episode.

    logits:   float32 [T+1, A]  (Q-values when kind == "q")
    probs:    float32 [T+1, A]
    value:    float32 [T+1] or None
    entropy:  float32 [T+1]  relative entropy H / ln|A| in [0, 1]
    returns_to_go: float32 [T+1]  discounted return from frame t on (gamma below); 0 after the end
    gamma:    discount used for returns_to_go
    kind:     "actor_critic" | "logits" | "q"
    saliency: float32 [T+1, h, w] in [0, 1] in observation space, normalised over the whole episode, or None
    saliency_label: e.g. "gradient (actor)"; "" when saliency is None
    """

    logits: np.ndarray
    probs: np.ndarray
    value: np.ndarray | None
    entropy: np.ndarray
    returns_to_go: np.ndarray
    gamma: float
    kind: str
    saliency: np.ndarray | None = None
    saliency_label: str = ""
