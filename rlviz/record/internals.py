"""An episode's internals: from a policy (batched, after the episode), from ``annotate()`` calls made by the
user's loop (one per step), or both (annotated numbers win); and the per-step ``.npz`` written beside a video."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..agent.actions import ActionSpec
from ..agent.capabilities import capabilities_of
from ..agent.obs import FlatView, ObsAdapter, is_plain
from ..agent.policy_output import PolicyOutput
from ..episode.trace import EpisodeInternals, EpisodeTrace, returns_to_go
from ..errors import UsageError
from ..explain.attribution import attribution_class
from .annotated_state import STATE_KEY, memory_row, state_memory_kind, state_parts, state_start_gap
from .arrays import as_numpy

if TYPE_CHECKING:  # torch is imported only when a policy is evaluated (annotations alone need none)
    from ..agent.policy import Policy

__all__ = ["Annotations", "compute_internals", "episode_arrays", "save_episode_data"]

_NAMED = ("logits", "value", "mean", "std", "log_std")


class Annotations:
    """What a loop told the recorder about each step (``RecordEpisode.annotate``): one row per step.
    ``spec``: the env's actions, to check the sizes of logits / mean / std when they are given."""

    def __init__(self, spec: ActionSpec | None = None):
        self.rows: dict[str, list[Any]] = {}
        self.spec = spec
        self._sizes_of: tuple[ActionSpec | None, dict[Any, Any]] | None = None
        self._warned: set[str] = set()
        self.states: list[tuple[int, np.ndarray]] = []  # annotate(state=...): (step, memory row [D])
        self.state_kind = ""
        self.start_gap: float | None = None  # the state annotated at step 0: how far from the initial (zero) state

    def __bool__(self) -> bool:
        return bool(self.rows)

    def _sizes(self) -> dict[Any, Any]:
        cached = self._sizes_of
        if cached is not None and cached[0] is self.spec:
            return cached[1]
        sizes = self._sizes_for(self.spec)
        self._sizes_of = (self.spec, sizes)  # (one dict per spec: add() runs once per step and agent)
        return sizes

    @staticmethod
    def _sizes_for(spec: ActionSpec | None) -> dict[Any, Any]:
        if spec is None:
            return {}
        if spec.continuous:
            return {"mean": (spec.size,), "std": (spec.size,), "log_std": (spec.size,), "logits": ()}
        sizes = (spec.size, len(spec.nvec or ())) if spec.kind == "multi_binary" else (spec.size,)
        return {"logits": sizes, "mean": (), "std": (), "log_std": ()}

    def add(self, step: int, fields: dict[Any, Any]) -> None:
        """Validate every field, then store them as the annotations of ``step``."""
        checked, sizes = {}, self._sizes()
        state = fields.get(STATE_KEY)
        parts = None if state is None else self._state(step, state)
        for key, v in fields.items():
            if v is None or key == STATE_KEY:
                continue
            want = sizes.get(key, (1,))
            what = "one number per step, e.g. annotate(q_taken=float(q[a]))" if key not in _NAMED else (
                "one number per step, the state's value, e.g. annotate(value=float(v))" if key == "value" else
                f"{' or '.join(map(str, want))} numbers (one per action)" if want else "nothing for this space")
            arr = _numbers(key, v, what)
            if arr.size not in want:
                raise UsageError(f"annotate({key}=...) received {arr.size} numbers; expected {what}"
                                 f"{'' if key in _NAMED else ': extra annotations are scalars'}.")
            col = self.rows.get(key)
            if col and col[-1][1].size != arr.size:
                raise UsageError(f"annotate({key}=...) received {arr.size} numbers at step {step} and "
                                 f"{col[-1][1].size} before; pass the same shape every step.")
            checked[key] = self._finite(key, arr, step)
        for key, arr in checked.items():
            col = self.rows.setdefault(key, [])
            if col and col[-1][0] == step:
                col[-1] = (step, arr)
            else:
                col.append((step, arr))
        if parts is not None:
            if self.states and self.states[-1][0] == step:
                self.states.pop()
            self.states.append((step, memory_row(parts)))
            self.state_kind = state_memory_kind(parts)
            if step == 0:
                self.start_gap = state_start_gap(parts)

    def _state(self, step: int, value: Any) -> tuple[np.ndarray, ...]:
        """``annotate(state=...)`` checked (:mod:`rlviz.record.annotated_state`): the same size every step."""
        parts = state_parts(value)
        row = memory_row(parts)
        if self.states and (self.states[-1][1].size != row.size or state_memory_kind(parts) != self.state_kind):
            raise UsageError(f"annotate(state=...) received {len(parts)} part(s) with {row.size} memory units at step "
                             f"{step} and {self.states[-1][1].size} before; pass the same state layout every step.")
        return parts

    def memory(self, num_steps: int) -> np.ndarray | None:
        """float32 [T+1, D]: row t the memory of the state annotated at step t (NaN where none was given); the frame
        after the last step repeats the last step's. None without ``annotate(state=...)``."""
        if not self.states:
            return None
        out = np.full((num_steps + 1, self.states[0][1].size), np.nan, np.float32)
        for t, row in self.states:
            if 0 <= t < num_steps:
                out[t] = row
        out[num_steps] = out[num_steps - 1] if num_steps > 0 else self.states[-1][1]
        return out

    def _finite(self, key: str, arr: np.ndarray, step: int) -> np.ndarray:
        """Non-finite numbers, said once per key and video: logits keep -inf (an impossible action, probability 0)
        and +inf (a certain one: the +inf actions share probability 1); a NaN among them (or all -inf) leaves that
        step's probabilities empty (NaN). A Box action's ``mean`` / ``std`` / ``log_std``: that step shows the last
        finite step's distribution. Other fields (value, extras): NaN and +-inf are drawn as gaps (NaN)."""
        if arr.size == 1 and math.isfinite(arr[0]) or arr.size > 1 and np.isfinite(arr).all():
            return arr
        finite = np.isfinite(arr)
        if finite.all():  # (empty)
            return arr
        if key == "logits":
            if not (np.isnan(arr).any() or np.isneginf(arr).all()):
                return arr  # -inf / +inf: probabilities 0 / shared 1, as the softmax's limits
            said = "its action probabilities are left empty (NaN)"
        else:
            arr = np.where(finite, arr, np.float32(np.nan))
            said = "that step shows the last finite step's distribution" if key in _NAMED[2:] else "drawn as a gap"
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"annotate({key}=...) received a non-finite number (NaN or inf) at step {step}: {said} "
                          "(said once per video).", stacklevel=4)
        return arr
    def array(self, key: str, num_steps: int) -> np.ndarray | None:
        """float32 [T+1, n]: row t is the annotation of step t (NaN where none was given); the frame after the last
        step shows the last step's."""
        col = self.rows.get(key)
        if not col:
            return None
        out = np.full((num_steps + 1, col[0][1].size), np.nan, dtype=np.float32)
        for t, arr in col:
            if 0 <= t < num_steps:
                out[t] = arr
        out[num_steps] = out[num_steps - 1] if num_steps > 0 else col[-1][1]
        return out


