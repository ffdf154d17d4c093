"""Perturbation saliency (Greydanus et al. 2018, "Visualizing and Understanding Atari Agents"),
batched across masks and frames.

For each grid point ``(i, j)`` (every ``stride`` pixels) a mask ``M`` is a Gaussian of sigma
``radius`` centred there, scaled to 1 at its centre. The perturbed input keeps the observation
outside the mask and shows a blurred copy inside it: ``I' = I * (1 - M) + blur(I) * M``. The score
says how much that changes the policy (actor, ``0.5 * ||L - L'||^2`` over all logits) or the value
(critic, ``0.5 * (V - V')^2``). The coarse ``[ny, nx]`` score grid is brought back to every pixel by
bilinear interpolation between grid centres (the paper uses ``imresize``, gone from SciPy >= 1.3).

The reference runs one batch-1 forward per mask (289 for 84x84, stride 5). Here all (frame, mask)
pairs of a chunk go through the network as one batch, masks are built once per shape and device,
the blurred image is computed once per frame, and no autograd graph is recorded.

Grid worlds (MinAtar 10x10, one-hot channels) get their own defaults, see
:func:`default_options`: a mask that covers essentially one cell, and instead of a Gaussian blur
(meaningless on one-hot planes) the per-channel mean over the grid, i.e. "an object of this kind
could be in this cell with its average frequency".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import UsageError

__all__ = ["MaskGrid", "mask_grid", "gaussian_blur", "default_options", "perturbation_saliency", "mask_count",
           "GRID_MAX_SIDE"]

#: Observations whose smaller spatial side is at most this are treated as grid worlds (MinAtar 10x10).
GRID_MAX_SIDE = 16


@dataclass(frozen=True)
class MaskGrid:
    """Perturbation masks for observations of spatial size (H, W) and the way back to pixels.

    masks: float32 [K, H, W] in [0, 1], K = ny * nx; mask k = iy * nx + ix is 1 at its centre
    rows:  float32 [H, ny]  bilinear weights from the score grid's rows to pixel rows
    cols:  float32 [W, nx]  the same for columns
    """

    masks: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor

    @property
    def grid_shape(self) -> tuple[int, int]:
        return int(self.rows.shape[1]), int(self.cols.shape[1])

    def upsample(self, scores: torch.Tensor) -> torch.Tensor:
        """scores [F, ny, nx] -> [F, H, W] (exact at grid centres, linear in between, flat at the edges)."""
        return torch.matmul(torch.matmul(self.rows, scores), self.cols.T)


def _axis(n_pix: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Grid centres along one axis (centred in the image) and the [n_pix, n] interpolation matrix."""
    n = (n_pix - 1) // stride + 1
    offset = ((n_pix - 1) - (n - 1) * stride) / 2.0
    centres = offset + stride * torch.arange(n, dtype=torch.float64)
    pos = ((torch.arange(n_pix, dtype=torch.float64) - offset) / stride).clamp(0, n - 1)
    lo = pos.floor().long()
    hi = (lo + 1).clamp(max=n - 1)
    frac = pos - lo
    weights = torch.zeros(n_pix, n, dtype=torch.float64)
    weights.scatter_add_(1, lo[:, None], (1 - frac)[:, None])
    weights.scatter_add_(1, hi[:, None], frac[:, None])
    return centres, weights


@functools.lru_cache(maxsize=32)
def mask_grid(height: int, width: int, radius: float, stride: int, device: str = "cpu") -> MaskGrid:
    """Gaussian masks (sigma = ``radius`` pixels) centred every ``stride`` pixels; cached per shape and device."""
    if radius <= 0 or stride < 1:
        raise UsageError(f"perturbation needs radius > 0 and stride >= 1; received radius={radius}, stride={stride}.")
    cy, rows = _axis(height, stride)
    cx, cols = _axis(width, stride)
    yy = torch.arange(height, dtype=torch.float64)
    xx = torch.arange(width, dtype=torch.float64)
    gy = torch.exp(-((yy[None, :] - cy[:, None]) ** 2) / (2 * radius**2))  # [ny, H]
    gx = torch.exp(-((xx[None, :] - cx[:, None]) ** 2) / (2 * radius**2))  # [nx, W]
    gy = gy / gy.max(dim=1, keepdim=True).values
    gx = gx / gx.max(dim=1, keepdim=True).values
    masks = (gy[:, None, :, None] * gx[None, :, None, :]).reshape(-1, height, width)
    dev = torch.device(device)
    return MaskGrid(masks.float().to(dev), rows.float().to(dev), cols.float().to(dev))


def _reflect(i: int, n: int) -> int:
    """scipy.ndimage's "reflect" boundary (d c b a | a b c d | d c b a), for any integer i."""
    i %= 2 * n
    return i if i < n else 2 * n - 1 - i


@functools.lru_cache(maxsize=32)
def _blur_matrix(n: int, sigma: float, device: str) -> torch.Tensor:
    """[n, n] matrix applying a 1-D Gaussian (truncated at 4 sigma, as scipy) with reflected edges."""
    half = int(4.0 * sigma + 0.5)
    t = torch.arange(-half, half + 1, dtype=torch.float64)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    k = k / k.sum()
    m = torch.zeros(n, n, dtype=torch.float64)
    for p in range(n):
        for j, w in enumerate(k.tolist()):
            m[p, _reflect(p + j - half, n)] += w
    return m.float().to(torch.device(device))


