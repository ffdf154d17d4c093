"""Which file names may hold an agent: read by a training run's discovery (:mod:`.run_folders`) and by the hint a
folder given as a model gets (:mod:`.zoo`). Names only: no file is opened here."""

from __future__ import annotations

import re

__all__ = ["AGENT_SUFFIXES", "NOT_AGENT", "is_agent_name"]

#: File endings that may hold an agent (anything else in RUN is never opened); ``.msgpack``: flax params
#: (``flax.serialization.to_bytes``, read with ``--model``/``--critic`` on a JAX env, or a CleanRL JAX save).
AGENT_SUFFIXES = (".zip", ".pt2", ".pt", ".pth", ".cleanrl_model", ".msgpack")
#: Names that are not agents even with an agent's ending (SB3 replay buffers, VecNormalize statistics).
NOT_AGENT = re.compile(r"replay_buffer|vecnormalize", re.IGNORECASE)


def is_agent_name(name: str) -> bool:
    """True for a name with an agent's ending that does not name a replay buffer or VecNormalize statistics."""
    return name.endswith(AGENT_SUFFIXES) and not NOT_AGENT.search(name)
