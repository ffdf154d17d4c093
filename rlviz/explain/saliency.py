"""Saliency maps for a batch of observations: one call, three methods, computed in batches.

>>> maps = attribute(policy, obs, method="gradient", target="action")  # doctest: +SKIP
>>> maps.shape, maps.dtype  # [B, H, W], float32, >= 0               # doctest: +SKIP

Methods (``method=``):

* ``"gradient"``: |d target / d obs| (Simonyan et al. 2014). All per-frame gradients come from one
  backward of the sum of the per-frame targets, which is exact because frames do not interact in
  the network: true for any module whose output for one frame does not depend on the others
  (no BatchNorm in training mode: :func:`attribute` refuses that; call ``module.eval()``).
* ``"smoothgrad"``: mean of |gradient| over ``n_samples`` noisy copies (Smilkov et al. 2017), noise
  sigma = ``noise_level`` x (max - min) of each frame. The same ``n_samples`` noise patterns
  (seeded by ``seed``) are used for every frame, so a frame's map does not depend on its batch or
  chunk, and consecutive frames do not flicker from fresh noise.
* ``"perturbation"``: Greydanus et al. 2018, see :mod:`rlviz.explain.perturbation`.

Targets (``target=``): ``"action"`` the chosen action's logit (``actions``, default argmax);
an int: that action's logit; ``"logprob"``: log-softmax of the chosen action; ``"value"``: the
value head. For ``"perturbation"``, ``"action"`` is the paper's actor score over all logits.

Reduction over channels and stacked frames: the max of |gradient| (a pixel matters if it matters
in any channel or any of the stacked frames; a sum would favour static pixels present in all 4
stacked frames). Perturbation masks are spatial, so their scores need no reduction.

No side effects: gradients are taken with ``torch.autograd.grad`` with respect to a detached copy
of the observations only, so the caller's tensors and the module's parameters get no ``.grad``,
and the module's train/eval mode is left alone.
"""

from __future__ import annotations

import tempfile
import warnings
from typing import Any

import numpy as np
import torch

from ..agent.policy import Policy
from ..choices import SALIENCY_METHODS
from ..errors import UsageError
from ..progress import bar
from . import perturbation as _pert
from .layout import ObsLayout, detect_layout
from .scale import episode_scale, normalise_episode

__all__ = ["ZeroSaliencyWarning", "attribute", "continuous_actions", "normalise_episode", "episode_scale", "episode_saliency", "saliency_label", "METHODS",
           "ObsLayout", "detect_layout"]

METHODS = SALIENCY_METHODS
_OPTIONS: dict[str, dict[str, Any]] = {
    "gradient": {"reduce": "max"},
    "smoothgrad": {"reduce": "max", "n_samples": 16, "noise_level": 0.15, "seed": 0},
    "perturbation": {"radius": None, "stride": None, "blur_sigma": "auto"},
}
#: Largest default batch: on CPUs, batches past a few hundred inputs leave the caches and run slower.
_MAX_BATCH = {"cpu": 256, "cuda": 4096}


def _resolve_target(target) -> tuple[str, int | None]:
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        if int(target) < 0:
            raise UsageError(f"target={target} is a negative action index; use 0..num_actions-1.")
        return "index", int(target)
    if target in ("action", "logprob", "value"):
        return str(target), None
    raise UsageError(f"target={target!r} is not known; use 'action', 'logprob', 'value' or an action index (int).")


class ZeroSaliencyWarning(UserWarning):
    """Gradient saliency came out exactly zero on every frame of an episode."""


def saliency_label(method: str, target="action", continuous: bool = False) -> str:
    """Short overlay caption naming what the map explains, e.g. ``"gradient · chosen action's logit"``,
    ``"perturbation · value"``, ``"gradient · logit of action 2"``; Box actions (``continuous``) with target
    "action": ``"gradient · action mean (sum over dims)"``."""
    kind, index = _resolve_target(target)
    if continuous and kind == "action" and method != "perturbation":
        return f"{method} · action mean (sum over dims)"
    who = {"value": "value", "index": f"logit of action {index}",
           "logprob": "chosen action's log-prob"}.get(kind, "chosen action's logit")
    return f"{method} · {who}"


