"""Recorded episodes: disk-backed, so memory does not grow with episode length.

:class:`Spool` appends fixed-shape items to a file in a private temporary folder and reads them
back as a read-only ``np.memmap``. :class:`EpisodeTrace` is what the recorder hands to the
later stages; :class:`EpisodeInternals` is what the policy (and saliency) said about it.

Alignment (T = number of steps): ``frames[t]`` and ``observations[t]`` are what the agent saw
when it chose ``actions[t]``; ``rewards[t]`` came from that action; ``frames[T]`` is the frame
after the last step and has no action.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, cast

import numpy as np

from ..errors import StorageError, UsageError

__all__ = ["SPOOL_PREFIX", "Spool", "SpoolArray", "SpoolTree", "make_spool", "EpisodeTrace", "PolicyFields", "EpisodeInternals", "returns_to_go",
           "DISTRIBUTIONS", "distribution_of"]


class SpoolArray:
    """Read-only array-like ``[N, *shape]`` over a spool file. Items are read with ``pread`` when
    indexed (an int or a slice gives a fresh, writable ndarray); nothing is memory-mapped, so reading
    every item of a long episode does not grow the process's resident memory (a memmap would: every
    page touched counts). ``np.asarray(spool_array)`` reads everything: use chunks instead.
    """

    def __init__(self, path: str, n: int, shape: tuple, dtype, owner=None):
        self._owner = owner  # the Spool stays alive (its file kept) while a reader of it exists
        self.shape = (int(n),) + tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self._item_shape = tuple(shape)
        self._itemsize = int(np.prod(self._item_shape, dtype=np.int64)) * self.dtype.itemsize
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDONLY)

    def __reduce__(self):
        """Pickled by reference: the path and shape (another process reading the spool opens the file itself;
        the spool must outlive its use there)."""
        return (SpoolArray, (self.path, self.shape[0], self._item_shape, self.dtype.str))

    def __len__(self) -> int:
        return self.shape[0]

    def _read(self, start: int, count: int) -> np.ndarray:
        out = np.empty((count,) + self._item_shape, dtype=self.dtype)
        if count and self._itemsize:
            view, offset, done = memoryview(out).cast("B"), start * self._itemsize, 0  # type: ignore[arg-type]
            while done < len(view):
                got = os.preadv(self._fd, [view[done:]], offset + done)  # type: ignore[arg-type]  # open until close()
                if got <= 0:
                    raise OSError(f"short read from the episode spool at item {start}")
                done += got
        return out

    def __getitem__(self, key):
        n = self.shape[0]
        if isinstance(key, tuple):
            head, rest = (key[0], key[1:]) if key else (slice(None), ())
            item = self[head]
            return item[rest] if isinstance(head, (int, np.integer)) else item[(slice(None),) + rest]
        if isinstance(key, (int, np.integer)):
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"index {key} is out of range for {n} items")
            return self._read(i, 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step == 1:
                return self._read(start, max(0, stop - start))
            return np.stack([self._read(i, 1)[0] for i in range(start, stop, step)]) if stop != start else self._read(0, 0)
        raise UsageError(f"episode spools are indexed by an int, a slice or a tuple; received {type(key).__name__}.")

    def __array__(self, dtype=None, copy=None):
        arr = self._read(0, self.shape[0])
        return arr if dtype is None else arr.astype(dtype)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._owner = None

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


def _full(exc: OSError, folder: str | os.PathLike[str] | None) -> BaseException:
    """A one-line :class:`StorageError` for a full disk (or quota); other OS errors as they are."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return exc
    where = folder or tempfile.gettempdir()
    return StorageError(
        f"The temporary folder {where} is full (no space left on device) while spooling episode frames; free space "
        "there or point rlviz at a larger folder: set TMPDIR, or pass spool_dir= to RecordEpisode."
    )


#: the name of a spool folder starts with this, then the pid of the process that made it and a dash
SPOOL_PREFIX = "rlviz-rec-"


