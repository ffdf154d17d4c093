"""Reference agent networks (used by the training script, the benchmarks and the tests).

Both return ``(logits [B, A], value [B])`` and take observations exactly as the env gives them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["NatureCNNAgent", "MinAtarAgent", "layer_init"]


def layer_init(layer: nn.Module, std: float = float(np.sqrt(2)), bias: float = 0.0) -> nn.Module:
    nn.init.orthogonal_(layer.weight, std)  # type: ignore[arg-type]  # a Linear or Conv2d
    nn.init.constant_(layer.bias, bias)  # type: ignore[arg-type]
    return layer


class NatureCNNAgent(nn.Module):
    """Mnih et al. 2015 torso with actor and critic heads. obs uint8/float [B, 4, 84, 84] in 0..255."""

    def __init__(self, num_actions: int, in_channels: int = 4):
        super().__init__()
        self.torso = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs.float() / 255.0)
        return self.actor(h), self.critic(h).squeeze(-1)


class MinAtarAgent(nn.Module):
    """MinAtar network (Young & Tian 2019): 3x3 conv, 16 channels, 128 hidden units.
    obs bool/float [B, 10, 10, C] (channels last, as MinAtar gives them)."""

    def __init__(self, num_actions: int, in_channels: int = 4, hidden: int = 128):
        super().__init__()
        self.torso = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 16, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(16 * 8 * 8, hidden)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(hidden, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden, 1), std=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs.float().permute(0, 3, 1, 2))
        return self.actor(h), self.critic(h).squeeze(-1)
