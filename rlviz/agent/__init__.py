"""The agent: the :class:`Policy` contract (action specs, outputs, observations, stepping, masks, callables), the
CleanRL-module adapter and the reference networks. Where agents come from (checkpoint files, SB3, rl-zoo3,
CleanRL, the Hub) is :mod:`rlviz.sources`.

Names load on first use: ``rlviz.agent.actions`` / ``.obs`` / ``.policy_output`` are numpy only, so the
recorders and the drawing code use them without importing torch (``.policy`` and the rest import it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._deprecated import moved_attribute
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

__all__ = ["ActionSpec", "CallablePolicy", "action_spec", "as_policy", "capabilities_of", "MinAtarAgent",
           "NatureCNNAgent", "Policy", "PolicyCapabilities", "PolicyOutput", "TorchPolicy", "TorchPolicyOptions", "relative_entropy", "resolve_device", "sample_actions",
           "RecurrentModule", "RecurrentTorchPolicy"]


# the package's names on first use; the loaders' names of release 0.2 (``rlviz.agent.load_agent``...), now in
# :mod:`rlviz.sources`, with a warning
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), lambda name: moved_attribute(__name__, name))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .actions import ActionSpec, action_spec, relative_entropy, sample_actions
    from .callable_policy import CallablePolicy, as_policy
    from .capabilities import PolicyCapabilities, capabilities_of
    from .models import MinAtarAgent, NatureCNNAgent
    from .policy import Policy, TorchPolicy, TorchPolicyOptions, resolve_device
    from .policy_output import PolicyOutput
    from .recurrent import RecurrentModule, RecurrentTorchPolicy