class Spool:
    """Append-only array of items of one shape and dtype, kept in a file, not in RAM.

    ``append(item)`` writes one item; ``view()`` gives everything written so far as a read-only
    :class:`SpoolArray` ``[N, *shape]`` (read on demand, never mapped). ``close()`` deletes the file.
    """

    def __init__(self, shape: Sequence[int], dtype, dir: str | os.PathLike | None = None, name: str = "spool"):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._dir, self._fh, self._readers = cast("str | None", None), cast("BinaryIO | None", None), cast("list[SpoolArray]", [])
        try:
            self._dir = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=dir)  # (named for its process:
            # what a killed one left is cleaned by the next recorder, rlviz.record.leftovers.clean_stale)
            self.path = os.path.join(self._dir, f"{name}.bin")
            self._fh = open(self.path, "wb")
        except OSError as exc:
            self.close()
            raise _full(exc, dir) from None
        self._n = 0
        self._itemsize = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def append(self, item) -> None:
        arr = np.ascontiguousarray(item, dtype=self.dtype)
        if arr.shape != self.shape and arr.size == 1 == int(np.prod(self.shape)):
            arr = arr.reshape(self.shape)  # a scalar observation given once as 3, once as [3]
        if arr.shape != self.shape:
            raise UsageError(
                f"Spool of items shaped {self.shape} received an item shaped {arr.shape}; "
                "observations and frames must keep one shape for the whole episode."
            )
        try:
            self._fh.write(arr.data)  # type: ignore[union-attr]  # (None only once closed; written without a copy)
        except OSError as exc:
            raise _full(exc, os.path.dirname(str(self._dir))) from None
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def view(self) -> SpoolArray:
        """Everything appended so far, a read-only :class:`SpoolArray` [N, *shape]."""
        if self._fh is not None:
            try:
                self._fh.flush()
            except OSError as exc:
                raise _full(exc, os.path.dirname(str(self._dir))) from None
        reader = SpoolArray(self.path, self._n, self.shape, self.dtype, owner=self)
        self._readers.append(reader)
        return reader

    def close(self) -> None:
        fh, self._fh = self._fh, None
        try:
            if fh is not None:
                fh.close()  # (a full disk here is moot: the file is deleted below)
        except OSError:
            pass
        for reader in self._readers:
            reader.close()
        self._readers = []  # (readers hold their spool; the spool holds its readers until closed)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


class SpoolTree:
    """Spools for a structured observation (gymnasium ``Dict`` / ``Tuple``), one per leaf: ``append`` takes the
    whole observation, ``view()`` gives the same dict/tuple structure of :class:`SpoolArray` [N, *leaf shape]."""

    def __init__(self, example, dir=None, name: str = "obs"):
        if isinstance(example, dict):
            self.children = {k: make_spool(v, dir, f"{name}.{k}") for k, v in example.items()}
        else:
            self.children = {i: make_spool(v, dir, f"{name}.{i}") for i, v in enumerate(example)}
        self.is_dict = isinstance(example, dict)

    def append(self, item) -> None:
        if self.is_dict != isinstance(item, dict) or len(item) != len(self.children):
            raise UsageError(f"An observation of another structure than the episode's first: {type(item).__name__} "
                             f"of {len(item)} parts; expected {len(self.children)}.")
        for k, child in self.children.items():
            child.append(item[k])

    def __len__(self) -> int:
        return len(next(iter(self.children.values()))) if self.children else 0

    def view(self):
        views = {k: c.view() for k, c in self.children.items()}
        return views if self.is_dict else tuple(views.values())

    def close(self) -> None:
        for c in self.children.values():
            c.close()