def _options(method: str, options: dict, hw: tuple[int, int]) -> dict:
    if method not in METHODS:
        raise UsageError(f"method={method!r} is not known; use one of {', '.join(map(repr, METHODS))}.")
    unknown = set(options) - set(_OPTIONS[method])
    if unknown:
        raise UsageError(
            f"method={method!r} does not take {', '.join(sorted(unknown))}; its options are "
            f"{', '.join(sorted(_OPTIONS[method])) or 'none'}."
        )
    opts = {**_OPTIONS[method], **options}
    if method == "perturbation":
        defaults = _pert.default_options(*hw)
        opts = {k: defaults[k] if (v is None or (k == "blur_sigma" and v == "auto")) else v for k, v in opts.items()}
    if opts.get("reduce", "max") not in ("max", "sum"):
        raise UsageError(f"reduce={opts['reduce']!r}: use 'max' or 'sum'.")
    if method == "smoothgrad" and (int(opts["n_samples"]) < 1 or float(opts["noise_level"]) < 0):
        raise UsageError(f"smoothgrad needs n_samples >= 1 and noise_level >= 0; received {opts}.")
    return opts


def _check_no_train_batchnorm(policy: Policy) -> None:
    module = getattr(policy, "module", None)
    if isinstance(module, torch.nn.Module):
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training:
                raise UsageError(
                    f"The policy has {type(m).__name__} in training mode, so each frame's output depends on the "
                    "rest of the batch and batched saliency would be wrong. Call module.eval() first."
                )


def _activation_bytes(policy: Policy, sample: torch.Tensor) -> int | None:
    """Bytes of every leaf module's output for one observation (a forward with hooks), or None."""
    module = getattr(policy, "module", None)
    if not isinstance(module, torch.nn.Module):
        return None
    total = 0

    def hook(_mod, _inp, out):
        nonlocal total
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()

    handles = [m.register_forward_hook(hook) for m in module.modules() if next(m.children(), None) is None]
    try:
        with torch.no_grad():
            policy.forward(sample)
    finally:
        for h in handles:
            h.remove()
    return total


