"""CleanRL's JAX scripts' flax networks as torch modules, built from a decoded parameter tree
(:mod:`rlviz.sources.cleanrl.flax_msgpack`); which script a tree is comes from :mod:`rlviz.sources.cleanrl.jax_files`.

flax layouts and what changes in torch (each written here from flax's documented conventions, not imported):

* ``nn.Dense``: ``kernel [in, out]``, ``bias [out]``: ``y = x @ kernel + bias``; torch's ``Linear.weight`` is
  ``kernel.T``.
* ``nn.Conv``: ``kernel [H, W, in, out]`` (HWIO) on NHWC input; torch's ``Conv2d.weight`` is OIHW: the kernel is
  permuted ``(3, 2, 0, 1)``. The scripts transpose their NCHW observations to NHWC inside the network, so the torch
  modules take the observations as they are ([B, 4, 84, 84], 0..255) and divide by 255 as the scripts do.
  ``padding="VALID"`` is no padding; flax's default ``"SAME"`` with a 3x3 kernel and stride 1 is 1 on each side.
* The first ``Dense`` after a flatten: flax flattens NHWC, so its input index is ``(h * W + w) * C + c``; torch
  flattens NCHW (``c * H * W + h * W + w``): the kernel's rows are permuted once when the module is built.
* ``nn.max_pool(window 3, strides 2, padding="SAME")`` (the IMPALA CNN): pads ``-inf`` with the extra pixel after
  (total ``max((out - 1) * 2 + 3 - in, 0)``, ``floor(total / 2)`` before), as XLA's SAME padding does.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["dense", "conv", "MLP", "NatureTorso", "ImpalaTorso", "QNet", "C51Net", "DeterministicActorCritic",
           "PPOAgent", "flatten_rows_nhwc"]


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def dense(p: dict, rows_nhwc: tuple[int, int, int] | None = None) -> nn.Linear:
    """``nn.Dense`` params ``{kernel [in, out], bias [out]}`` as a Linear; ``rows_nhwc`` (H, W, C): the input is a
    flattened NHWC map, reordered to torch's NCHW flatten."""
    kernel = p["kernel"]
    if rows_nhwc is not None:
        kernel = flatten_rows_nhwc(kernel, *rows_nhwc)
    layer = nn.Linear(kernel.shape[0], kernel.shape[1])
    layer.weight, layer.bias = nn.Parameter(_t(kernel.T)), nn.Parameter(_t(p["bias"]))
    return layer


def flatten_rows_nhwc(kernel: np.ndarray, h: int, w: int, c: int) -> np.ndarray:
    """A Dense kernel [H*W*C, out] whose rows follow NHWC flattening, with its rows in NCHW order instead."""
    return kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(h * w * c, -1)


def conv(p: dict, stride: int = 1, padding: int = 0) -> nn.Conv2d:
    """``nn.Conv`` params ``{kernel [H, W, I, O], bias [O]}`` as a Conv2d (OIHW)."""
    k = p["kernel"]
    layer = nn.Conv2d(k.shape[2], k.shape[3], (k.shape[0], k.shape[1]), stride=stride, padding=padding)
    layer.weight, layer.bias = nn.Parameter(_t(k.transpose(3, 2, 0, 1))), nn.Parameter(_t(p["bias"]))
    return layer


