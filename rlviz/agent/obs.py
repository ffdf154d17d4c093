"""Observations of every gymnasium space -> the float array a policy's forward sees.

``Box`` observations of rank >= 1 reach the policy as they are (images, vectors). Every other space is
flattened the way Stable-Baselines3 feeds an MLP (``preprocess_obs`` + ``FlattenExtractor`` /
``CombinedExtractor``): ``Discrete`` -> one-hot, ``MultiDiscrete`` -> one one-hot per entry,
``MultiBinary`` -> floats, a 0-d ``Box`` -> one float, ``Tuple`` -> its parts in order and ``Dict`` ->
its parts in the space's key order (gymnasium sorts the keys), each flattened and concatenated.

A policy that preprocesses observations itself (SB3's policies do: ``obs_format = "raw"``) is given
them stacked as they come. The env's observation itself stays whole wherever rlviz keeps it (the
recorded episode: :func:`rlviz.episode.trace.make_spool`).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..errors import UsageError

__all__ = ["ObsAdapter", "FlatView", "flat_size", "is_plain"]


def is_plain(space) -> bool:
    """True when observations of ``space`` reach a policy as they are: a ``Box`` of rank >= 1 (or no space)."""
    return space is None or (isinstance(space, spaces.Box) and len(space.shape) >= 1)


def flat_size(space) -> int:
    """Length of the flattened observation of ``space``."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, (spaces.Tuple, spaces.Dict)):
        return sum(flat_size(s) for s in _parts(space))
    raise UsageError(f"Observations of space {space} cannot be given to a policy; rlviz flattens Box, Discrete, "
                     "MultiDiscrete, MultiBinary, Tuple and Dict spaces. Wrap the env in an ObservationWrapper.")


def _parts(space) -> list:
    return list(space.spaces.values()) if isinstance(space, spaces.Dict) else list(space.spaces)


def _flatten_into(space, obs, out: np.ndarray) -> None:
    """Write the flattened batch ``obs`` (leading axis B, as a stacked leaf or a dict/tuple of them) into ``out``
    [B, flat_size(space)]."""
    if isinstance(space, spaces.Discrete):
        idx = np.asarray(obs).reshape(out.shape[0]).astype(np.int64) - int(space.start)
        out[:] = 0.0
        out[np.arange(out.shape[0]), idx] = 1.0
    elif isinstance(space, spaces.MultiDiscrete):
        vals = np.asarray(obs).reshape(out.shape[0], -1).astype(np.int64) - np.asarray(space.start).reshape(-1)
        out[:] = 0.0
        at = 0
        for j, n in enumerate(np.asarray(space.nvec).reshape(-1)):
            out[np.arange(out.shape[0]), at + vals[:, j]] = 1.0
            at += int(n)
    elif isinstance(space, (spaces.Box, spaces.MultiBinary)):
        out[:] = np.asarray(obs, dtype=np.float32).reshape(out.shape)
    else:
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        at = 0
        for key, sub in zip(keys, _parts(space)):
            n = flat_size(sub)
            _flatten_into(sub, obs[key], out[:, at : at + n])
            at += n


def _stack(space, observations: list):
    """A list of B observations -> the same structure with stacked leaves [B, ...]."""
    if isinstance(space, spaces.Dict):
        return {k: _stack(s, [o[k] for o in observations]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_stack(s, [o[i] for o in observations]) for i, s in enumerate(space.spaces))
    return np.stack([np.asarray(o) for o in observations])


class ObsAdapter:
    """Turns env observations into what a policy's forward takes. ``fmt``: the policy's ``obs_format``."""

    def __init__(self, space, fmt: str = "flat"):
        self.space = space
        self.flat = fmt == "flat" and not is_plain(space)
        if fmt == "raw" and isinstance(space, (spaces.Dict, spaces.Tuple)):
            raise UsageError(f"This policy takes observations as they come, but the env's are {space}; "
                             "it cannot be given a batch of them. Use an rlviz TorchPolicy on flattened observations.")
        self.size = flat_size(space) if self.flat else None

    def single(self, obs):
        """One observation -> the policy's input for it (unbatched); plain observations are returned as they are."""
        return obs if not self.flat else self.batch([obs])[0]

    def batch(self, observations: list) -> np.ndarray:
        """B observations -> the policy's input [B, ...] (float32 [B, D] when flattened)."""
        if not self.flat:
            return np.stack([np.asarray(o) for o in observations])
        return self.stacked(_stack(self.space, observations))

    def stacked(self, batch) -> np.ndarray:
        """A batch whose leaves are already stacked [B, ...] (a recorded episode's chunk) -> the policy's input."""
        if not self.flat:
            return np.asarray(batch)
        n = _first_leaf(batch).shape[0]
        out = np.empty((n, int(self.size or 0)), dtype=np.float32)
        _flatten_into(self.space, batch, out)
        return out


def _first_leaf(tree):
    while isinstance(tree, (dict, tuple)):
        tree = next(iter(tree.values())) if isinstance(tree, dict) else tree[0]
    return tree


def _slice(tree, key):
    if isinstance(tree, dict):
        return {k: _slice(v, key) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_slice(v, key) for v in tree)
    return np.asarray(tree[key])


class FlatView:
    """A recorded episode's observations (arrays, SpoolArrays, or dicts/tuples of them) seen as the policy's
    input ``[N, D]``, flattened chunk by chunk when sliced (nothing is read until then)."""

    def __init__(self, adapter: ObsAdapter, observations):
        self.adapter, self.observations = adapter, observations
        n = len(_first_leaf(observations))
        self.shape = (n, adapter.size) if adapter.flat else tuple(np.shape(_first_leaf(observations)))
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self[int(key) : int(key) + 1][0] if key >= 0 else self[len(self) + int(key)]
        return self.adapter.stacked(_slice(self.observations, key))

    def __array__(self, dtype=None, copy=None):
        arr = self[0 : len(self)]
        return arr if dtype is None else arr.astype(dtype)
