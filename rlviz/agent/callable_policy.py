"""Policies from anything: :class:`CallablePolicy` (numpy in, numpy out: JAX, numpy, a lookup table) and
:func:`as_policy`, which turns what a user passes as ``policy=`` into an rlviz :class:`Policy`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..errors import UsageError
from .policy import Policy, TorchPolicy, TorchPolicyOptions

__all__ = ["CallablePolicy", "as_policy"]


def _to_tensor(x, device):
    if isinstance(x, dict):
        return {k: _to_tensor(v, device) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_to_tensor(v, device) for v in x)
    if x is None or isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(np.asarray(x, dtype=np.float32), device=device)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"The policy callable returned a {type(x).__name__} that is not an array ({exc}); "
                         "return numpy arrays (logits [B, A], (logits, value) or a dict of arrays).") from exc


class _NumpyCall:
    """Calls ``fn`` on the observations as a float32 numpy array and hands back tensors (no gradients)."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, obs: torch.Tensor):
        out = self.fn(obs.detach().cpu().numpy())
        return _to_tensor(out, obs.device)


class CallablePolicy(TorchPolicy):
    """A :class:`Policy` from any Python callable ``fn(obs float32 ndarray [B, *obs_shape])`` returning numpy
    logits [B, A], ``(logits, value)`` or a dict (``"logits"``, ``"value"``; for Box actions ``"mean"`` and
    ``"log_std"`` or ``"std"``), with the shapes :class:`TorchPolicy` documents.

    Forward only: perturbation saliency works; gradient saliency is refused with a one-line reason.
    """

    differentiable = False

    def __init__(self, fn: Callable, action_space=None, num_actions: int | None = None, kind: str = "auto",
                 squash: bool = False, batch_size: int = 1024):
        if not callable(fn):
            raise UsageError(f"CallablePolicy needs a callable; received {type(fn).__name__}.")
        super().__init__(_NumpyCall(fn), num_actions=num_actions, kind=kind, device="cpu",
                         action_space=action_space, squash=squash,
                         options=TorchPolicyOptions(batch_size=batch_size))
        self.fn = fn


def as_policy(policy, action_space=None, squash: bool = False) -> Policy:
    """``policy`` as an rlviz :class:`Policy`: a Policy as is, a recurrent module (``initial_state``, ``step``) in
    :class:`~rlviz.agent.recurrent.RecurrentTorchPolicy`, another ``torch.nn.Module`` in :class:`TorchPolicy`,
    any other callable (numpy in/out) in :class:`CallablePolicy`."""
    if isinstance(policy, Policy):
        return policy
    from .recurrent import RecurrentTorchPolicy, is_recurrent_module

    if is_recurrent_module(policy):  # the recurrent protocol: initial_state(batch), step(obs, state)
        return RecurrentTorchPolicy(policy, action_space=action_space)
    if isinstance(policy, torch.nn.Module):
        return TorchPolicy(policy, action_space=action_space, squash=squash)
    if callable(policy):
        return CallablePolicy(policy, action_space=action_space, squash=squash)
    raise UsageError(
        f"policy={policy!r} is not a policy; pass an rlviz Policy, a torch.nn.Module or a callable from a batch of "
        "observations to logits, (logits, value) or a dict. Leave it out to record frames only."
    )
