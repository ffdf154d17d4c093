"""SB3 ``MultiInputPolicy`` agents (Dict observations) as rlviz policies.

rlviz gives a Dict observation to a policy flattened (:mod:`rlviz.agent.obs`: the keys in the space's order, each
key's Box flattened as it is, a ``Discrete`` one-hot, ``MultiDiscrete`` one one-hot per entry), so rollouts,
batching, gradient saliency and replays take it as any vector. :class:`SB3DictInput` puts the vector back into the
dict of tensors SB3's ``CombinedExtractor`` reads: each key's slice reshaped to the env's shape, an image key
transposed channels first where SB3 trained it so (``VecTransposeImage`` transposes a Dict's image keys), the
one-hot keys handed over as they are (SB3's ``preprocess_obs`` would one-hot an index: it is shown a Box of the
one-hot's size for the forward, so the gradient reaches each entry of it). Saliency is then one number per entry
of the flattened vector; :mod:`rlviz.explain.dict_obs` splits it by key.

:func:`dict_policy_space` checks the env's Dict against the one the zip was trained on (its ``spaces`` text: keys,
space types and shapes) and gives the Dict the policy is rebuilt on.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch
from torch import nn

from ...agent.obs import flat_size
from ...envs.env_facts import describe_space
from ...errors import EnvError

__all__ = ["SB3DictInput", "dict_policy_space", "transposed_keys"]

_KEY = re.compile(r"'([^']+)': (\w+)\(")
_SHAPE = re.compile(r"\((\d+(?:, \d+)*),?\)")


def _transposed(box):
    from gymnasium import spaces

    return spaces.Box(box.low.transpose(2, 0, 1), box.high.transpose(2, 0, 1), dtype=box.dtype)


def _is_image(space) -> bool:
    """SB3's ``is_image_space`` (uint8 [H, W, C] or [C, H, W] in 0..255), which ``VecTransposeImage`` transposes."""
    from gymnasium import spaces

    return (isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
            and bool(np.all(space.low == 0)) and bool(np.all(space.high == 255)))


def _saved_parts(text: str) -> dict[str, tuple[str, tuple | None]]:
    """The zip's ``observation_space["spaces"]`` text -> {key: (space type, shape or None)}."""
    found = list(_KEY.finditer(text))
    parts = {}
    for m, nxt in zip(found, [*found[1:], None]):
        body = text[m.end() : nxt.start() if nxt is not None else len(text)]
        shape = _SHAPE.search(body) if m.group(2) in ("Box", "MultiBinary") else None
        parts[m.group(1)] = (m.group(2), tuple(int(v) for v in shape.group(1).split(", ")) if shape else None)
    return parts


def dict_policy_space(saved: dict, env_space, source: str):
    """The Dict the zip's policy was trained on, from the env's ``env_space`` (image keys transposed where the zip's
    are); an :class:`EnvError` naming both when the keys, types or shapes differ."""
    from gymnasium import spaces

    got = _saved_parts(str(saved.get("spaces", "")))
    if not isinstance(env_space, spaces.Dict):
        raise EnvError(f"{source} was trained on Dict observations ({', '.join(got) or 'keys unknown'}), but the env "
                       f"gives {describe_space(env_space)}; pass the env (and wrappers, --wrapper) it was trained on.")
    out = {}
    for key, sub in env_space.spaces.items():
        kind, shape = got.get(key, (None, None))
        if got and key in got and _is_image(sub) and shape == tuple(_transposed(sub).shape or ()) != tuple(
                sub.shape or ()):
            sub = _transposed(sub)
        ok = kind in (None, type(sub).__name__) and (shape is None or shape == tuple(sub.shape or ()))
        if not ok:
            got = {}  # (reported below)
            break
        out[key] = sub
    if got and set(got) != set(env_space.spaces):
        got = {}
    if not got and saved.get("spaces"):
        raise EnvError(
            f"{source} was trained on Dict observations {str(saved.get('spaces'))[:200]}, but the env gives "
            f"{describe_space(env_space)}; pass the env and the observation wrapper it was trained with (--wrapper "
            "module:Class).")
    return spaces.Dict(out)


def transposed_keys(env_space, policy_space) -> set[str]:
    """The keys whose image the policy takes channels first while the env gives it channels last."""
    return {k for k, s in env_space.spaces.items()
            if tuple(policy_space[k].shape or ()) != tuple(s.shape or ()) and len(s.shape or ()) == 3}


class SB3DictInput(nn.Module):
    """flat obs [B, D] (the env's Dict flattened by :mod:`rlviz.agent.obs`) -> ``inner`` on the dict of tensors
    SB3 takes; ``inner``: the SB3 module (:class:`~rlviz.sources.stable_baselines3.zips.SB3ActorCritic`, ...)."""

    def __init__(self, inner: nn.Module, policy: nn.Module, env_space):
        super().__init__()
        from gymnasium import spaces

        self.inner = inner
        self.policy: Any = policy
        pol: Any = policy
        flipped = transposed_keys(env_space, pol.observation_space)
        self.parts: list[tuple[str, int, tuple | None, bool]] = []  # (key, size, shape to restore, transpose)
        at = 0
        for key, sub in env_space.spaces.items():
            n = flat_size(sub)
            box = isinstance(sub, spaces.Box)
            self.parts.append((key, n, tuple(sub.shape) if box else None, key in flipped))
            at += n
        self.size = at
        # what preprocess_obs is shown during forward: the one-hot keys as Boxes of their size (identity but .float())
        self.seen = spaces.Dict({k: (s if isinstance(s, spaces.Box) else spaces.Box(0.0, 1.0, (flat_size(s),),
                                                                                     np.float32))
                                 for k, s in pol.observation_space.spaces.items()})

    def split(self, obs: torch.Tensor) -> dict:
        out, at = {}, 0
        for key, n, shape, flip in self.parts:
            x = obs[:, at : at + n]
            if shape is not None:
                x = x.reshape(obs.shape[0], *shape)
                x = x.permute(0, 3, 1, 2) if flip else x
            out[key] = x
            at += n
        return out

    def forward(self, obs: torch.Tensor):
        # the policy and its own sub-models (SAC's actor and critic) preprocess with their observation_space
        models = [m for m in self.policy.modules() if hasattr(m, "observation_space") and hasattr(m, "normalize_images")]
        before = [m.observation_space for m in models]
        for m in models:
            m.observation_space = self.seen
        try:
            return self.inner(self.split(obs))
        finally:
            for m, space in zip(models, before):
                m.observation_space = space