def make_spool(example, dir: str | os.PathLike | None = None, name: str = "obs") -> Spool | SpoolTree:
    """A spool for items like ``example``: a :class:`Spool` for an array or a scalar, a :class:`SpoolTree`
    for a dict or tuple (a gymnasium ``Dict`` / ``Tuple`` observation, kept whole)."""
    if isinstance(example, (dict, tuple)):
        return SpoolTree(example, dir, name)
    arr = np.asarray(example)
    return Spool(arr.shape, arr.dtype, dir=dir, name=name)
#: What a policy's actions are drawn from (``PolicyOutput.dist``, ``EpisodeInternals.dist``).
DISTRIBUTIONS = ("categorical", "multi_categorical", "gaussian", "deterministic")


def distribution_of(mean, std, nvec) -> str:
    """The :data:`DISTRIBUTIONS` name of outputs with these fields (Box: ``mean``; MultiDiscrete: ``nvec``)."""
    if mean is not None:
        return "gaussian" if std is not None else "deterministic"
    return "categorical" if nvec is None else "multi_categorical"


def returns_to_go(rewards: np.ndarray, gamma: float, bootstrap: float = 0.0, dtype=np.float32) -> np.ndarray:
    """Discounted return from each frame on: ``[T+1]`` for rewards ``[T]`` (entry T is ``bootstrap``), computed in
    float64 and returned as ``dtype``. The one return-to-go of rlviz (panels, statistics, diagnostics)."""
    r = np.asarray(rewards, dtype=np.float64)
    out = np.empty(r.shape[0] + 1, dtype=np.float64)
    out[-1] = bootstrap
    for t in range(r.shape[0] - 1, -1, -1):
        out[t] = r[t] + gamma * out[t + 1]
    return out.astype(dtype, copy=False)


