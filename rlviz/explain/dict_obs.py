"""Saliency of Dict observations, key by key (SB3 ``MultiInputPolicy`` agents, MiniGrid's ``image``/``direction``).

A Dict observation reaches the policy flattened (:mod:`rlviz.agent.obs`: the keys in the space's order, a Box
flattened as it is, a ``Discrete`` one-hot), so its saliency is one number per entry of that vector
(``internals.saliency`` [T+1, D]). :func:`key_slices` says which entries are which key; :func:`split_saliency`
gives each key its own: an image key (a Box of rank 2 or 3) a map [N, H, W] summed over its channels, any other key
one number per entry [N, d] (a Discrete key one per value). The video draws image keys as maps and the rest as bars
(:mod:`rlviz.draw.panels_dict`); the per-step ``.npz`` holds each as ``saliency_key_<key>``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..agent.obs import flat_size

__all__ = ["KeySlice", "key_slices", "split_saliency"]


class KeySlice(NamedTuple):
    """One key's entries of the flattened observation: ``start:start + size``; ``shape`` the key's own (a Box's,
    () otherwise); ``spec`` the image layout ("hwc", "chw", "hw"; :func:`rlviz.explain.layout.detect_layout`) of an
    image key, "" for a vector key; ``names`` a vector key's entries' ("direction=2" for a Discrete key, "pos[1]")."""

    key: str
    start: int
    size: int
    shape: tuple
    spec: str
    names: tuple = ()


def _names(key: str, space, n: int) -> tuple:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return tuple(f"{key}={int(space.start) + i}" for i in range(n))
    return (key,) if n == 1 else tuple(f"{key}[{i}]" for i in range(n))


def _spec(space) -> str:
    from gymnasium import spaces

    shape = tuple(int(v) for v in getattr(space, "shape", None) or ())
    if not isinstance(space, spaces.Box) or len(shape) not in (2, 3):
        return ""
    # (rlviz.explain.layout's rule, without torch: the smaller of the first and last axes holds the channels)
    spec = "hw" if len(shape) == 2 else "chw" if shape[0] < shape[-1] else "hwc"
    return spec if min(shape[spec.index("h")], shape[spec.index("w")]) >= 2 else ""


def key_slices(space) -> tuple[KeySlice, ...] | None:
    """The flattened layout of a Dict ``space`` (None for any other space)."""
    from gymnasium import spaces

    if not isinstance(space, spaces.Dict):
        return None
    out, at = [], 0
    for key, sub in space.spaces.items():
        n = flat_size(sub)
        shape = tuple(int(v) for v in sub.shape) if isinstance(sub, spaces.Box) else ()
        spec = _spec(sub)
        out.append(KeySlice(str(key), at, n, shape, spec, () if spec else _names(str(key), sub, n)))
        at += n
    return tuple(out)


def split_saliency(saliency, slices) -> dict[str, np.ndarray]:
    """Per-entry saliency [N, D] -> {key: [N, H, W] (image keys, summed over channels) or [N, d]}, each scaled to
    [0, 1] by its own maximum over the N rows (a key's map is then comparable along the episode, not across keys)."""
    sal = np.asarray(saliency, dtype=np.float32)
    out = {}
    for s in slices:
        part = sal[:, s.start : s.start + s.size]
        if s.spec:
            x = part.reshape(len(sal), *s.shape)
            h, w = s.spec.index("h"), s.spec.index("w")
            axes = tuple(1 + i for i in range(len(s.spec)) if i not in (h, w))
            x = np.abs(x).sum(axis=axes) if axes else np.abs(x)
            part = x if h < w else np.swapaxes(x, 1, 2)
        peak = float(np.nanmax(part)) if part.size else 0.0
        out[s.key] = (part / peak if peak > 0 else part).astype(np.float32)
    return out