class MLP(nn.Module):
    """``Dense_0 .. Dense_{n-1}`` with ReLU between (a flax ``Dense`` stack): x [B, in] -> [B, out]."""

    def __init__(self, params: dict, n: int):
        super().__init__()
        self.layers = nn.ModuleList(dense(params[f"Dense_{i}"]) for i in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def _square(rows: int, channels: int) -> tuple[int, int, int]:
    side = math.isqrt(rows // channels)
    return side, side, channels


class NatureTorso(nn.Module):
    """The Nature CNN of the Atari scripts: obs [B, C, 84, 84] in 0..255 -> ReLU(Dense_0) [B, 512]
    (``Conv_0`` 8x8/4, ``Conv_1`` 4x4/2, ``Conv_2`` 3x3/1, VALID, ReLU, NHWC flatten, ``Dense_0``)."""

    def __init__(self, params: dict):
        super().__init__()
        self.convs = nn.ModuleList([conv(params["Conv_0"], 4), conv(params["Conv_1"], 2), conv(params["Conv_2"], 1)])
        c = params["Conv_2"]["kernel"].shape[3]
        self.fc = dense(params["Dense_0"], _square(params["Dense_0"]["kernel"].shape[0], c))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs / 255.0
        for layer in self.convs:
            x = F.relu(layer(x))
        return F.relu(self.fc(x.flatten(1)))


def _same_max_pool(x: torch.Tensor) -> torch.Tensor:
    """flax ``max_pool(window (3, 3), strides (2, 2), padding "SAME")`` on NCHW."""
    pads = []
    for size in (x.shape[3], x.shape[2]):  # F.pad takes the last axis first
        out = -(-size // 2)
        total = max((out - 1) * 2 + 3 - size, 0)
        pads += [total // 2, total - total // 2]
    return F.max_pool2d(F.pad(x, pads, value=float("-inf")), 3, 2)


class _Residual(nn.Module):
    def __init__(self, params: dict):
        super().__init__()
        self.conv0, self.conv1 = conv(params["Conv_0"], 1, 1), conv(params["Conv_1"], 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ImpalaTorso(nn.Module):
    """qdagger_dqn_atari_jax_impalacnn.py's IMPALA CNN: obs [B, C, 84, 84] in 0..255 -> [B, flat] (each
    ``ConvSequence_i``: ``Conv_0`` 3x3 SAME, max pool 3/2 SAME, ``ResidualBlock_0/1``: x + conv(relu(conv(relu
    x)))); then ReLU and the NHWC flatten (the Dense layers are the caller's)."""

    def __init__(self, params: dict, n: int):
        super().__init__()
        seqs = [params[f"ConvSequence_{i}"] for i in range(n)]
        self.convs = nn.ModuleList(conv(p["Conv_0"], 1, 1) for p in seqs)
        self.res0 = nn.ModuleList(_Residual(p["ResidualBlock_0"]) for p in seqs)
        self.res1 = nn.ModuleList(_Residual(p["ResidualBlock_1"]) for p in seqs)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs / 255.0
        for first, res0, res1 in zip(self.convs, self.res0, self.res1):
            x = res1(res0(_same_max_pool(first(x))))
        return F.relu(x).flatten(1)


class QNet(nn.Module):
    """dqn_jax (MLP 120-84), dqn_atari_jax (Nature CNN) and qdagger (IMPALA CNN): obs -> Q [B, A]."""

    def __init__(self, params: dict, torso: str):
        super().__init__()
        self.torso: nn.Module
        self.head: nn.Module
        if torso == "mlp":
            self.torso, self.head = nn.Identity(), MLP(params, 3)
        elif torso == "nature":
            self.torso, self.head = NatureTorso(params), dense(params["Dense_1"])
        else:
            n = sum(1 for k in params if k.startswith("ConvSequence_"))
            self.torso = ImpalaTorso(params, n)
            c = params[f"ConvSequence_{n - 1}"]["Conv_0"]["kernel"].shape[3]
            first = dense(params["Dense_0"], _square(params["Dense_0"]["kernel"].shape[0], c))
            self.head = nn.Sequential(first, nn.ReLU(), dense(params["Dense_1"]))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(obs))


class C51Net(nn.Module):
    """c51_jax / c51_atari_jax: obs -> {"logits": Q [B, A] = sum_i p_i z_i, "quantiles": [B, K, A]}; the atoms'
    probabilities themselves: :meth:`pmfs` [B, A, N]. The quantiles are those of each action's categorical
    distribution at levels (k + 0.5) / K (the smallest atom whose cumulative probability reaches the level), which
    is how the Q panel draws a distribution (as QR-DQN's)."""

    atoms: torch.Tensor
    levels: torch.Tensor

    def __init__(self, params: dict, torso: str, atoms: np.ndarray, levels: int = 16):
        super().__init__()
        self.torso: nn.Module = NatureTorso(params) if torso == "nature" else nn.Identity()
        self.head: nn.Module = dense(params["Dense_1"]) if torso == "nature" else MLP(params, 3)
        self.register_buffer("atoms", _t(atoms))
        self.register_buffer("levels", (torch.arange(levels, dtype=torch.float32) + 0.5) / levels)

    def pmfs(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.head(self.torso(obs))
        return torch.softmax(out.reshape(out.shape[0], -1, self.atoms.shape[0]), dim=-1)

    def forward(self, obs: torch.Tensor) -> dict:
        p = self.pmfs(obs)
        q = (p * self.atoms).sum(-1)
        cdf = torch.cumsum(p.detach(), dim=-1)  # [B, A, N]
        idx = (cdf.unsqueeze(-2) < self.levels.view(1, 1, -1, 1)).sum(-1).clamp(max=self.atoms.shape[0] - 1)
        return {"logits": q, "quantiles": self.atoms[idx].transpose(1, 2)}


class DeterministicActorCritic(nn.Module):
    """td3/ddpg_continuous_action_jax: obs [B, N] -> {"mean": tanh(actor(obs)) * scale + bias [B, D],
    "value": Q_1(obs, action) [B]} (the critic the actor is trained on; its input is concat(obs, action))."""

    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def __init__(self, actor: dict, critic: dict, scale: np.ndarray, bias: np.ndarray):
        super().__init__()
        self.actor, self.critic = MLP(actor, 3), MLP(critic, 3)
        self.register_buffer("action_scale", _t(scale))
        self.register_buffer("action_bias", _t(bias))

    def forward(self, obs: torch.Tensor) -> dict:
        action = torch.tanh(self.actor(obs)) * self.action_scale + self.action_bias
        return {"mean": action, "value": self.critic(torch.cat([obs, action], -1)).reshape(-1)}


class PPOAgent(nn.Module):
    """ppo_atari_envpool_xla_jax_scan: obs [B, 4, 84, 84] -> (logits [B, A], value [B]): the Nature torso
    ``Network``, then ``Actor`` (Dense_0 -> A) and ``Critic`` (Dense_0 -> 1) on its 512 features."""

    def __init__(self, network: dict, actor: dict, critic: dict):
        super().__init__()
        self.network, self.actor, self.critic = NatureTorso(network), dense(actor["Dense_0"]), dense(critic["Dense_0"])

    def forward(self, obs: torch.Tensor):
        hidden = self.network(obs)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)
