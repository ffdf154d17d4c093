"""An env's exact state, saved and restored with its wrappers: the branches of :mod:`rlviz.disagree` start two
policies from the same saved state.

A snapshot is a deep copy of the whole wrapper stack (frame stacks, time limits, episodic-life counters, the
env's ``np_random``: everything a wrapper keeps is Python state), taken when :func:`save` is called; each
:func:`restore` gives a fresh copy of it, so one snapshot starts any number of branches. What is exact:

- ALE (``ale_py`` 0.9+): the emulator is a C++ handle that a deep copy cannot duplicate, so the copy shares it,
  and its state is saved with ``ALEInterface.cloneState(include_rng=True)`` (RAM, CPU, TIA, frame counters and
  the RNG of sticky actions) and put back by :func:`restore` (``restoreState``). The copies share one emulator:
  play the branches one after another, each restored just before it plays.
- MinAtar (its ``Environment``: the game's state and its ``numpy`` RandomState), classic control (the env's
  ``state`` and ``np_random``; its pygame window and clock are left out of the copy) and any env whose deep copy plays on exactly as the original: the copy itself.
  Callers check that with :func:`rlviz.evaluate.failures.pixel_heatmap.copies_faithfully` once per env
  (:func:`restorable_kind` does).
- Box2D (SWIG bodies) and others whose copy fails: :class:`NotRestorable`.

The frame on the screen is not part of ALE's saved state: record the saved state's frame with the snapshot
(``frame``) rather than render the restored env before its first step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..errors import EnvError
from .ale_seed import is_ale

__all__ = ["EnvSnapshot", "NotRestorable", "save", "restore", "snapshot_kind"]


class NotRestorable(EnvError):
    """The env's state cannot be saved and restored exactly."""


@dataclass(frozen=True)
class EnvSnapshot:
    """One saved env state. kind: "ale" (the copy shares the emulator; ``ale_state`` its ALEState) or "copy";
    env: the wrapper stack as it was (never stepped: :func:`restore` copies it); frame: uint8 [H, W, 3] or None,
    what the env showed at the saved state."""

    kind: str
    env: Any
    ale_state: Any = None
    frame: Any = None


def snapshot_kind(env: Any) -> str:
    """"ale" or "copy": how :func:`save` saves ``env`` (a copy's faithfulness is the caller's check)."""
    return "ale" if is_ale(env) else "copy"


def _copy(env: Any, shared: Any) -> Any:
    """A deep copy of the wrapper stack; ``shared`` (ALE's env) is not copied, nor is a renderer's window or clock
    (pygame objects, which cannot be copied: the copy makes its own when it renders)."""
    memo: dict[int, Any] = {} if shared is None else {id(shared): shared}
    for value in vars(env.unwrapped).values():
        if type(value).__module__.split(".")[0] == "pygame":
            memo[id(value)] = None
    return copy.deepcopy(env, memo)


def save(env: Any, frame: Any = None) -> EnvSnapshot:
    """The state of ``env`` now (it plays on unchanged). Raises :class:`NotRestorable` when it cannot be copied."""
    kind = snapshot_kind(env)
    # ALE: AtariEnv pickles by rebuilding itself from its arguments (a new emulator); the copies share it instead,
    # and its own Python attributes (its np_random) are saved beside the emulator's state
    shared = env.unwrapped if kind == "ale" else None
    try:
        stack = _copy(env, shared)
        ale_state = None
        if shared is not None:
            ale_state = (shared.ale.cloneState(include_rng=True),
                         {k: copy.deepcopy(v) for k, v in vars(shared).items() if k != "ale"})
    except Exception as exc:  # SWIG/Box2D bodies, GL contexts, other native handles
        raise NotRestorable(f"{type(env.unwrapped).__name__} cannot be copied ({type(exc).__name__}: {exc}); "
                            "its state cannot be saved and restored.") from exc
    return EnvSnapshot(kind, stack, ale_state, frame)


def restore(snap: EnvSnapshot) -> Any:
    """A new env at ``snap``'s state, ready to step (an ALE copy's shared emulator is restored now)."""
    shared = snap.env.unwrapped if snap.kind == "ale" else None
    env = _copy(snap.env, shared)
    if shared is not None:
        state, attrs = snap.ale_state
        shared.ale.restoreState(state)
        vars(shared).update(copy.deepcopy(attrs))
    return env
