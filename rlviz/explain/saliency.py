"""Saliency maps for a batch of observations: the functional front of the method classes, and a recorded episode's
maps in batches.

>>> maps = attribute(policy, obs, method="gradient", target="action")  # doctest: +SKIP
>>> maps.shape, maps.dtype  # [B, H, W], float32, >= 0               # doctest: +SKIP

``attribute(policy, obs, method=name, ...)`` is ``attribution_class(name)(policy, ...).maps(obs, target, actions)``:
each method is a class of :mod:`rlviz.explain.attribution` (Gradient: |d target / d obs|, Simonyan et al. 2014;
SmoothGrad: mean |gradient| over noisy copies, Smilkov et al. 2017; Perturbation: Greydanus et al. 2018, see
:mod:`rlviz.explain.perturbation`), found by its name in the registry ``ATTRIBUTIONS``. Batched gradients are
exact because frames do not interact in the network: true for any module whose output for one frame does not
depend on the others (no BatchNorm in training mode: refused; call ``module.eval()``).

Targets (``target=``): ``action`` the chosen action's logit (``actions``, default argmax); an int: that action's
logit; ``logprob``: log-softmax of the chosen action; ``value``: the value head. For perturbation, ``action`` is the
paper's actor score over all logits.

Reduction over channels and stacked frames: the max of |gradient| (a pixel matters if it matters in any channel
or any of the stacked frames; a sum would favour static pixels present in all 4 stacked frames). Perturbation
masks are spatial, so their scores need no reduction.

No side effects: gradients are taken with ``torch.autograd.grad`` with respect to a detached copy of the
observations only, so the caller's tensors and the module's parameters get no ``.grad``, and the module's
train/eval mode is left alone.
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy
from ..choices import DEFAULT_SALIENCY_METHOD, SALIENCY_METHODS
from ..errors import UsageError
from ..progress import bar
from .attribution import SaliencyMethod, attribution_class
from .gradients import continuous_actions, resolve_target
from .layout import ObsLayout, detect_layout
from .scale import episode_scale, normalise_episode

__all__ = ["ZeroSaliencyWarning", "AttributionOptions", "attribute", "continuous_actions", "normalise_episode", "episode_scale", "episode_saliency", "saliency_label", "METHODS",
           "ObsLayout", "detect_layout"]

#: The saliency methods' names (the keys of the registry :data:`rlviz.explain.attribution.ATTRIBUTIONS`).
METHODS = SALIENCY_METHODS


class ZeroSaliencyWarning(UserWarning):
    """Gradient saliency came out exactly zero on every frame of an episode."""


def saliency_label(method: str | type[SaliencyMethod], target="action", continuous: bool = False) -> str:
    """Short overlay caption naming what the map explains, e.g. ``"gradient · chosen action's logit"``,
    ``"perturbation · value"``, ``"gradient · logit of action 2"``; Box actions (``continuous``) with target
    "action": ``"gradient · action mean (sum over dims)"``."""
    cls, (kind, index) = attribution_class(method), resolve_target(target)
    if continuous and kind == "action" and not cls.whole_policy_action:
        return f"{cls.name} · action mean (sum over dims)"
    who = {"value": "value", "index": f"logit of action {index}",
           "logprob": "chosen action's log-prob"}.get(kind, "chosen action's logit")
    return f"{cls.name} · {who}"


@dataclass(frozen=True)
class AttributionOptions:
    """The rarely needed settings of :func:`attribute` and :func:`episode_saliency`.

    layout: "chw" | "hwc" | ... (default: detected, see :func:`~rlviz.explain.layout.detect_layout`).
    batch_size: inputs per forward (noisy copies or perturbed frames count one each); default: what fits
        ``memory_budget_mb``.
    memory_budget_mb: the memory a forward's batch may take (default 512).
    chunk: :func:`episode_saliency`: frames read and attributed per call (default 256).
    percentile: :func:`episode_saliency`: the episode's maps are divided by this percentile of their values
        (default 99.5; :func:`normalise_episode`).
    states: :func:`episode_saliency` of a recurrent policy: the state rows [T+1, ...] each frame was seen in
        (:func:`~rlviz.explain.given_state.carried_states`; default None: computed from the initial state).
    """

    layout: str | None = None
    batch_size: int | None = None
    memory_budget_mb: float = 512.0
    chunk: int = 256
    percentile: float = 99.5
    states: tuple | None = None


def _check_options(options: AttributionOptions | None, where: str, method_options: dict) -> AttributionOptions:
    moved = [k for k in method_options if k in AttributionOptions.__dataclass_fields__]
    if moved:  # 0.3's keywords (gone in 0.6), which would reach the method as its own options
        given = ", ".join(f"{k}=..." for k in moved)
        raise UsageError(f"{where}({given}): AttributionOptions' field(s), not the method's options; pass "
                         f"options=AttributionOptions({given}) (0.3's keywords went in 0.6).")
    if options is None:
        return AttributionOptions()
    if not isinstance(options, AttributionOptions):
        raise UsageError(f"{where}(options={options!r}): expected a rlviz.explain.AttributionOptions (layout, "
                         "batch_size, memory_budget_mb, chunk, percentile) or None; the method's own options "
                         "(reduce=, n_samples=, radius=...) are keyword arguments.")
    return options


def attribute(
    policy: Policy,
    obs,
    method: str = DEFAULT_SALIENCY_METHOD,
    target="action",
    actions=None,
    *,
    options: AttributionOptions | None = None,
    **method_options,
) -> np.ndarray:
    """Saliency maps for a batch of observations.

    Args:
        policy: an rlviz :class:`~rlviz.agent.policy.Policy`; computation runs on ``policy.device``.
        obs: ndarray or Tensor [B, *obs_shape] (any dtype; bool and uint8 become float32), e.g.
            Atari [B, 4, 84, 84], MinAtar [B, 10, 10, C], images [B, H, W, 3]; or any array-like with
            shape/dtype and slicing (memmap, trace.SpoolArray), read chunk by chunk, never whole.
        method: a name of :data:`METHODS` (gradient, smoothgrad, perturbation) or a method class.
        target: "action" | "logprob" | "value" | int (see the module docstring).
        actions: int [B], the action chosen on each frame (default: argmax of the logits).
        options: an :class:`AttributionOptions` (layout, batch_size, memory_budget_mb).
        method_options: gradient: ``reduce="max"|"sum"``; smoothgrad: ``n_samples=16, noise_level=0.15,
            seed=0, reduce``; perturbation: ``radius, stride, blur_sigma`` (defaults per size, see
            :func:`rlviz.explain.perturbation.default_options`).

    Returns: float32 [B, H, W], >= 0, not normalised (see :func:`normalise_episode`); for flat vector
    observations [B, D] (CartPole, Pendulum, MuJoCo): float32 [B, D], |d target / d obs| per feature
    (gradient, smoothgrad; perturbation refuses vectors). Box actions with target "action": the
    target is the sum of the action mean's dimensions.
    """
    opts = _check_options(options, "attribute", method_options)
    cls = attribution_class(method)
    return cls(policy, layout=opts.layout, batch_size=opts.batch_size, memory_budget_mb=opts.memory_budget_mb,
               **method_options).maps(obs, target, actions)


def episode_saliency(
    policy: Policy,
    observations,
    actions,
    method: str = DEFAULT_SALIENCY_METHOD,
    target="action",
    *,
    options: AttributionOptions | None = None,
    out: np.ndarray | None = None,
    **method_options,
) -> tuple[np.ndarray, str]:
    """Saliency for a recorded episode, in batches, for the recorder.

    observations: [T+1, *obs_shape], any array-like sliceable along axis 0 (a np.memmap or a
    :class:`rlviz.episode.trace.SpoolArray`: read ``options.chunk`` frames at a time, never whole); actions: int
    [T] (the last frame has none: its argmax is used) or [T+1]; options: an :class:`AttributionOptions`;
    method_options: as :func:`attribute`'s. Returns (maps float32 [T+1, h, w] (vector observations: [T+1, D], one
    number per feature) in [0, 1], normalised over the episode by :func:`normalise_episode` at
    ``options.percentile``, label e.g. "gradient · chosen action's logit").
    The maps go to ``out`` if given, else to a disk-backed np.memmap in the temp folder (its file is
    unlinked at once and freed with the array), so RAM does not grow with episode length.
    A recurrent policy (``torch_step``, docs/memory.md): frame t's map is its saliency given the state carried into
    step t (``options.states``: those state rows [T+1, ...], :func:`~rlviz.explain.given_state.carried_states`;
    default: computed here from the policy's initial state).
    """
    opts = _check_options(options, "episode_saliency", method_options)
    n = int(observations.shape[0]) if hasattr(observations, "shape") and len(observations.shape) else 0
    acts = np.asarray(actions).reshape(-1)
    if n == 0 or acts.shape[0] not in (n - 1, n):
        raise UsageError(
            f"episode_saliency needs observations [T+1, ...] and actions [T] (or [T+1]); received "
            f"{getattr(observations, 'shape', None)} and {acts.shape}."
        )
    states = None
    if capabilities_of(policy).recurrent:  # each frame explained given the state it was seen in
        from .given_state import carried_states

        states = carried_states(policy, observations) if opts.states is None else opts.states
    if acts.shape[0] == n - 1:
        last = _last_argmax(policy, observations, states)
        acts = np.concatenate([acts.astype(np.int64), last])
    chunk, method = max(1, int(opts.chunk)), attribution_class(method).name
    with bar(n, f"saliency ({method})", unit="frame") as progress:
        out = _episode_maps(policy, observations, acts, method, target, chunk, out, progress,
                            replace(opts, chunk=chunk), method_options, states)
    warn_if_all_zero(method, out, n, chunk)
    return (normalise_episode(out, opts.percentile, out=out),
            saliency_label(method, target, continuous_actions(policy)))


def warn_if_all_zero(method: str | type[SaliencyMethod], maps: np.ndarray, n: int, chunk: int = 256) -> None:
    """A :class:`ZeroSaliencyWarning` when a gradient method's maps [n, h, w] are all exactly zero (read in chunks)."""
    cls = attribution_class(method)
    if cls.gradients and not any(np.any(maps[s : s + chunk]) for s in range(0, n, chunk)):
        warnings.warn(
            f"{cls.name} saliency is exactly 0 on all {n} frames of this episode: the policy is not differentiable "
            "w.r.t. its input (an argmax, rounding, integer cast or detached tensor in its forward); use "
            "saliency='perturbation' (CLI: --saliency perturbation), which needs no gradients.",
            ZeroSaliencyWarning,
            stacklevel=3,
        )


def _last_argmax(policy, observations, states) -> np.ndarray:
    """int64 [1]: the argmax of the last frame (the one no action was taken on), given its carried state."""
    n = int(observations.shape[0])
    if states is None:
        return policy.evaluate(np.asarray(observations[n - 1 : n])).logits.argmax(-1).astype(np.int64)
    out, _ = policy.step(np.asarray(observations[n - 1 : n]), tuple(s[n - 1 : n] for s in states))
    return out.logits.argmax(-1).astype(np.int64)


def _chunk_maps(policy, obs, acts, method, target, options, method_options, states) -> np.ndarray:
    """The maps of one chunk of frames; a recurrent policy's given each frame's carried state (gradient: the chunk
    in one pass; the methods with many inputs per frame: frame by frame, its state given to each input)."""
    if states is None:
        return attribute(policy, obs, method, target, acts, options=options, **method_options)
    from .given_state import GivenState

    if attribution_class(method).single_pass:
        whole = replace(options, batch_size=max(int(obs.shape[0]), int(options.batch_size or 0)))
        return attribute(GivenState(policy, states), obs, method, target, acts, options=whole, **method_options)
    return np.concatenate([attribute(GivenState(policy, tuple(s[i : i + 1] for s in states)), obs[i : i + 1], method,
                                     target, acts[i : i + 1], options=options, **method_options)
                           for i in range(obs.shape[0])])


def _episode_maps(policy, observations, acts, method, target, chunk, out, progress, options, method_options,
                  states=None) -> np.ndarray:
    """The raw maps of every frame, ``chunk`` frames at a time, into ``out`` (a disk-backed memmap by default)."""
    n = acts.shape[0]
    for s in range(0, n, chunk):
        obs = np.asarray(observations[s : s + chunk])
        rows = None if states is None else tuple(np.asarray(p[s : s + chunk]) for p in states)
        maps = _chunk_maps(policy, obs, acts[s : s + chunk], method, target, options, method_options, rows)
        if out is None:
            out = np.memmap(tempfile.TemporaryFile(prefix="rlviz-saliency-"), dtype=np.float32, mode="w+",
                            shape=(n,) + maps.shape[1:])
        elif tuple(out.shape) != (n,) + maps.shape[1:]:
            raise UsageError(f"out has shape {tuple(out.shape)}; expected {(n,) + maps.shape[1:]}.")
        out[s : s + maps.shape[0]] = maps
        progress.update(maps.shape[0])
    return out