def _batch_size(policy, sample, method, batch_size, memory_budget_mb) -> int:
    """Inputs per forward: ``batch_size`` if given, else what fits ``memory_budget_mb`` (an estimate:
    inputs, perturbed copies and every layer's activations, kept for the backward when gradients are
    needed), at most 256 on a CPU (faster than larger batches there) and 4096 on a GPU."""
    if batch_size is not None:
        if int(batch_size) < 1:
            raise UsageError(f"batch_size={batch_size}: use a positive number of inputs per forward.")
        return int(batch_size)
    if memory_budget_mb is None or float(memory_budget_mb) <= 0:
        raise UsageError(f"memory_budget_mb={memory_budget_mb}: use a positive number of megabytes.")
    obs_bytes = sample[0].numel() * 4
    act = _activation_bytes(policy, sample)
    act = 8 * obs_bytes if act is None else act
    unit = 4 * obs_bytes + 2 * act if method == "perturbation" else 3 * obs_bytes + 3 * act
    cap = _MAX_BATCH.get(sample.device.type, _MAX_BATCH["cuda"])
    return int(np.clip(float(memory_budget_mb) * 2**20 // max(unit, 1), 1, cap))


def continuous_actions(policy) -> bool:
    """Whether the policy's actions are a Box (its forward's first output is the action mean [B, D])."""
    spec = getattr(policy, "action_spec", None)
    return bool(spec is not None and getattr(spec, "continuous", False))


def _select(kind: str, logits, value, actions, continuous: bool = False) -> torch.Tensor:
    """The scalar per frame whose gradient is wanted. Box actions (``continuous``) with target "action": the
    sum of the action mean's dimensions (for a 1-D action such as Pendulum's torque: the action itself)."""
    if continuous and kind == "action":
        return logits.sum(dim=-1)
    if kind == "value":
        if value is None:
            raise UsageError("target='value' but the policy has no value head; use target='action'.")
        return value
    if kind == "logprob":
        return torch.log_softmax(logits, dim=-1).gather(1, actions[:, None])[:, 0]
    return logits.gather(1, actions[:, None])[:, 0]


def _check_actions(actions: torch.Tensor, num_actions: int) -> None:
    if actions.numel() and (int(actions.min()) < 0 or int(actions.max()) >= num_actions):
        raise UsageError(
            f"actions must lie in 0..{num_actions - 1}; received values from {int(actions.min())} to "
            f"{int(actions.max())}."
        )


def _gradients(policy, x, kind, actions, index, layout: ObsLayout):
    """|d target / d x| for x float32 [n, *obs] (a detached copy gets requires_grad, never the caller's)."""
    if layout.spec == "chw" and x.device.type == "cpu":
        x = x.contiguous(memory_format=torch.channels_last)  # oneDNN's conv backward is ~10% faster in NHWC
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        logits, value = policy.forward(x)
        if kind == "index":
            actions = torch.full((x.shape[0],), index, dtype=torch.long, device=logits.device)
        elif actions is None:
            actions = logits.detach().argmax(dim=-1)
        _check_actions(actions, logits.shape[-1])
        sel = _select(kind, logits, value, actions, continuous_actions(policy))
        if not sel.requires_grad:
            return torch.zeros_like(x)
        (grad,) = torch.autograd.grad(sel.sum(), x, allow_unused=True)
    return torch.zeros_like(x) if grad is None else grad.abs()


def _smoothgrad(policy, x, layout, kind, actions, index, opts, bs):
    n = int(opts["n_samples"])
    gen = torch.Generator().manual_seed(int(opts["seed"]))  # drawn on the CPU: same noise on every device
    noise = torch.randn((n, *x.shape[1:]), generator=gen, dtype=torch.float32).to(device=x.device, dtype=x.dtype)
    flat = x.reshape(x.shape[0], -1)
    sigma = float(opts["noise_level"]) * (flat.amax(1) - flat.amin(1))
    if actions is None and kind in ("action", "logprob"):
        with torch.no_grad():
            actions = policy.forward(x)[0].argmax(dim=-1)
    total = torch.zeros_like(x)
    for p0 in range(0, x.shape[0] * n, bs):
        p = torch.arange(p0, min(x.shape[0] * n, p0 + bs), device=x.device)
        f, s = p // n, p % n
        noisy = x[f] + sigma[f].view(-1, *([1] * (x.ndim - 1))) * noise[s]
        g = _gradients(policy, noisy, kind, actions[f] if actions is not None else None, index, layout)
        total.index_add_(0, f, g)
    return layout.reduce(total / n, opts["reduce"])


def _maps(policy, x, layout, method, kind, index, actions, opts, bs) -> torch.Tensor:
    """Maps float32 [F, H, W] for one chunk of frames x float32 [F, *obs] on the policy's device."""
    if method == "gradient":
        parts = [
            layout.reduce(
                _gradients(policy, x[s : s + bs], kind, None if actions is None else actions[s : s + bs], index,
                           layout),
                opts["reduce"],
            )
            for s in range(0, x.shape[0], bs)
        ]
        return torch.cat(parts)
    if method == "smoothgrad":
        return _smoothgrad(policy, x, layout, kind, actions, index, opts, bs)
    h, w = layout.hw
    grid = _pert.mask_grid(h, w, float(opts["radius"]), int(opts["stride"]), str(x.device))
    if kind == "index":
        actions = torch.full((x.shape[0],), index, dtype=torch.long, device=x.device)
    return _pert.perturbation_saliency(
        policy.forward, layout.to_canonical(x), layout.from_canonical, kind, actions, grid, opts["blur_sigma"], bs
    )


def _check_forward(policy: Policy, obs) -> None:
    """One forward of the first observation: a shape the policy cannot take is a one-line UsageError (a single
    observation passed without its batch axis is the usual cause), not torch's matrix-shape text."""
    try:
        with torch.no_grad():
            policy.forward(policy.to_tensor(np.asarray(obs[:1])))
    except (RuntimeError, ValueError, IndexError) as exc:
        if isinstance(exc, UsageError):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"attribute() passed the policy observations of shape {tuple(obs.shape[1:])} (a batch of "
            f"{obs.shape[0]}), and it failed: {first}. attribute() takes a batch [B, *obs_shape]: for one "
            "observation pass obs[None]."
        ) from exc


def _iter_chunks(policy, obs, method, target, actions, layout, batch_size, memory_budget_mb, options):
    """Validate everything once, then yield (start, maps float32 ndarray [F, H, W]) chunk by chunk."""
    if not isinstance(policy, Policy):
        raise UsageError(
            f"attribute() needs an rlviz Policy; received {type(policy).__name__}. Wrap a torch module with "
            "rlviz.TorchPolicy(module) (and call module.eval() if it has BatchNorm or dropout)."
        )
    if not hasattr(obs, "shape") or len(obs.shape) < 2 or obs.shape[0] == 0:
        raise UsageError(
            f"attribute() needs a batch of observations [B, *obs_shape]; received {type(obs).__name__} of shape "
            f"{getattr(obs, 'shape', None)}. Add a batch axis (obs[None]) for a single observation."
        )
    if method != "perturbation" and not getattr(policy, "differentiable", True):
        raise UsageError(
            f"saliency method={method!r} takes gradients, but this policy is forward-only ({type(policy).__name__}: "
            "a numpy callable); use method='perturbation', which needs forward passes only."
        )
    if getattr(policy, "stateful", False):
        raise UsageError(f"saliency method={method!r}: this policy is recurrent ({type(policy).__name__}: its outputs "
                         "depend on its state, not only on the observation), which saliency does not handle yet; "
                         "render it without saliency (--saliency none).")
    is_bool = obs.dtype in (np.bool_, torch.bool)
    lay = detect_layout(obs.shape[1:], np.bool_ if is_bool else None, layout, vector=True)
    if lay.is_vector and method == "perturbation":
        raise UsageError(
            f"Perturbation saliency blurs image regions; the observations are a vector of {lay.obs_shape[0]} numbers "
            "with no regions to blur. Use --saliency gradient (or smoothgrad; API: method='gradient'), which gives "
            "one number per observation feature."
        )
    kind, index = _resolve_target(target)
    opts = _options(method, dict(options), lay.hw)
    _check_no_train_batchnorm(policy)
    b = int(obs.shape[0])
    if actions is not None:
        actions = torch.as_tensor(np.asarray(actions.cpu() if isinstance(actions, torch.Tensor) else actions))
        if actions.shape != (b,) or actions.dtype.is_floating_point or actions.dtype == torch.bool:
            raise UsageError(f"actions must be integers shaped [{b}] (one per frame); received {tuple(actions.shape)} "
                             f"{actions.dtype}.")
        actions = actions.to(device=policy.device, dtype=torch.long)
    _check_forward(policy, obs)
    bs = _batch_size(policy, policy.to_tensor(obs[:1]), method, batch_size, memory_budget_mb)
    num_actions = int(getattr(policy, "num_actions", -1))
    if num_actions > 0 and index is not None and index >= num_actions:
        raise UsageError(f"target={index} but the policy has {num_actions} actions (0..{num_actions - 1}).")
    if num_actions > 0 and actions is not None and kind in ("action", "logprob"):
        _check_actions(actions, num_actions)
    per_frame = {"gradient": 1, "smoothgrad": int(opts.get("n_samples", 1))}.get(method)
    if per_frame is None:
        per_frame = _pert.mask_count(*lay.hw, int(opts["stride"])) + 1
    frames_per_chunk = max(1, bs // per_frame)
    for s in range(0, b, frames_per_chunk):
        e = min(b, s + frames_per_chunk)
        x = policy.to_tensor(obs[s:e])
        acts = None if actions is None else actions[s:e]
        yield s, _maps(policy, x, lay, method, kind, index, acts, opts, bs).float().cpu().numpy()


def attribute(
    policy: Policy,
    obs,
    method: str = "gradient",
    target="action",
    actions=None,
    *,
    layout: str | None = None,
    batch_size: int | None = None,
    memory_budget_mb: float = 512.0,
    **options,
) -> np.ndarray:
    """Saliency maps for a batch of observations.

    Args:
        policy: an rlviz :class:`~rlviz.agent.policy.Policy`; computation runs on ``policy.device``.
        obs: ndarray or Tensor [B, *obs_shape] (any dtype; bool and uint8 become float32), e.g.
            Atari [B, 4, 84, 84], MinAtar [B, 10, 10, C], images [B, H, W, 3]; or any array-like with
            shape/dtype and slicing (memmap, trace.SpoolArray), read chunk by chunk, never whole.
        method: "gradient" | "smoothgrad" | "perturbation".
        target: "action" | "logprob" | "value" | int (see the module docstring).
        actions: int [B], the action chosen on each frame (default: argmax of the logits).
        layout: "chw" | "hwc" | ... (default: detected, see :func:`~rlviz.explain.layout.detect_layout`).
        batch_size: inputs per forward (noisy copies or perturbed frames count one each); default:
            what fits ``memory_budget_mb``.
        options: gradient: ``reduce="max"|"sum"``; smoothgrad: ``n_samples=16, noise_level=0.15,
            seed=0, reduce``; perturbation: ``radius, stride, blur_sigma`` (defaults per size, see
            :func:`rlviz.explain.perturbation.default_options`).

    Returns: float32 [B, H, W], >= 0, not normalised (see :func:`normalise_episode`); for flat vector
    observations [B, D] (CartPole, Pendulum, MuJoCo): float32 [B, D], |d target / d obs| per feature
    ("gradient", "smoothgrad"; "perturbation" refuses vectors). Box actions with target "action": the
    target is the sum of the action mean's dimensions.
    """
    out = None
    for s, maps in _iter_chunks(policy, obs, method, target, actions, layout, batch_size, memory_budget_mb, options):
        if out is None:
            out = np.empty((obs.shape[0],) + maps.shape[1:], dtype=np.float32)
        out[s : s + maps.shape[0]] = maps
    return out  # type: ignore[return-value]  # obs has at least one row


def episode_saliency(
    policy: Policy,
    observations,
    actions,
    method: str = "gradient",
    target="action",
    chunk: int = 256,
    *,
    layout: str | None = None,
    percentile: float = 99.5,
    out: np.ndarray | None = None,
    batch_size: int | None = None,
    memory_budget_mb: float = 512.0,
    **options,
) -> tuple[np.ndarray, str]:
    """Saliency for a recorded episode, in batches, for the recorder.

    observations: [T+1, *obs_shape], any array-like sliceable along axis 0 (a np.memmap or a
    :class:`rlviz.episode.trace.SpoolArray`: read ``chunk`` frames at a time, never whole); actions: int [T]
    (the last frame has none: its argmax is used) or [T+1]. Returns (maps float32 [T+1, h, w] (vector
    observations: [T+1, D], one number per feature) in
    [0, 1], normalised over the episode by :func:`normalise_episode`, label e.g. "gradient · chosen action's logit").
    The maps go to ``out`` if given, else to a disk-backed np.memmap in the temp folder (its file is
    unlinked at once and freed with the array), so RAM does not grow with episode length.
    """
    n = int(observations.shape[0]) if hasattr(observations, "shape") and len(observations.shape) else 0
    acts = np.asarray(actions).reshape(-1)
    if n == 0 or acts.shape[0] not in (n - 1, n):
        raise UsageError(
            f"episode_saliency needs observations [T+1, ...] and actions [T] (or [T+1]); received "
            f"{getattr(observations, 'shape', None)} and {acts.shape}."
        )
    if acts.shape[0] == n - 1:
        last = policy.evaluate(np.asarray(observations[n - 1 : n])).logits.argmax(-1).astype(np.int64)
        acts = np.concatenate([acts.astype(np.int64), last])
    chunk = max(1, int(chunk))
    with bar(n, f"saliency ({method})", unit="frame") as progress:
        out = _episode_maps(policy, observations, acts, method, target, chunk, out, progress, layout=layout,
                            batch_size=batch_size, memory_budget_mb=memory_budget_mb, **options)
    warn_if_all_zero(method, out, n, chunk)
    return normalise_episode(out, percentile, out=out), saliency_label(method, target, continuous_actions(policy))


def warn_if_all_zero(method: str, maps: np.ndarray, n: int, chunk: int = 256) -> None:
    """A :class:`ZeroSaliencyWarning` when a gradient method's maps [n, h, w] are all exactly zero (read in chunks)."""
    if method in ("gradient", "smoothgrad") and not any(np.any(maps[s : s + chunk]) for s in range(0, n, chunk)):
        warnings.warn(
            f"{method} saliency is exactly 0 on all {n} frames of this episode: the policy is not differentiable "
            "w.r.t. its input (an argmax, rounding, integer cast or detached tensor in its forward); use "
            "saliency='perturbation' (CLI: --saliency perturbation), which needs no gradients.",
            ZeroSaliencyWarning,
            stacklevel=3,
        )


def _episode_maps(policy, observations, acts, method, target, chunk, out, progress, **kwargs) -> np.ndarray:
    """The raw maps of every frame, ``chunk`` frames at a time, into ``out`` (a disk-backed memmap by default)."""
    n = acts.shape[0]
    for s in range(0, n, chunk):
        obs = np.asarray(observations[s : s + chunk])
        maps = attribute(policy, obs, method, target, acts[s : s + chunk], **kwargs)
        if out is None:
            out = np.memmap(tempfile.TemporaryFile(prefix="rlviz-saliency-"), dtype=np.float32, mode="w+",
                            shape=(n,) + maps.shape[1:])
        elif tuple(out.shape) != (n,) + maps.shape[1:]:
            raise UsageError(f"out has shape {tuple(out.shape)}; expected {(n,) + maps.shape[1:]}.")
        out[s : s + maps.shape[0]] = maps
        progress.update(maps.shape[0])
    return out
