"""A loop's own recurrent state, handed to a recorder with each step (``annotate(state=...)``; docs/memory.md):
read as numpy without importing torch, checked, and turned into what the memory panel and the ``.npz`` show.

The state annotated at step t is the one the loop's policy reads for step t's decision: the state it carried into
the step, after the loop's own reset at an episode start (a forward that zeroes it by a ``done`` /
``episode_start`` mask: the state after that mask). A torch tensor or a numpy array, or a tuple / list of them
(an LSTM's ``(h, c)``); one env's for ``RecordEpisode`` (``[H]``, ``[1, H]``, or ``nn.LSTM``'s
``[layers, 1, H]``), every sub-env's for ``RecordVectorEpisode`` (``[num_envs, H]`` or ``[layers, num_envs, H]``).
The memory shown (:func:`memory_row`) is the first part's last layer (an LSTM's h, not c), flattened; the
episode-start check (:func:`state_start_gap`) reads every part.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..episode.memory import RESET_ATOL, start_gap
from ..errors import UsageError
from .arrays import as_numpy

__all__ = ["STATE_KEY", "one_env_state", "state_parts", "memory_row", "state_start_gap", "env_state_rows", "state_memory_kind",
           "warn_not_reset"]

#: the annotation's name: ``annotate(state=...)``
STATE_KEY = "state"

_EXPECTED = "a torch tensor or numpy array of numbers, or a tuple of them (an LSTM's (h, c))"


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number, bool, np.bool_))


def _split(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (tuple, list)) and value and not all(_is_number(v) for v in value):
        return tuple(value)
    return (value,)


def _array(part: Any, where: str) -> np.ndarray:
    if isinstance(part, (str, bytes, dict)) or part is None:
        raise UsageError(f"annotate(state=...) received a {type(part).__name__}{where}; expected {_EXPECTED}.")
    try:
        arr = as_numpy(part)
    except (TypeError, ValueError, RuntimeError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise UsageError(f"annotate(state=...) received a {type(part).__name__}{where} that is not an array of numbers "
                         f"({reason}); expected {_EXPECTED}.") from None
    if arr.dtype.kind not in "biuf":
        raise UsageError(f"annotate(state=...) received {arr.dtype} values{where}; expected {_EXPECTED}.")
    if arr.size == 0:
        raise UsageError(f"annotate(state=...) received an empty array {arr.shape}{where}; expected the state's "
                         "numbers, e.g. h [1, H] or (h, c).")
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(np.float32)
    if not np.isfinite(out).all():
        raise UsageError(f"annotate(state=...) received a non-finite number (NaN or inf, or beyond float32){where}; "
                         "expected a finite state: check the recurrent layer for a diverged run.")
    return out


def state_parts(value: Any) -> tuple[np.ndarray, ...]:
    """One env's annotated state as float32 arrays, one per part; anything else is one :class:`UsageError` line."""
    parts = _split(value)
    return tuple(_array(p, f" (part {i} of {len(parts)})" if len(parts) > 1 else "") for i, p in enumerate(parts))


def memory_row(parts: tuple[np.ndarray, ...]) -> np.ndarray:
    """float32 [D]: the memory shown for one env's state (the first part's last layer, flattened)."""
    h = parts[0]
    return (h[-1] if h.ndim == 3 else h).reshape(-1)


def state_memory_kind(parts: tuple[np.ndarray, ...]) -> str:
    """The ``memory_kind`` of an annotated state: "lstm" for a pair (h, c) (h = o * tanh(c): within [-1, 1]),
    "other" otherwise (saturation is not judged on it)."""
    return "lstm" if len(parts) == 2 else "other"


def state_start_gap(parts: tuple[np.ndarray, ...]) -> float:
    """The largest |number| of a state annotated at an episode's first step (every part): its distance from the
    initial state, zeros (nn.LSTM's and nn.GRU's default, CleanRL's, sb3-contrib's)."""
    flat = np.concatenate([p.reshape(-1) for p in parts])
    return start_gap(flat, np.zeros_like(flat))


def one_env_state(value: Any) -> None:
    """Refuse (one line) a state given for ONE env that holds several rows: each part must be ``[H]``, ``[1, H]`` or
    nn.LSTM's ``[layers, 1, H]`` (the vector recorder's rule, :func:`env_state_rows`, with one sub-env; a ``[3, 64]``
    state was shown as one 192-unit memory)."""
    for i, p in enumerate(state_parts(value)):
        if not (p.ndim == 1 or (p.ndim == 2 and p.shape[0] == 1) or (p.ndim == 3 and p.shape[1] == 1)):
            raise UsageError(f"annotate(state=...) received a part {i} of shape {list(p.shape)} for one env; "
                             "expected one row: [H], [1, H] or nn.LSTM's [layers, 1, H] (a vector env's states go "
                             "to RecordVectorEpisode.annotate).")


def env_state_rows(value: Any, rows: list[int], num_envs: int) -> list[tuple[np.ndarray, ...]]:
    """Each sub-env of ``rows``'s state from the state of all ``num_envs`` (each part ``[num_envs, ...]``, or
    ``[layers, num_envs, H]`` as nn.LSTM / nn.GRU keep it)."""
    parts = state_parts(value)
    axes = []
    for i, p in enumerate(parts):
        if p.ndim >= 1 and p.shape[0] == num_envs:
            axes.append(0)
        elif p.ndim == 3 and p.shape[1] == num_envs:
            axes.append(1)
        else:
            raise UsageError(f"annotate(state=...) received a part {i} of shape {list(p.shape)}; expected one row per "
                             f"sub-env ({num_envs}): [{num_envs}, H] or nn.LSTM's [layers, {num_envs}, H].")
    return [tuple(p[j] if a == 0 else p[:, j : j + 1] for p, a in zip(parts, axes)) for j in rows]


def warn_not_reset(who: str, gap: float | None) -> bool:
    """Warn ``state_not_reset`` (one line, at the loop's ``annotate`` call) when the state annotated at ``who``'s
    first step is ``gap`` away from the initial (zero) state; whether it warned (False: reset, or no state
    annotated at that step)."""
    if gap is None or gap <= RESET_ATOL:
        return False
    warnings.warn(f"state_not_reset: {who} started with an annotated state that is not the initial (zero) state (largest "
            f"difference {gap:.3g}): the loop carried its memory across the episode boundary, so the episode starts "
            "with the last one's memory. Reset it where the env resets (zeros, or policy.initial_state(1)); each such "
            "episode's .npz holds state_not_reset=True (said once per recorder).", UserWarning, stacklevel=3)
    return True
