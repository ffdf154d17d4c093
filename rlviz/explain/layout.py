"""Where the image is in an observation: which axes are height and width, which are channels.

Saliency is computed in the policy's own observation layout and then reduced over every
non-spatial axis (colour channels, stacked frames, MinAtar object planes) to a map [B, H, W].
A flat vector observation [D] (CartPole, Pendulum, MuJoCo) has the layout "f" (``vector=True`` in
:func:`detect_layout`): its saliency is one number per feature, [B, D], with nothing to reduce.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import UsageError

__all__ = ["ObsLayout", "detect_layout"]


@dataclass(frozen=True)
class ObsLayout:
    """One observation's layout.

    obs_shape: shape of one observation (no batch axis), e.g. (4, 84, 84) or (10, 10, 4)
    spec:      one letter per axis; "h" and "w" mark the spatial axes, any other letter is reduced
               ("c" channels, "s" stacked frames): "chw" (Atari), "hwc" (MinAtar, RGB images), "hw", "shwc";
               "f": a flat vector of features [D] (no image: saliency is per feature)
    """

    obs_shape: tuple
    spec: str

    @property
    def is_vector(self) -> bool:
        """A flat vector [D]: saliency is one number per feature ([N, D]), not a map."""
        return self.spec == "f"

    @property
    def h_axis(self) -> int:
        return self.spec.index("h")

    @property
    def w_axis(self) -> int:
        return self.spec.index("w")

    @property
    def hw(self) -> tuple[int, int]:
        if self.is_vector:
            return 1, int(self.obs_shape[0])
        return int(self.obs_shape[self.h_axis]), int(self.obs_shape[self.w_axis])

    @property
    def other_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.spec)) if i not in (self.h_axis, self.w_axis))

    @property
    def channels(self) -> int:
        return int(np.prod([self.obs_shape[a] for a in self.other_axes], dtype=np.int64))

    def _perm(self) -> list[int]:
        return [0] + [1 + a for a in self.other_axes] + [1 + self.h_axis, 1 + self.w_axis]

    def to_canonical(self, x: torch.Tensor) -> torch.Tensor:
        """[N, *obs_shape] -> [N, C, H, W] (C = product of the non-spatial axes)."""
        h, w = self.hw
        return x.permute(self._perm()).reshape(x.shape[0], self.channels, h, w)

    def from_canonical(self, x: torch.Tensor) -> torch.Tensor:
        """[N, C, H, W] -> [N, *obs_shape] (a view where the layout allows, e.g. a permute for "hwc")."""
        perm = self._perm()
        inverse = [perm.index(i) for i in range(len(perm))]
        other = [int(self.obs_shape[a]) for a in self.other_axes]
        return x.reshape(x.shape[0], *other, *self.hw).permute(inverse)

    def expand(self, maps: torch.Tensor) -> torch.Tensor:
        """[N, H, W] -> [N, *obs_shape]: each pixel's value on every channel of it (a spatial score as an
        attribution shaped like the observations)."""
        h, w = self.hw
        return self.from_canonical(maps.reshape(maps.shape[0], 1, h, w).expand(-1, self.channels, h, w))

    def reduce(self, x: torch.Tensor, how: str = "max") -> torch.Tensor:
        """[N, *obs_shape] -> [N, H, W]: max (or sum) over the non-spatial axes; a vector layout: [N, D] as is."""
        if self.is_vector:
            return x.reshape(x.shape[0], -1)
        c = self.to_canonical(x)
        return c.amax(dim=1) if how == "max" else c.sum(dim=1)


def _not_image(obs_shape: tuple) -> UsageError:
    return UsageError(
        f"Spatial saliency needs image observations ([H, W], [C, H, W] or [H, W, C]); the observations "
        f"have shape {obs_shape} (e.g. CartPole's 4 numbers), which has no pixels to highlight. "
        "Record without saliency, or attribute over the vector yourself with torch.autograd.grad."
    )


def detect_layout(obs_shape, dtype=None, layout: str | None = None, *, vector: bool = False) -> ObsLayout:
    """Find (or check) the layout of observations shaped ``obs_shape`` (one observation, no batch axis).

    Rules: 2-D -> "hw". 3-D -> the smaller of the first and last axes is the channel axis
    ([4, 84, 84] -> "chw", [10, 10, 4] / [84, 84, 3] -> "hwc"); when they tie, boolean observations
    are taken as MinAtar's channels-last grids and anything else needs ``layout=``.
    4-D [S, H, W, C] with C in (1, 3, 4) -> "shwc". Pass ``layout`` to override.
    ``vector=True``: a 1-D observation [D] (D >= 1) is the vector layout "f" (per-feature saliency) instead of
    an error (the callers that can attribute per feature: gradient and smoothgrad saliency).
    """
    shape = tuple(int(s) for s in obs_shape)
    if vector and layout is None and len(shape) == 1 and shape[0] >= 1:
        return ObsLayout(shape, "f")
    if layout is not None:
        spec = str(layout).lower()
        if len(spec) != len(shape) or spec.count("h") != 1 or spec.count("w") != 1 or len(set(spec)) != len(spec):
            raise UsageError(
                f"layout={layout!r} does not describe observations of shape {shape}: give one letter per axis "
                "with exactly one 'h' and one 'w', e.g. 'chw' (Atari [4, 84, 84]) or 'hwc' (MinAtar [10, 10, 4])."
            )
    elif len(shape) <= 1:
        raise _not_image(shape)
    elif len(shape) == 2:
        spec = "hw"
    elif len(shape) == 3:
        first, last = shape[0], shape[2]
        if first < last:
            spec = "chw"
        elif last < first or (dtype is not None and np.dtype(dtype) == np.bool_):
            spec = "hwc"
        else:
            raise UsageError(
                f"Cannot tell the channel axis of observations shaped {shape} ({dtype}): pass layout='chw' "
                "(channels first) or layout='hwc' (channels last)."
            )
    elif len(shape) == 4 and shape[-1] in (1, 3, 4) and min(shape[1], shape[2]) > shape[-1]:
        spec = "shwc"
    else:
        raise UsageError(
            f"Cannot tell where the image is in observations shaped {shape}: pass layout= with one letter per "
            "axis, 'h' and 'w' for the spatial ones (e.g. 'schw' for stacked channels-first frames)."
        )
    out = ObsLayout(shape, spec)
    if min(out.hw) < 2:
        raise _not_image(shape)
    return out
