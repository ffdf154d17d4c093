"""The agent: the :class:`Policy` contract (action specs, outputs, observations, stepping, masks, callables), the
CleanRL-module adapter and the reference networks. Where agents come from (checkpoint files, SB3, rl-zoo3,
CleanRL, the Hub) is :mod:`rlviz.sources`.

Names load on first use: ``rlviz.agent.actions`` / ``.obs`` / ``.policy_output`` are numpy only, so the
recorders and the drawing code use them without importing torch (``.policy`` and the rest import it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: public name -> the module of this package that defines it
_EXPORTS = {
    "ActionSpec": "actions", "action_spec": "actions", "sample_actions": "actions", "relative_entropy": "actions",
    "CallablePolicy": "callable_policy", "as_policy": "callable_policy",
    "PolicyCapabilities": "capabilities", "capabilities_of": "capabilities",
    "MinAtarAgent": "models", "NatureCNNAgent": "models",
    "PolicyOutput": "policy_output", "Policy": "policy", "TorchPolicy": "policy", "resolve_device": "policy",
    "TorchPolicyOptions": "policy", "RecurrentModule": "recurrent", "RecurrentTorchPolicy": "recurrent",
}

__all__ = [*_EXPORTS]  # the public surface: _EXPORTS, listed once


# the package's names on first use
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .actions import ActionSpec as ActionSpec
    from .actions import action_spec as action_spec
    from .actions import relative_entropy as relative_entropy
    from .actions import sample_actions as sample_actions
    from .callable_policy import CallablePolicy as CallablePolicy
    from .callable_policy import as_policy as as_policy
    from .capabilities import PolicyCapabilities as PolicyCapabilities
    from .capabilities import capabilities_of as capabilities_of
    from .models import MinAtarAgent as MinAtarAgent
    from .models import NatureCNNAgent as NatureCNNAgent
    from .policy import Policy as Policy
    from .policy import TorchPolicy as TorchPolicy
    from .policy import TorchPolicyOptions as TorchPolicyOptions
    from .policy import resolve_device as resolve_device
    from .policy_output import PolicyOutput as PolicyOutput
    from .recurrent import RecurrentModule as RecurrentModule
    from .recurrent import RecurrentTorchPolicy as RecurrentTorchPolicy
