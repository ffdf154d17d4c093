"""What a user's policy module returned, normalised: (logits, value) for discrete actions, (mean, std, value)
for Box actions, with a clear error naming the accepted forms otherwise."""

from __future__ import annotations

import torch

from ..errors import UsageError

__all__ = ["split_output", "split_box_output", "canonical_output"]


def split_output(out, kind: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Normalise what a module returned into (logits [B, A], value [B] | None)."""
    if isinstance(out, torch.Tensor):
        logits, value = out, None
    elif isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(o, torch.Tensor) for o in out):
        logits, value = out
    elif isinstance(out, dict) and "logits" in out:
        logits, value = out["logits"], out.get("value")
    else:
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else f"{type(out).__name__} of {len(out)}"
        raise UsageError(
            f"The policy module returned a {got}; rlviz expected logits [B, A], a tuple (logits [B, A], "
            "value [B]) or a dict with 'logits' (and 'value'). Wrap your module so forward returns one of these."
        )
    if logits.ndim != 2:
        raise UsageError(f"The policy returned logits of shape {tuple(logits.shape)}; expected [B, num_actions].")
    if kind == "q":
        return logits, logits.max(dim=-1).values
    if kind == "logits":
        return logits, None
    if value is None:
        raise UsageError(
            "kind='actor_critic' but the module returned no value; pass kind='logits' (no value panel) "
            "or return (logits, value)."
        )
    if value.ndim == 2 and value.shape[-1] == 1:
        value = value[:, 0]
    if value.ndim != 1 or value.shape[0] != logits.shape[0]:
        raise UsageError(f"The policy returned a value of shape {tuple(value.shape)}; expected [B] or [B, 1].")
    return logits, value


def split_box_output(out, dim: int, kind: str) -> dict:
    """What a Box-action module returned, as {"mean" [B, D], "std" [B, D] or None, "value" [B] or None}."""
    value = None
    if isinstance(out, dict):
        if "mean" not in out:
            raise UsageError(f"A Box-action policy returned a dict with keys {sorted(out)}; expected 'mean' and "
                             "'log_std' or 'std' (and 'value').")
        mean, value = out["mean"], out.get("value")
        std = out["std"] if out.get("std") is not None else (
            torch.exp(out["log_std"]) if out.get("log_std") is not None else None)
    else:
        head = out
        if isinstance(out, (tuple, list)) and len(out) == 2:
            head, value = out
        if not isinstance(head, torch.Tensor) or head.ndim != 2 or head.shape[-1] not in (dim, 2 * dim):
            got = tuple(head.shape) if isinstance(head, torch.Tensor) else type(head).__name__
            raise UsageError(
                f"A Box({dim})-action policy returned {got}; expected [B, {dim}] (a deterministic action), [B, "
                f"{2 * dim}] (mean, log_std), a dict {{'mean', 'log_std' or 'std', 'value'}} or a tuple (one of "
                "those, value)."
            )
        mean, std = (head, None) if head.shape[-1] == dim else (head[:, :dim], torch.exp(head[:, dim:]))
    if mean.ndim != 2 or mean.shape[-1] != dim:
        raise UsageError(f"The policy's mean has shape {tuple(mean.shape)}; expected [B, {dim}] for the Box action.")
    if std is not None:
        std = std.expand_as(mean)
    if value is not None:
        value = value.reshape(-1)
        if value.shape[0] != mean.shape[0]:
            raise UsageError(f"The policy returned a value of {value.shape[0]} entries for {mean.shape[0]} observations;"
                             " expected [B] or [B, 1].")
    if kind == "actor_critic" and value is None:
        raise UsageError("kind='actor_critic' but the module returned no value; pass kind='logits' (no value panel).")
    return {"mean": mean, "std": std, "value": value if kind == "actor_critic" else None}


def canonical_output(out, kind: str, box_dim: int | None = None):
    """Any accepted form of a module's output as the one form an rlviz checkpoint's program returns: discrete
    actions: (logits [B, A], value [B]) for kind "actor_critic", logits [B, A] otherwise; Box actions (``box_dim``
    = D): (head, value [B]) or head, where head is mean [B, D] (deterministic) or mean and log std [B, 2D]
    concatenated. Both are forms :func:`split_output` / :func:`split_box_output` read back unchanged."""
    if box_dim is None:
        logits, value = split_output(out, kind)
        return (logits, value) if kind == "actor_critic" else logits
    heads = split_box_output(out, box_dim, kind)
    mean, std = heads["mean"], heads["std"]
    head = mean if std is None else torch.cat([mean, torch.log(std)], dim=-1)
    return (head, heads["value"]) if kind == "actor_critic" else head
