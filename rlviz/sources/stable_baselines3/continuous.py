"""Stable-Baselines3 / sb3-contrib policies whose actions are not one Discrete (used by :mod:`rlviz.sources.stable_baselines3.zips`).

What each algorithm's panels show, computed by SB3's own modules on the same observations:

* **PPO / A2C** (``ActorCriticPolicy``): Box actions: a Gaussian, mean = ``action_net(latent_pi)``, std =
  ``exp(log_std)`` (state-independent), actions clipped to the bounds as ``predict`` clips them; MultiDiscrete:
  one categorical per part (log-softmax of each part of ``action_net``); MultiBinary: one Bernoulli per part.
  Value: ``predict_values``.
* **SAC** (``SACPolicy``) and sb3-contrib **TQC** (``TQCPolicy``): a tanh-squashed Gaussian with the mean and
  log-std of ``actor.get_action_dist_params`` (log-std clamped to [-20, 2] there, as SB3 does), squashed into
  the action bounds (``low + (tanh(u) + 1) / 2 * (high - low)``, SB3's ``unscale_action``). Value: the critic
  at the actor's deterministic action a* = tanh(mean) (in SB3's [-1, 1] action scale): SAC: ``min_i Q_i(s,
  a*)`` over its critics (the clipped double-Q estimate SAC trains with, without the entropy term); TQC: the
  mean of all critics' quantiles at a* (what TQC's actor maximises; the truncation applies only to targets).
* **TD3 / DDPG** (``TD3Policy``; DDPG is TD3 with one critic): a deterministic actor: the panel shows the action
  ``unscale_action(actor(s))`` (``actor`` ends in tanh), as ``predict(deterministic=True)``; value
  ``Q_1(s, actor(s))`` (``critic.q1_forward``, the critic TD3's actor is trained on).

gSDE (``use_sde=True``) is refused: its noise depends on a noise matrix re-drawn during training, not on the
observation alone, so there is no per-state distribution to draw.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...errors import UsageError

__all__ = ["SB3SquashedGaussian", "SB3DeterministicActor", "actor_critic_head", "offpolicy_module",
           "refuse_sde", "offpolicy_algorithm"]


def _unscale(policy, scaled: torch.Tensor) -> torch.Tensor:
    """SB3's ``unscale_action`` ([-1, 1] -> [low, high]) on tensors, keeping the gradient path."""
    space = policy.action_space
    low = torch.as_tensor(space.low, dtype=scaled.dtype, device=scaled.device)
    high = torch.as_tensor(space.high, dtype=scaled.dtype, device=scaled.device)
    return low + 0.5 * (scaled + 1.0) * (high - low)


class SB3SquashedGaussian(nn.Module):
    """SAC / TQC: raw obs [B, *obs] -> {"mean" [B, D] (before tanh), "log_std" [B, D], "value" [B]}; see the
    module docstring for the value."""

    def __init__(self, policy: nn.Module, quantiles: bool = False):
        super().__init__()
        self.policy, self.quantiles = policy, quantiles

    def forward(self, obs: torch.Tensor):
        p: Any = self.policy  # an SB3 policy (its submodules by name)
        mean, log_std, _ = p.actor.get_action_dist_params(obs)
        q = p.critic(obs, torch.tanh(mean))
        if self.quantiles:  # TQC: [B, n_critics, n_quantiles]
            value = q.mean(dim=(1, 2))
        else:  # SAC: a tuple of [B, 1], one per critic
            value = torch.cat(q, dim=1).min(dim=1).values
        return {"mean": mean, "log_std": log_std, "value": value}


class SB3DeterministicActor(nn.Module):
    """TD3 / DDPG: raw obs [B, *obs] -> {"mean": the action in env units [B, D], "value": Q_1(s, actor(s)) [B]}."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor):
        p: Any = self.policy  # an SB3 policy (its submodules by name)
        scaled = p.actor(obs)
        return {"mean": _unscale(p, scaled), "value": p.critic.q1_forward(obs, scaled).reshape(-1)}


def actor_critic_head(policy, action_logits: torch.Tensor, value: torch.Tensor):
    """What :class:`~rlviz.sources.stable_baselines3.zips.SB3ActorCritic` returns for PPO / A2C, by SB3's action distribution:
    Categorical -> (log pi [B, A], value); MultiCategorical -> (log pi per part [B, sum(nvec)], value);
    Bernoulli -> (logits [B, n], value); DiagGaussian -> {"mean", "log_std", "value"}."""
    from stable_baselines3.common import distributions as D

    dist = policy.action_dist
    # sb3-contrib's MaskablePPO: masks are applied after this (rlviz.agent.masking), as MaskableCategorical does
    if isinstance(dist, D.CategoricalDistribution) or type(dist).__name__ == "MaskableCategoricalDistribution":
        return torch.log_softmax(action_logits, dim=-1), value
    if isinstance(dist, D.MultiCategoricalDistribution):
        parts = torch.split(action_logits, list(dist.action_dims), dim=-1)
        return torch.cat([torch.log_softmax(x, dim=-1) for x in parts], dim=-1), value
    if isinstance(dist, D.BernoulliDistribution):
        return action_logits, value
    if isinstance(dist, D.DiagGaussianDistribution):
        return {"mean": action_logits, "log_std": policy.log_std.expand_as(action_logits), "value": value}
    raise UsageError(f"This {type(policy).__name__} draws its actions from a {type(dist).__name__}, which rlviz "
                     "does not draw; supported: Categorical, MultiCategorical, Bernoulli and diagonal Gaussian.")


def refuse_sde(use_sde, what: str) -> None:
    """A clear error for gSDE agents (``use_sde=True``), which rlviz does not render."""
    if use_sde is True or (isinstance(use_sde, str) and use_sde.strip().lower() == "true"):
        raise UsageError(
            f"{what} was trained with gSDE (use_sde=True): its exploration noise comes from a noise matrix, not "
            "from a per-state distribution rlviz can draw; rlviz renders Gaussian, tanh-Gaussian and deterministic "
            "SB3 actors. Retrain with use_sde=False to render it."
        )


def offpolicy_module(policy) -> tuple[nn.Module, bool] | None:
    """(module, squash) for an SB3 SAC / TD3 / DDPG or sb3-contrib TQC policy; None for any other policy."""
    from stable_baselines3.sac.policies import SACPolicy
    from stable_baselines3.td3.policies import TD3Policy

    if isinstance(policy, (SACPolicy, TD3Policy)) or type(policy).__module__.startswith("sb3_contrib.tqc"):
        refuse_sde(getattr(policy.actor, "use_sde", False), f"This {type(policy).__name__}")
    if isinstance(policy, SACPolicy):
        return SB3SquashedGaussian(policy), True
    if type(policy).__module__.startswith("sb3_contrib.tqc"):
        return SB3SquashedGaussian(policy, quantiles=True), True
    if isinstance(policy, TD3Policy):
        return SB3DeterministicActor(policy), False
    return None


def offpolicy_algorithm(doc: dict, policy_module: str) -> str | None:
    """The algorithm an SB3 zip's ``data`` (``doc``) and policy class module name: SAC, TQC, TD3 or DDPG (DDPG
    saves TD3's policy; it is told apart by its settings policy_delay=1, target_noise_clip=0), else None."""
    if policy_module.startswith("sb3_contrib.tqc"):
        return "TQC"
    if policy_module.startswith("stable_baselines3.sac"):
        return "SAC"
    if policy_module.startswith("stable_baselines3.td3"):
        ddpg = doc.get("policy_delay") == 1 and doc.get("target_noise_clip") == 0
        return "DDPG" if ddpg else "TD3"
    return None