def _numbers(key: str, value: Any, what: str) -> np.ndarray:
    """An annotation as a flat float32 array; anything that is not numbers (a string, a ragged list, a dict) is one
    :class:`UsageError` line."""
    if type(value) is float or type(value) is int:  # the common cases first: a number, a float array
        return np.array((value,), np.float32)
    if type(value) is np.ndarray and value.dtype.kind == "f":
        return value.astype(np.float32, copy=False).reshape(-1)
    try:
        arr = as_numpy(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"annotate({key}=...) received a {type(value).__name__} that is not an array of numbers "
                         f"({reason[:120]}); expected {what}: a number, a list, a numpy array or a tensor.") from None
    if arr.dtype.kind not in "biuf":
        raise UsageError(f"annotate({key}=...) received {type(value).__name__} of {arr.dtype} values; expected {what} "
                         "as numbers (a number, a list, a numpy array or a tensor), not text.")
    return arr.astype(np.float32, copy=False).reshape(-1)


def _softmax_parts(logits: np.ndarray, nvec: tuple[Any, ...] | None) -> np.ndarray:
    def sm(x: Any) -> Any:
        with warnings.catch_warnings():  # steps without logits (value annotated alone) are all NaN: NaN stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            z = np.exp(x - np.nanmax(x, axis=-1, keepdims=True))
            p = z / z.sum(-1, keepdims=True)
            certain = np.isposinf(x)  # +inf logits: the limit of the softmax, those actions share probability 1
            rows = certain.any(-1) & ~np.isnan(x).any(-1)
            if rows.any():
                p[rows] = certain[rows] / certain[rows].sum(-1, keepdims=True)
        return p

    if nvec is None:
        return np.asarray(sm(logits.astype(np.float64)), np.float32)
    parts = np.split(logits.astype(np.float64), np.cumsum(nvec)[:-1], axis=-1)
    return np.concatenate([sm(p) for p in parts], axis=-1).astype(np.float32)


