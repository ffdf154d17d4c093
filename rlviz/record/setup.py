"""What :class:`~rlviz.record.RecordEpisode` settles at construction: gymnasium's default video schedule,
the error for envs that render no image, and the labels of the action bars."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..agent.actions import action_names_for
from ..errors import EnvError, UsageError

__all__ = ["RenderModeError", "capped_cubic_video_schedule", "action_labels", "probe_callable"]

_TRIGGER_HINT = ("RecordEpisode's third argument is the policy (gymnasium RecordVideo's is episode_trigger): pass "
                 "triggers by name, episode_trigger=...")


class RenderModeError(EnvError, ValueError):
    """The env renders no image (a ``ValueError``, as gymnasium's ``RecordVideo`` raises)."""


def capped_cubic_video_schedule(episode_id: int) -> bool:
    """gymnasium's default trigger: episodes 0, 1, 8, 27, ..., 729, 1000, then every 1000th."""
    if episode_id < 1000:
        return int(round(episode_id ** (1.0 / 3))) ** 3 == episode_id
    return episode_id % 1000 == 0


def action_labels(env: Any, spec: Any, action_names: Any = None) -> tuple[Any, ...]:
    """One label per bar: ``action_names`` when given, ALE's / MinAtar's names for Discrete, else the spec's."""
    if spec.kind != "discrete":
        if action_names is not None and len(action_names) == spec.size:
            return tuple(str(n) for n in action_names)
        return tuple(spec.names())
    n = spec.size
    if action_names is not None and len(action_names) != n:
        raise UsageError(f"action_names has {len(action_names)} names for Discrete({n}) actions.")
    return tuple(str(a) for a in (action_names or action_names_for(env, n)))


def probe_callable(policy: Any, fn: Any, observation_space: Any) -> None:
    """One forward of a callable policy on a sampled observation, so a callable that is not a policy (a trigger
    passed where RecordVideo takes it) fails at construction, not when the first episode ends."""
    try:
        sample = np.asarray(observation_space.sample(), dtype=np.float32)[None]
    except (AttributeError, NotImplementedError, TypeError, ValueError):  # spaces that cannot be sampled as an array
        return
    try:
        policy.evaluate(sample)
    except UsageError as exc:
        raise UsageError(f"{exc} {_TRIGGER_HINT}.") from exc
    except Exception as exc:  # the user's callable failed on a batch of one observation
        raise UsageError(f"policy={fn!r} failed on a batch of one observation [1, *obs_shape] ({type(exc).__name__}: "
                         f"{exc}); a policy maps a batch of observations to logits. {_TRIGGER_HINT}.") from exc
