"""A PureJaxRL-style training loop's batch on the host: its fields read (:func:`read_batch`) and its episodes cut at
``done`` (:func:`cut_episodes`), numpy only. The videos are written by :mod:`rlviz.jax_loop.recording`.

PureJaxRL's ``Transition`` holds, per step ``t`` of env ``n``: ``obs[t, n]`` (what the policy saw), ``action``,
``reward`` and ``done`` (the step's: ``done[t, n]`` True when that step ended the episode; gymnax's auto-reset then
gives ``obs[t + 1, n]`` of the next episode), ``value`` and ``log_prob``. An episode is the rows after a ``done`` (or
the batch's first row) up to and including the next ``done``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["BatchFields", "BatchEpisode", "read_batch", "cut_episodes", "leading_columns", "FIELDS", "STATE_FIELDS"]

#: the ``Transition`` fields rlviz reads (others, such as ``info``, are left alone)
FIELDS = ("obs", "action", "reward", "done", "value", "log_prob", "logits", "mean", "std")
#: where a loop that keeps the env states puts them (the state before step t, the one ``obs[t]`` was observed in)
STATE_FIELDS = ("env_state", "state")


@dataclass(frozen=True)
class BatchFields:
    """A batch of T steps of N envs, numpy on the host.

    obs: [T, N, *obs]; action: int [T, N] (Discrete) or float32 [T, N, D] (Box); reward: float32 [T, N];
    done: bool [T, N]; value, log_prob: float32 [T, N] or None; logits: float32 [T, N, A] or None (a Categorical's);
    mean, std: float32 [T, N, D] or None (a Gaussian's; std may be [D] or [T, N, D]); env_state: a pytree of numpy
    leaves [T, N, ...] (the state before each step) or None.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    value: np.ndarray | None = None
    log_prob: np.ndarray | None = None
    logits: np.ndarray | None = None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    env_state: Any = None

    @property
    def steps(self) -> int:
        return int(self.done.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.done.shape[1])


@dataclass(frozen=True)
class BatchEpisode:
    """Rows ``start .. stop - 1`` of env column ``env``: one episode (or its part inside the batch).

    whole: it starts and ends inside the batch (its first row follows a ``done``, or is row 0 of a batch that starts
    at a reset); ended: its last row is a ``done``."""

    env: int
    start: int
    stop: int
    whole: bool
    ended: bool

    @property
    def length(self) -> int:
        return self.stop - self.start


def _field(batch: Any, name: str) -> Any:
    if isinstance(batch, Mapping):
        return batch.get(name)
    return getattr(batch, name, None)


def _host(value: Any) -> Any:
    if value is None:
        return None
    import jax

    return jax.tree_util.tree_map(np.asarray, jax.device_get(value))


def read_batch(traj_batch: Any) -> BatchFields:
    """The fields of ``traj_batch`` (a NamedTuple, dataclass or dict of [T, N, ...] arrays, jax or numpy) as
    :class:`BatchFields`, their leading shapes checked against ``done``'s."""
    missing = [n for n in ("obs", "action", "reward", "done") if _field(traj_batch, n) is None]
    if missing:
        raise UsageError(f"traj_batch ({type(traj_batch).__name__}) has no {', '.join(missing)}; expected PureJaxRL's "
                         "Transition: obs, action, reward, done (and value, log_prob, logits or mean/std) as [T, N, ...] "
                         "arrays.")
    got = {n: _host(_field(traj_batch, n)) for n in FIELDS}
    state = next((_field(traj_batch, n) for n in STATE_FIELDS if _field(traj_batch, n) is not None), None)
    done = np.asarray(got["done"])
    if done.ndim == 1:  # one env: [T] -> [T, 1]
        got = {k: None if v is None else np.asarray(v)[:, None] for k, v in got.items()}
        state = None if state is None else _host(state)
        if state is not None:
            import jax

            state = jax.tree_util.tree_map(lambda a: a[:, None], state)
        done = np.asarray(got["done"])
    elif done.ndim != 2:
        raise UsageError(f"traj_batch.done has shape {done.shape}; expected [T, N] (steps, envs).")
    else:
        state = _host(state)
    lead = done.shape
    for name, v in got.items():
        if v is not None and name != "std" and tuple(np.shape(v)[:2]) != lead:
            raise UsageError(f"traj_batch.{name} has shape {np.shape(v)}; expected [T, N, ...] = {lead} first, as done's.")
    if got["logits"] is None and got["mean"] is None:
        raise UsageError("traj_batch has no logits (or mean/std): the probability panel draws the policy's distribution. "
                         "Add it to your Transition (e.g. logits=pi.logits, or mean=pi.loc, std=pi.scale for a Gaussian).")
    if state is not None:
        state = _unwrapped_state(state)
    f32 = {k: None if got[k] is None else np.asarray(got[k], np.float32)
           for k in ("reward", "value", "log_prob", "logits", "mean", "std")}
    action = np.asarray(got["action"])
    return BatchFields(np.asarray(got["obs"]), action, f32["reward"], done.astype(bool), f32["value"],  # type: ignore[arg-type]
                       f32["log_prob"], f32["logits"], f32["mean"], f32["std"], state)


def _unwrapped_state(state: Any) -> Any:
    """The env's own state inside wrappers' states (PureJaxRL's ``LogEnvState(env_state=...)``)."""
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def cut_episodes(done: np.ndarray, envs: Sequence[int] | None = None, *, from_reset: bool = False,
                 partial: bool = False) -> list[BatchEpisode]:
    """The episodes of ``done`` (bool [T, N]) in env columns ``envs`` (None: all), env by env, in time order.

    from_reset: row 0 starts an episode in every column (the loop's first batch, after its reset); else the rows
    before a column's first ``done`` continue an episode begun before the batch. partial: also the parts cut by the
    batch's edges (``whole`` False); else whole episodes only."""
    done = np.asarray(done, bool)
    steps, n = done.shape
    columns = list(range(n)) if envs is None else [int(i) for i in envs]
    bad = [i for i in columns if not -n <= i < n]
    if bad:
        raise UsageError(f"envs={list(envs or [])}: {bad} not among the batch's {n} envs (0..{n - 1}).")
    out = []
    for i in columns:
        i %= n
        ends = np.flatnonzero(done[:, i])
        starts = np.concatenate([[0], ends + 1])
        stops = np.concatenate([ends + 1, [steps]])
        for s, e in zip(starts.tolist(), stops.tolist()):
            if e <= s:
                continue
            ended = bool(done[e - 1, i])
            whole = ended and (s > 0 or from_reset)
            if whole or partial:
                out.append(BatchEpisode(i, int(s), int(e), whole, ended))
    return out


def leading_columns(traj_batch: Any, envs: Sequence[int] | None) -> tuple[Any, int | None]:
    """(``traj_batch`` with only its env columns ``0..max(envs)``, the batch's N): every leaf shaped ``[T, N, ...]``
    like ``done`` sliced ``[:, :max(envs) + 1]`` (jax or numpy arrays: traced inside a jitted update too), so env
    ``e`` stays column ``e``; ``envs`` None or empty, or a batch without a ``[T, N]`` ``done``: unchanged (N None when
    there is no such ``done``)."""
    done = traj_batch.get("done") if isinstance(traj_batch, dict) else getattr(traj_batch, "done", None)
    shape = tuple(getattr(done, "shape", ()))
    if len(shape) != 2:
        return traj_batch, None
    keep = min(max(int(e) for e in envs) + 1, shape[1]) if envs else shape[1]
    if keep >= shape[1]:
        return traj_batch, int(shape[1])
    import jax

    def narrow(a: Any) -> Any:
        return a[:, :keep] if tuple(getattr(a, "shape", ())[:2]) == shape else a

    return jax.tree_util.tree_map(narrow, traj_batch), int(shape[1])
