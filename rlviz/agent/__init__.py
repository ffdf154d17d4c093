"""The agent: the :class:`Policy` contract (action specs, outputs, observations, stepping, masks, callables), the
CleanRL-module adapter and the reference networks. Where agents come from (checkpoint files, SB3, rl-zoo3,
CleanRL, the Hub) is :mod:`rlviz.sources`."""

from __future__ import annotations

from .._deprecated import moved_attribute
from .actions import ActionSpec, action_spec
from .callable_policy import CallablePolicy, as_policy
from .models import MinAtarAgent, NatureCNNAgent
from .policy import Policy, PolicyOutput, TorchPolicy, relative_entropy, resolve_device, sample_actions

__all__ = ["ActionSpec", "CallablePolicy", "action_spec", "as_policy", "MinAtarAgent", "NatureCNNAgent", "Policy",
           "PolicyOutput", "TorchPolicy", "relative_entropy", "resolve_device", "sample_actions"]


def __getattr__(name: str):
    """The loaders' names of release 0.2 (``rlviz.agent.load_agent``...), now in :mod:`rlviz.sources`."""
    return moved_attribute(__name__, name)
