"""Host work every K training updates, from inside a jit-compiled loop: :func:`every`.

PureJaxRL-style loops compile the whole of training (``jax.jit(train)``, ``lax.scan`` over updates); nothing leaves
the compiled code but what ``jax.debug.callback`` sends. :func:`every` sends ``args`` to ``fn`` on the host when the
update counter is a multiple of ``k``, inside ``lax.cond`` so the other updates transfer nothing. It only reads: the
loop computes exactly what it computes without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import UsageError

__all__ = ["every"]


def every(k: int, step: Any, fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(step, *args)`` on the host (numpy arrays) when ``step % k == 0``; a no-op on other steps.

    Args:
        k: a positive int: how many updates apart the calls are.
        step: the update counter (int32 [] traced, or a Python int), e.g. the loop's ``update_step``; under
            ``jax.vmap`` (one training run per seed) each run's call comes separately, as ``jax.debug.callback``'s.
        fn: a host function; its return value is ignored. Exceptions it raises surface when the loop's result is
            read (``jax.block_until_ready``).
        args: pytrees of arrays (``traj_batch``, ``train_state.params``, ...), passed to ``fn`` as numpy.

    When ``fn`` has an ``on_device(*args) -> args`` method (:func:`rlviz.jax.batch_recorder`'s recorder has one),
    it is called on the traced args first and only what it returns goes through the ``lax.cond`` to the host (the
    recorder keeps the env columns it draws: env 0's slice of a ``[T, N, ...]`` batch, not all N), so the loop's
    compiled update carries and transfers less.

    Use inside ``jax.jit`` / ``lax.scan`` bodies; outside them it calls ``fn`` directly when the step matches.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise UsageError(f"every(k={k!r}): expected a positive int, the number of updates between calls.")
    import jax
    import numpy as np

    def host(step_value: Any, *host_args: Any) -> None:
        # checked again here: under vmap with a batched counter, lax.cond runs both branches
        if int(step_value) % k == 0:
            fn(int(step_value), *jax.tree_util.tree_map(np.asarray, host_args))

    def send(step_value: Any, *traced: Any) -> None:
        jax.debug.callback(host, step_value, *traced)

    def skip(step_value: Any, *traced: Any) -> None:
        return None

    narrow = getattr(fn, "on_device", None)
    if callable(narrow):
        args = tuple(narrow(*args))
    jax.lax.cond(jax.numpy.asarray(step) % k == 0, send, skip, step, *args)
