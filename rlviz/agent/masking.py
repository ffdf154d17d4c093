"""Invalid-action masks (sb3-contrib ``MaskablePPO``): read from the env, applied to a policy's outputs.

An env that has invalid actions says which are valid with an ``action_masks()`` method (sb3-contrib's convention,
found through wrappers as ``env.get_wrapper_attr("action_masks")``): bool [A], True = allowed. A masked policy sets
the logits of the other actions to :data:`MASKED_LOGIT` and renormalises, as ``MaskableCategorical`` does, so they
get probability 0 (exactly, in float32) and neither the sampler (Gumbel-max) nor ``--greedy`` (argmax) picks them.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import EnvError, UsageError
from .actions import sample_actions
from .policy import PolicyOutput, TorchPolicy

__all__ = ["MASKED_LOGIT", "env_action_masks", "check_masks", "apply_masks", "MaskedTorchPolicy"]

#: The logit of a masked action (sb3-contrib's ``HUGE_NEG``).
MASKED_LOGIT = -1e8


def env_action_masks(env, num_actions: int) -> np.ndarray:
    """bool [A]: the env's ``action_masks()`` (looked up through its wrappers), checked."""
    try:
        getter = env.get_wrapper_attr("action_masks")
    except AttributeError:
        getter = None
    if not callable(getter):
        name = getattr(getattr(env, "spec", None), "id", None) or type(getattr(env, "unwrapped", env)).__name__
        raise EnvError(f"The policy takes action masks (MaskablePPO), but the env {name!r} has no action_masks() "
                       "method; use the env it was trained on, or wrap yours with sb3_contrib's ActionMasker.")
    return check_masks(getter(), 1, num_actions)[0]


def check_masks(masks, rows: int, num_actions: int) -> np.ndarray:
    """``masks`` as bool [rows, A]; a clear error for another shape or a row that allows nothing."""
    m = np.asarray(masks)
    if m.size != rows * num_actions:
        raise UsageError(f"Action masks of shape {m.shape} for {rows} observation(s) of {num_actions} actions; "
                         f"expected bool [{rows}, {num_actions}] (True = allowed).")
    m = m.reshape(rows, num_actions).astype(bool)
    empty = np.flatnonzero(~m.any(axis=1))
    if empty.size:
        raise EnvError(f"The env's action_masks() allow no action at all (row {int(empty[0])}); a masked policy "
                       "needs at least one valid action per step.")
    return m


def apply_masks(out: PolicyOutput, masks) -> PolicyOutput:
    """``out`` (Discrete) with masked actions' logits set to :data:`MASKED_LOGIT` and the rest renormalised
    (log-softmax), probabilities recomputed; Q-values (``kind="q"``) keep their values, masked ones set low."""
    if out.nvec is not None or out.mean is not None:
        raise UsageError(f"Action masks are supported for Discrete actions; this policy's are {out.dist}.")
    m = torch.as_tensor(check_masks(masks, out.logits.shape[0], out.logits.shape[1]))
    logits = torch.where(m, torch.as_tensor(out.logits), torch.tensor(MASKED_LOGIT, dtype=torch.float32))
    if out.kind == "q":
        probs = torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        value: np.ndarray | None = logits.max(-1).values.numpy()
    else:
        logits = torch.log_softmax(logits, dim=-1)
        probs, value = torch.softmax(logits, dim=-1), out.value
    return PolicyOutput(logits.numpy(), probs.numpy(), value, out.kind, quantiles=out.quantiles)


class MaskedTorchPolicy(TorchPolicy):
    """A :class:`TorchPolicy` that takes the env's action masks (``needs_action_masks``): ``evaluate(obs,
    masks=bool [B, A])`` and ``act(obs, rng, greedy, masks=...)``. Without masks it is the unmasked policy
    (saliency, ``forward``)."""

    needs_action_masks = True

    def evaluate(self, obs, batch_size: int | None = None, masks=None) -> PolicyOutput:
        out = super().evaluate(obs, batch_size)
        return out if masks is None else apply_masks(out, masks)

    def act(self, obs, rng=None, greedy: bool = False, masks=None):
        out = self.evaluate(obs, masks=masks)
        return sample_actions(out, rng if rng is not None else np.random.default_rng(), greedy), out