def gaussian_blur(x: torch.Tensor, sigma: float | None) -> torch.Tensor:
    """Blur each channel of x [N, C, H, W] over (H, W): a Gaussian of ``sigma`` pixels with
    reflected edges, as ``scipy.ndimage.gaussian_filter(mode="reflect")`` (done as two small matrix
    products), or, for ``sigma=None``, each channel's mean over the image (the grid-world choice)."""
    if sigma is None:
        return x.mean(dim=(2, 3), keepdim=True).expand_as(x)
    if sigma < 0:
        raise UsageError(f"blur_sigma must be >= 0 or None; received {sigma}.")
    if sigma == 0:
        return x
    by = _blur_matrix(x.shape[2], float(sigma), str(x.device)).to(x.dtype)
    bx = _blur_matrix(x.shape[3], float(sigma), str(x.device)).to(x.dtype)
    return torch.matmul(torch.matmul(by, x), bx.T)


def default_options(height: int, width: int) -> dict:
    """Defaults per observation size. Images (Atari 84x84): radius 5, stride 5 (17 x 17 = 289 masks),
    blur sigma 3, as in the paper. Grid worlds (smaller side <= 16, MinAtar 10x10): radius 0.5,
    stride 1 (one mask per cell; 13.5% weight on the 4 neighbours), blur = per-channel mean."""
    if min(height, width) <= GRID_MAX_SIDE:
        return {"radius": 0.5, "stride": 1, "blur_sigma": None}
    return {"radius": 5.0, "stride": 5, "blur_sigma": 3.0}


def _scores(kind: str, logits, value, p_logits, p_value, actions) -> torch.Tensor:
    if kind == "value":
        return 0.5 * (value - p_value) ** 2
    if kind == "action":  # the paper's actor score: the whole policy's change
        return 0.5 * ((logits - p_logits) ** 2).sum(dim=-1)
    if kind == "logprob":
        lp = torch.log_softmax(logits, -1).gather(1, actions[:, None])[:, 0]
        lq = torch.log_softmax(p_logits, -1).gather(1, actions[:, None])[:, 0]
        return 0.5 * (lp - lq) ** 2
    if kind == "index":  # one given action's logit
        return 0.5 * (logits.gather(1, actions[:, None])[:, 0] - p_logits.gather(1, actions[:, None])[:, 0]) ** 2
    raise UsageError(f"unknown perturbation target kind {kind!r}.")  # pragma: no cover - resolved upstream


def perturbation_saliency(
    forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]],
    frames: torch.Tensor,
    to_obs: Callable[[torch.Tensor], torch.Tensor],
    kind: str,
    actions: torch.Tensor | None,
    grid: MaskGrid,
    blur_sigma: float | None,
    batch_size: int,
) -> torch.Tensor:
    """Perturbation maps for ``frames`` float32 [F, C, H, W] (channels and stacked frames flattened
    into C; ``to_obs`` turns [n, C, H, W] back into the policy's observation layout).

    kind: "action" (all logits), "logprob" / "index" (one action per frame, ``actions`` long [F]),
    "value". ``batch_size``: (frame, mask) pairs per forward. Returns float32 [F, H, W] >= 0.
    """
    with torch.inference_mode():
        logits, value = forward(to_obs(frames))
        if kind == "value" and value is None:
            raise UsageError("target='value' but the policy has no value head; use target='action'.")
        if kind in ("logprob", "index") and actions is None:
            actions = logits.argmax(dim=-1)
        diff = gaussian_blur(frames, blur_sigma) - frames
        n_frames, n_masks = frames.shape[0], grid.masks.shape[0]
        scores = torch.empty(n_frames, n_masks, dtype=torch.float32, device=frames.device)
        masks = grid.masks.unsqueeze(1)  # [K, 1, H, W], broadcast over channels
        bs = max(1, int(batch_size))
        buf = None
        # Batches are whole frames x all masks (bs >= K) or one frame x a run of masks: both are
        # broadcasts (no gathers), written into one reused buffer.
        for f0, f1, k0, k1 in _batches(n_frames, n_masks, bs):
            shape = (f1 - f0, k1 - k0) + tuple(frames.shape[1:])
            if buf is None or buf.numel() < int(torch.Size(shape).numel()):
                buf = torch.empty(int(torch.Size(shape).numel()), dtype=frames.dtype, device=frames.device)
            perturbed = buf[: int(torch.Size(shape).numel())].view(shape)
            torch.addcmul(frames[f0:f1, None], diff[f0:f1, None], masks[None, k0:k1], out=perturbed)
            p_logits, p_value = forward(to_obs(perturbed.view((-1,) + shape[2:])))
            f = torch.arange(f0, f1, device=frames.device).repeat_interleave(k1 - k0)
            scores[f0:f1, k0:k1] = _scores(
                kind,
                logits[f],
                value[f] if value is not None else None,
                p_logits,
                p_value,
                actions[f] if actions is not None else None,
            ).float().view(f1 - f0, k1 - k0)
        ny, nx = grid.grid_shape
        return grid.upsample(scores.view(-1, ny, nx)).clamp_(min=0.0)


def _batches(n_frames: int, n_masks: int, batch_size: int):
    """(f0, f1, k0, k1) blocks covering frames x masks with at most ``batch_size`` pairs each."""
    if batch_size >= n_masks:
        step = batch_size // n_masks
        for f0 in range(0, n_frames, step):
            yield f0, min(n_frames, f0 + step), 0, n_masks
    else:  # equal parts (289 masks at 256 a batch -> 145 + 144, not 256 + 33)
        parts = -(-n_masks // batch_size)
        size = -(-n_masks // parts)
        for f0 in range(n_frames):
            for k0 in range(0, n_masks, size):
                yield f0, f0 + 1, k0, min(n_masks, k0 + size)


def mask_count(height: int, width: int, stride: int) -> int:
    """Number of masks (forwards per frame) for an (H, W) observation at ``stride``."""
    return ((height - 1) // stride + 1) * ((width - 1) // stride + 1)