@dataclass(frozen=True)
class EpisodeTrace:
    """One recorded episode of T steps.

    frames:       uint8 [T+1, H, W, 3]  RGB: an ndarray or a disk-backed SpoolArray (index or slice it;
                  read long episodes in chunks)
    observations: [T+1, *obs_shape] in the env's dtype, what the policy saw (ndarray or SpoolArray)
    actions:      [T, *action_shape]: int64 [T] (Discrete), int64 [T, parts] (MultiDiscrete/MultiBinary),
                  float32 [T, D] (Box)
    rewards:      float32 [T]
    lives:        int32 [T+1] or None (ALE lives before each action; last entry after the last step)
    terminated, truncated: how the episode ended (both False when it was cut short by close())
    action_names: tuple of A strings
    episode_id:   index of the episode in the wrapped env's lifetime
    seed:         the reset seed, or None
    fps:          playback rate of the video
    env_id:       the env spec's id, or the env's class name
    action_masks: bool [T+1, A] or None: the env's ``action_masks()`` before each action (True = allowed), kept
                  for a policy that takes them (MaskablePPO); the last row is after the last step
    mission:      the episode's text goal (MiniGrid's and BabyAI's ``env.unwrapped.mission`` after its reset), drawn
                  in the panel and kept in the ``.npz``; "" for envs without one
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
    action_masks: np.ndarray | None = None
    mission: str = ""

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def episode_return(self) -> float:
        return float(np.sum(self.rewards, dtype=np.float64))


@dataclass(frozen=True)
class PolicyFields:
    """What a policy says about B rows (B observations of a batch, or the T+1 frames of an episode): the one
    declaration of these fields, shared by :class:`~rlviz.agent.policy_output.PolicyOutput` (a batch) and
    :class:`EpisodeInternals` (an episode). Numpy, on the CPU.

    Discrete actions (``Discrete(A)``; ``nvec`` None):
    logits: float32 [B, A]  -- action logits; for ``kind="q"`` the Q-values.
    probs:  float32 [B, A]  -- softmax(logits); for ``kind="q"`` the greedy policy (one-hot argmax).

    MultiDiscrete / MultiBinary (``nvec``: the parts' sizes, MultiBinary (2,)*n):
    logits, probs: float32 [B, sum(nvec)], the softmax taken per part (a Bernoulli logit l is the pair (0, l)).

    Box actions [D] (``mean`` not None; ``logits`` is ``mean`` and ``probs`` is [B, 0]):
    mean:   float32 [B, D]  -- Gaussian mean (before tanh when ``squash``); a deterministic actor's action.
    std:    float32 [B, D] or None -- Gaussian standard deviation; None for a deterministic actor.
    squash: True for a tanh-squashed Gaussian (SAC): actions are ``low + (tanh(u) + 1) / 2 * (high - low)``.
    low, high: float32 [D] action bounds (may be infinite) or None.

    value:  float32 [B] or None -- V(s); for ``kind="q"`` max_a Q(s, a); None when the model has no value head.
    kind:   "actor_critic" | "logits" | "q"
    quantiles: float32 [B, N, A] or None -- a distributional Q-network's N quantiles per action (QR-DQN; logits
            are their mean)
    """

    logits: np.ndarray
    probs: np.ndarray
    value: np.ndarray | None
    kind: str
    nvec: tuple | None = None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    squash: bool = False
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    quantiles: np.ndarray | None = None

    @property
    def dist(self) -> str:
        """"categorical" | "multi_categorical" | "gaussian" | "deterministic" (see :data:`DISTRIBUTIONS`)."""
        return distribution_of(self.mean, self.std, self.nvec)


@dataclass(frozen=True, kw_only=True)
class EpisodeInternals(PolicyFields):
    """What the policy said on each of the T+1 frames of an episode: the :class:`PolicyFields` with B = T+1 (logits,
    probs ``[T+1, A]``, value ``[T+1]``, kind, nvec, Box mean/std ``[T+1, D]``, squash, low, high, quantiles
    ``[T+1, N, A]``; positional in that order), and, by keyword:

    entropy:  float32 [T+1]  relative entropy H / ln|A| in [0, 1]; Box: the Gaussian differential entropy in nats
              (NaN when deterministic)
    returns_to_go: float32 [T+1]  discounted return from frame t on (gamma below); 0 after the end
    gamma:    discount used for returns_to_go
    saliency: float32 [T+1, h, w] in [0, 1] in observation space, normalised over the whole episode, or None;
                  for flat vector observations [D]: float32 [T+1, D], one number per feature (drawn as bars,
                  saved in the per-step .npz as ``saliency``)
    saliency_label: e.g. "gradient (actor)"; "" when saliency is None
    extras:   {name: float32 [T+1]}: the user's own per-step scalars (``RecordEpisode.annotate(**extra)``)
    action_masks: bool [T+1, A] or None: the actions the policy was allowed (MaskablePPO; masked ones have
              probability 0)
    memory:   float32 [T+1, D] or None: a recurrent policy's memory after each step (``memory_of``: an LSTM's h)
    memory_saliency: float32 [T+1, W] or None: row t, column k: the share of step t's decision that comes from
              observation t-k through the memory (NaN where t-k < 0; :mod:`rlviz.explain.memory`)
    memory_kind: the policy's ``memory_kind`` ("lstm", "gru", "other"; "" without memory)
    memory_start_gap: with a state the loop annotated (``annotate(state=...)``): how far the state it carried into
              the episode's first step is from the initial state (None otherwise; > 1e-6: ``state_not_reset``)
    saliency_keys: for a Dict observation's per-entry saliency [T+1, D]: which entries are which key
              (:class:`rlviz.explain.dict_obs.KeySlice` tuples; image keys are drawn as maps), else None
    """

    entropy: np.ndarray
    returns_to_go: np.ndarray
    gamma: float
    saliency: np.ndarray | None = None
    saliency_label: str = ""
    extras: dict | None = None
    action_masks: np.ndarray | None = None
    memory: np.ndarray | None = None
    memory_saliency: np.ndarray | None = None
    memory_kind: str = ""
    memory_start_gap: float | None = None
    saliency_keys: tuple | None = None
