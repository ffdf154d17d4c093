"""What :class:`~rlviz.record.RecordEpisode` settles at construction: gymnasium's default video schedule,
the error for envs that render no image, and the labels of the action bars."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..agent.actions import action_names_for
from ..errors import EnvError, UsageError

__all__ = ["RenderModeError", "capped_cubic_video_schedule", "action_labels", "probe_callable", "input_shape", "short_repr"]

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


def input_shape(fn: Any) -> tuple[int, ...] | None:
    """The observation shape a network takes, where its first layer says it (a ``Linear``: ``(in_features,)``, a
    convolution: ``(in_channels, ...)``); None otherwise. Read from attributes: torch is not imported here."""
    modules = getattr(fn, "modules", None)
    if not callable(modules):
        return None
    try:
        for module in modules():
            if isinstance(getattr(module, "in_features", None), int):
                return (int(module.in_features),)
            if isinstance(getattr(module, "in_channels", None), int):
                return (int(module.in_channels),)
    except Exception:  # a module-like object without torch's modules()
        return None
    return None


def short_repr(obj: Any, limit: int = 80) -> str:
    """``repr(obj)`` on one line (a multi-line one, e.g. a ``Sequential``, as ``<ClassName>``), at most ``limit`` long."""
    text = repr(obj)
    if "\n" in text or len(text) > limit:
        return f"<{type(obj).__name__}>"
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def probe_callable(policy: Any, fn: Any, observation_space: Any, owner: str = "RecordEpisode") -> None:
    """One forward of a policy the recorder wrapped (a callable or a ``torch.nn.Module``) on a sampled observation,
    so one that does not fit the env fails at construction, in one line naming both shapes, not when the first
    episode ends; a callable that is not a policy (a trigger passed where RecordVideo takes it) likewise."""
    try:
        sample = np.asarray(observation_space.sample(), dtype=np.float32)[None]
    except (AttributeError, NotImplementedError, TypeError, ValueError):  # spaces that cannot be sampled as an array
        return
    hint = f" {_TRIGGER_HINT}." if owner == "RecordEpisode" and input_shape(fn) is None else ""
    try:
        policy.evaluate(sample)
    except UsageError as exc:
        raise UsageError(f"{exc}{hint}") from exc
    except Exception as exc:  # the user's callable failed on a batch of one observation
        want = input_shape(fn)
        takes = f"takes observations of shape {want}" if want is not None else "failed"
        raise UsageError(f"{owner}(policy={short_repr(fn)}) {takes}, but the env's observations have shape "
                         f"{tuple(sample.shape[1:])} (on a batch of one observation [1, *obs_shape]: "
                         f"{_first_line(exc)}); pass the policy made for this env (a policy maps a batch of "
                         f"observations to logits).{hint}") from exc