def _annotated_output(ann: Annotations, n: int, spec: ActionSpec, squash: bool) -> PolicyOutput:
    """The annotated steps as a PolicyOutput over the T+1 frames."""
    value = ann.array("value", n - 1)
    value = None if value is None else value[:, 0]
    kind = "actor_critic" if value is not None else "logits"
    if spec.continuous:
        mean = ann.array("mean", n - 1)
        if mean is None:
            raise UsageError("annotate() on a Box action space takes mean=... (and std= or log_std=); got none.")
        std = ann.array("std", n - 1)
        log_std = ann.array("log_std", n - 1)
        std = np.exp(log_std) if std is None and log_std is not None else std
        mean, std = _held(mean), None if std is None or not np.isfinite(std).any() else _held(std)
        return PolicyOutput(mean, np.zeros((n, 0), np.float32), value, kind, mean=mean, std=std, squash=squash,
                            low=spec.low, high=spec.high)
    logits = ann.array("logits", n - 1)
    if logits is None:
        raise UsageError("annotate() needs logits=... for a discrete action space (value=... and extras are optional).")
    nvec = spec.nvec if spec.kind != "discrete" else None
    if spec.kind == "multi_binary" and logits.shape[1] == len(spec.nvec or ()):
        logits = np.stack([np.zeros_like(logits), logits], -1).reshape(n, -1)
    if logits.shape[1] != spec.size:
        raise UsageError(f"annotate(logits=...) received {logits.shape[1]} numbers; the action space has "
                         f"{spec.size} (one per action).")
    return PolicyOutput(logits, _softmax_parts(logits, nvec), value, kind, nvec=nvec)


def _held(rows: np.ndarray) -> np.ndarray:
    """Box panels draw a distribution on every frame: a step without finite numbers (not annotated, or NaN / inf)
    shows the last step's before it (the first annotated one's before any); none at all: zeros."""
    out = np.array(rows, np.float32, copy=True)
    good = np.asarray(np.isfinite(out).all(axis=-1), dtype=bool).reshape(len(out))
    if not good.any():
        return np.zeros_like(out)
    last = out[int(np.argmax(good))]
    for t in range(len(out)):
        if good[t]:
            last = out[t]
        else:
            out[t] = last
    return out


def _merge(out: PolicyOutput | None, ann: PolicyOutput | None) -> PolicyOutput | None:
    """The policy's output with the annotated numbers in its place (annotations win)."""
    if out is None or ann is None:
        return out if ann is None else ann
    value = ann.value if ann.value is not None else out.value
    kind = "actor_critic" if ann.value is not None else out.kind
    return PolicyOutput(ann.logits, ann.probs, value, kind, ann.nvec, ann.mean, ann.std, ann.squash, ann.low, ann.high)


