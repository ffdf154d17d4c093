"""The gradient kernels of the saliency methods (torch): the target per frame, |d target / d obs| from one backward
of a chunk, SmoothGrad's noisy copies, and the checks and batch sizing they share with perturbation saliency.

No side effects: gradients are taken with ``torch.autograd.grad`` with respect to a detached copy of the
observations only, so the caller's tensors and the module's parameters get no ``.grad``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..agent.capabilities import capabilities_of
from ..agent.policy import Policy
from ..errors import UsageError
from .layout import ObsLayout

__all__ = ["continuous_actions", "select_target", "resolve_target", "check_no_train_batchnorm"]

#: Largest default batch: on CPUs, batches past a few hundred inputs leave the caches and run slower.
_MAX_BATCH = {"cpu": 256, "cuda": 4096}


def resolve_target(target) -> tuple[str, int | None]:
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        if int(target) < 0:
            raise UsageError(f"target={target} is a negative action index; use 0..num_actions-1.")
        return "index", int(target)
    if target in ("action", "logprob", "value"):
        return str(target), None
    raise UsageError(f"target={target!r} is not known; use 'action', 'logprob', 'value' or an action index (int).")


def check_no_train_batchnorm(policy: Policy) -> None:
    module = policy.module
    if isinstance(module, torch.nn.Module):
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training:
                raise UsageError(
                    f"The policy has {type(m).__name__} in training mode, so each frame's output depends on the "
                    "rest of the batch and batched saliency would be wrong. Call module.eval() first."
                )


def _activation_bytes(policy: Policy, sample: torch.Tensor) -> int | None:
    """Bytes of every leaf module's output for one observation (a forward with hooks), or None."""
    module = policy.module
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


def _batch_size(policy, sample, gradients: bool, batch_size, memory_budget_mb) -> int:
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
    unit = 3 * obs_bytes + 3 * act if gradients else 4 * obs_bytes + 2 * act
    cap = _MAX_BATCH.get(sample.device.type, _MAX_BATCH["cuda"])
    return int(np.clip(float(memory_budget_mb) * 2**20 // max(unit, 1), 1, cap))


def continuous_actions(policy) -> bool:
    """Whether the policy's actions are a Box (its forward's first output is the action mean [B, D])."""
    return capabilities_of(policy).continuous_actions


def select_target(kind: str, logits, value, actions, continuous: bool = False) -> torch.Tensor:
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
        sel = select_target(kind, logits, value, actions, continuous_actions(policy))
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
