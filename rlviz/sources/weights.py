"""State dicts: find the one inside a ``torch.save``'d file and load it with an error that says what
does not fit. Shared by every loader (rlviz checkpoints, torch files, SB3 zips)."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import CheckpointError

__all__ = ["find_state_dict", "load_weights"]

_NESTED_KEYS = ("state_dict", "model_state_dict", "model", "agent", "policy", "network", "net", "q_network",
                "actor_critic")


def _is_tensor_dict(d) -> bool:
    return isinstance(d, dict) and bool(d) and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                   for k, v in d.items())


def find_state_dict(obj: dict, source: str) -> dict[str, torch.Tensor]:
    """The state_dict in a torch.save'd dict: the dict itself or under a usual key ("state_dict", "model"...)."""
    if _is_tensor_dict(obj):
        return obj
    for key in _NESTED_KEYS:
        if _is_tensor_dict(obj.get(key)):
            return obj[key]
    keys = ", ".join(map(repr, list(obj)[:8]))
    raise CheckpointError(
        f"{source} holds a dict without a state_dict (keys: {keys}); expected name -> tensor, possibly under one of "
        f"{list(_NESTED_KEYS)}. Re-save it with torch.save(model.state_dict(), path)."
    )


def load_weights(module: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """``module.load_state_dict(state, strict=True)`` with an error that says what does not fit."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}" for k, v in own.items()
              if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if missing or unexpected or shapes:
        parts = [f"{label}: {items[:4]}{' ...' if len(items) > 4 else ''}" for label, items in
                 (("missing", missing), ("unexpected", unexpected), ("shape (file vs model)", shapes)) if items]
        raise CheckpointError(
            f"The weights in {source} do not fit {type(module).__name__} ({'; '.join(parts)}). Check model= and env."
        )
    module.load_state_dict(state, strict=True)