def compute_internals(
    trace: EpisodeTrace,
    policy: Policy | None,
    gamma: float = 0.99,
    saliency: str | None = None,
    saliency_target: str | int = "action",
    annotations: Annotations | None = None,
    spec: ActionSpec | None = None,
    observation_space: Any = None,
) -> EpisodeInternals:
    """What ``policy`` (and the loop's ``annotations``) say on each of the T+1 frames of ``trace``, in batches.

    The return-to-go after a time-limit truncation is bootstrapped with the value of the last frame
    (when there is a value); after termination it is 0. ``spec``: the env's actions (for annotations).
    ``observation_space``: the env's, for observations the policy sees flattened (Discrete, Tuple, Dict:
    :mod:`rlviz.agent.obs`).
    """
    n = trace.num_steps + 1
    obs: Any = trace.observations
    if policy is not None and observation_space is not None and not is_plain(observation_space):
        obs = FlatView(ObsAdapter(observation_space, capabilities_of(policy).obs_format), obs)
    maps, label = None, ""
    out: PolicyOutput | None = None
    method = None if saliency is None else attribution_class(saliency)
    if method is not None and method.from_forward and policy is not None and _one_pass(policy, trace, obs):
        from ..explain.onepass import outputs_with_gradient_saliency  # the internals and the saliency: one forward

        taken = _targets(trace, policy, saliency, saliency_target)
        out, maps, label = outputs_with_gradient_saliency(policy, obs, taken, saliency_target)
    elif policy is not None:
        from ..agent.stepping import evaluate_episode

        out = evaluate_episode(policy, obs, trace.action_masks)
    ann = None
    if annotations and any(k in annotations.rows for k in ("logits", "mean")):
        if spec is None:
            raise UsageError("compute_internals needs spec=<ActionSpec> to read annotations.")
        ann = _annotated_output(annotations, n, spec, policy is not None and capabilities_of(policy).squash)
    out = _merge(out, ann)
    if out is None:  # the panels are drawn from the action distribution: say what the loop gave instead
        told = [*annotations.rows, *(["state"] if annotations.states else [])] if annotations is not None else []
        raise UsageError(f"The loop's annotate() gave {', '.join(k + '=' for k in told)} but no logits= (or mean=/std="
                         "): pass those to annotate() too, or give the recorder a policy=." if told else
                         "compute_internals needs a policy or annotations; received neither.")
    bootstrap = float(out.value[-1]) if trace.truncated and out.value is not None else 0.0
    rtg = returns_to_go(trace.rewards, gamma, bootstrap)
    if saliency is not None and maps is None:
        maps, label = _saliency(trace, policy, out, saliency, saliency_target,
                                None if obs is trace.observations else obs)
    extras = {k: cast(np.ndarray, annotations.array(k, n - 1))[:, 0] for k in annotations.rows if k not in _NAMED} if annotations else {}
    return EpisodeInternals(
        logits=out.logits, probs=out.probs, value=out.value, entropy=out.entropy, returns_to_go=rtg,
        gamma=float(gamma), kind=out.kind, saliency=maps, saliency_label=label, nvec=out.nvec, mean=out.mean,
        std=out.std, squash=out.squash, low=out.low, high=out.high, extras=extras or None,
        action_masks=trace.action_masks, quantiles=out.quantiles,
        saliency_keys=_keys(observation_space) if maps is not None and np.ndim(maps) == 2 else None,
    )


def _keys(observation_space: Any) -> tuple[Any, ...] | None:
    """Which entries of a flattened Dict observation are which key (:mod:`rlviz.explain.dict_obs`), else None."""
    from ..explain.dict_obs import key_slices

    return key_slices(observation_space)


def _one_pass(policy: Any, trace: EpisodeTrace, obs: Any) -> bool:
    """Whether the episode's internals and gradient saliency come from one forward (:mod:`rlviz.explain.onepass`):
    a differentiable policy without state, not given action masks, on observations it takes as they are."""
    caps = capabilities_of(policy)
    masked = trace.action_masks is not None and caps.action_masks
    return obs is trace.observations and caps.differentiable and not caps.recurrent and not masked


