"""The agent: the :class:`Policy` contract, checkpoints (rlviz ``.pt2``, torch files, SB3 zips), their safety
checks, adapters for Stable-Baselines3 and CleanRL agents, and the reference networks."""

from __future__ import annotations

from .actions import ActionSpec, action_spec
from .adapters import cleanrl_policy, to_policy
from .callable_policy import CallablePolicy, as_policy
from .checkpoint import LoadedAgent, load_agent, load_checkpoint, save_checkpoint
from .models import MinAtarAgent, NatureCNNAgent
from .policy import Policy, PolicyOutput, TorchPolicy, relative_entropy, resolve_device, sample_actions

__all__ = ["ActionSpec", "CallablePolicy", "action_spec", "as_policy", "LoadedAgent", "MinAtarAgent", "NatureCNNAgent", "Policy", "PolicyOutput", "TorchPolicy", "cleanrl_policy", "load_agent", "load_checkpoint", "relative_entropy", "resolve_device", "sample_actions", "save_checkpoint", "to_policy"]