def _targets(trace: Any, policy: Any, method: Any, target: Any, dist: str | None = None) -> np.ndarray | None:
    """The actions the saliency explains ([T]: the taken ones; the last frame's is its argmax), or None when the
    target ignores them (the value, the whole-policy perturbation score). ``dist``: the output's distribution
    (default: from the policy's action spec)."""
    if policy is None:
        raise UsageError(f"saliency={method!r} needs a policy to take apart; annotations alone have no network.")
    if dist is None:
        dist = capabilities_of(policy).dist
    if dist == "categorical":
        return np.asarray(trace.actions, np.int64)
    if target == "value" or (attribution_class(method).whole_policy_action and target == "action"):
        return None
    if dist == "gaussian" and target == "action":  # gradient methods: d (sum of the action mean) / d obs
        return None
    raise UsageError(f"saliency target={target!r} picks one discrete action; for {dist} actions use "
                     "saliency_target='value', or method='perturbation' with target='action' (the whole policy).")


def _saliency(trace: Any, policy: Any, out: Any, method: Any, target: Any, obs: Any = None) -> Any:
    from ..explain.saliency import episode_saliency

    taken = _targets(trace, policy, method, target, out.dist)
    if taken is not None:
        chosen = np.concatenate([taken, out.logits[-1:].argmax(-1)]).astype(np.int64)
    else:  # the value and the whole-policy perturbation score ignore the actions
        chosen = np.zeros(trace.num_steps + 1, np.int64)
    # maps live in an unlinked temporary file (np.memmap), freed with the array
    # (obs: the policy's input when it differs from the recorded observations: a Dict flattened, rlviz.agent.obs)
    return episode_saliency(policy, trace.observations if obs is None else obs, chosen, method=method, target=target)


def save_episode_data(trace: EpisodeTrace, internals: EpisodeInternals, path: Path, fps: float | None = None) -> Path:
    """Per-step numbers of an episode (no frames) as ``.npz``, written under a temporary name first; ``fps`` is
    the rate its video plays at (frame t = step t), default the trace's. The arrays are :func:`episode_arrays`'."""
    data = episode_arrays(trace, internals, fps)
    from ..media.atomic import atomic_path  # (rlviz.media loads with the first video, not with the recorder)

    with atomic_path(path) as tmp:
        np.savez_compressed(tmp, **data)
    return path


def episode_arrays(trace: EpisodeTrace, internals: EpisodeInternals, fps: float | None = None) -> dict[str, Any]:
    """The per-step numbers :func:`save_episode_data` writes, by name (the annotated extras as ``extra_<name>``)."""
    data = {
        "actions": trace.actions,
        "rewards": trace.rewards,
        "logits": internals.logits,
        "probs": internals.probs,
        "entropy": internals.entropy,
        "returns_to_go": internals.returns_to_go,
        "gamma": np.float32(internals.gamma),
        "fps": np.float32(fps or trace.fps or 30.0),
        "terminated": np.bool_(trace.terminated),
        "truncated": np.bool_(trace.truncated),
        "action_names": np.asarray(trace.action_names, dtype=str),
        "kind": np.asarray(internals.kind),
        "dist": np.asarray(internals.dist),
    }
    optional = {"value": internals.value, "lives": trace.lives, "mean": internals.mean, "std": internals.std,
                "low": internals.low, "high": internals.high, "action_masks": internals.action_masks,
                "quantiles": internals.quantiles,
                "nvec": None if internals.nvec is None else np.asarray(internals.nvec)}
    if internals.saliency is not None and internals.saliency.ndim == 2:  # per-feature saliency of vector observations
        optional["saliency"] = np.asarray(internals.saliency, np.float32)
        if internals.saliency_keys:  # a Dict observation's: each key's own (image keys as maps [T+1, H, W])
            from ..explain.dict_obs import split_saliency

            parts = split_saliency(internals.saliency, internals.saliency_keys)
            optional.update({f"saliency_key_{k}": v for k, v in parts.items()})
    data.update({k: v for k, v in optional.items() if v is not None})
    if getattr(trace, "mission", ""):  # MiniGrid's text goal (a str array: read back without pickle)
        data["mission"] = np.asarray(trace.mission, dtype=str)
    if internals.mean is not None:
        data["squash"] = np.bool_(internals.squash)
    for name, v in (internals.extras or {}).items():
        data[f"extra_{name}"] = v
    from .memory import memory_arrays  # (a recurrent policy's memory; nothing for others)

    data.update(memory_arrays(internals))
    return data

