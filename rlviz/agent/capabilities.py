"""What a policy can do, in one frozen record read in one place: :func:`capabilities_of`.

A policy declares its abilities as the class attributes of :class:`~rlviz.agent.policy.Policy`
(``differentiable``, ``stateful``, ``needs_action_masks``, ``obs_format``, ``action_spec``, ``squash``); every
source's policy sets them in its constructor (``CallablePolicy``: forward only; ``SB3RecurrentPolicy``: stateful;
``MaskedTorchPolicy``: action masks; SB3 policies: raw observations). :func:`capabilities_of` reads them once per
policy object, with the base class's defaults for anything a user's own policy class leaves out, and every stage
(the loops, the recorder, saliency, attention, the loaders) asks the record, never the attributes. Numpy only:
the recorder reads it without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PolicyCapabilities", "capabilities_of", "has_memory"]

_CACHE = "_rlviz_capabilities"


@dataclass(frozen=True)
class PolicyCapabilities:
    """One policy's abilities (fixed once the policy is built).

    differentiable: gradients flow from its outputs back to the observation (torch modules); False for forward-only
        policies (numpy callables): gradient saliency and gradient attention are refused, perturbation works.
    recurrent: it carries a state from step to step (``initial_state``, ``step``; RecurrentPPO).
    action_masks: it takes the env's ``action_masks()`` at every step (MaskablePPO).
    obs_format: "flat" (non-array observations one-hot / concatenated for it) or "raw" (stacked as they come).
    action_spec: the actions it was made for (an :class:`~rlviz.agent.actions.ActionSpec`); None: Discrete(num_actions).
    squash: Box actions: a tanh-squashed Gaussian (SAC).

    (Whether the policy has a value head is not here: a ``TorchPolicy(kind="auto")`` learns it from its first
    forward; read ``policy.has_value``.)
    """

    differentiable: bool = True
    recurrent: bool = False
    action_masks: bool = False
    obs_format: str = "flat"
    action_spec: Any = None  # an ActionSpec or None (not imported: rlviz.agent.actions reads this module)
    squash: bool = False

    @property
    def actions(self) -> str:
        """The action kind: "discrete", "multi_discrete", "multi_binary" or "box"."""
        return "discrete" if self.action_spec is None else self.action_spec.kind

    @property
    def continuous_actions(self) -> bool:
        """Box actions: the forward's first output is the action mean [B, D]."""
        return self.actions == "box"

    @property
    def plain(self) -> bool:
        """Neither a state nor masks: ``evaluate(obs)`` is all a loop calls."""
        return not (self.recurrent or self.action_masks)

    @property
    def dist(self) -> str:
        """The distribution its actions are drawn from: "categorical", "gaussian" or "multi_categorical" (a Box
        actor's mean is named "gaussian" here: the saliency targets treat a deterministic actor alike)."""
        if self.actions == "discrete":
            return "categorical"
        return "gaussian" if self.continuous_actions else "multi_categorical"


def capabilities_of(policy: Any) -> PolicyCapabilities:
    """``policy``'s :class:`PolicyCapabilities`: derived once from its declared attributes (the defaults of
    :class:`~rlviz.agent.policy.Policy` for any it lacks) and kept on the policy; a policy may also carry its own
    record as ``capabilities``. The one place any stage learns what a policy supports."""
    own = policy.__dict__.get(_CACHE) if hasattr(policy, "__dict__") else None
    if isinstance(own, PolicyCapabilities):
        return own
    declared = getattr(type(policy), "capabilities", None)
    if isinstance(declared, PolicyCapabilities):
        return declared
    defaults = PolicyCapabilities()
    caps = PolicyCapabilities(
        differentiable=bool(getattr(policy, "differentiable", defaults.differentiable)),
        recurrent=bool(getattr(policy, "stateful", defaults.recurrent)),
        action_masks=bool(getattr(policy, "needs_action_masks", defaults.action_masks)),
        obs_format=str(getattr(policy, "obs_format", defaults.obs_format)),
        action_spec=getattr(policy, "action_spec", defaults.action_spec),
        squash=bool(getattr(policy, "squash", defaults.squash)),
    )
    try:
        object.__setattr__(policy, _CACHE, caps)
    except (AttributeError, TypeError):  # an object without an instance dict: derived at each call
        pass
    return caps


def has_memory(policy: Any) -> bool:
    """Whether ``policy`` is recurrent with the 0.5 contract (``torch_step``, ``state_tensors``, ``memory_of``):
    what the memory panel, the ``.npz``'s memory and the memory diagnostics read (docs/memory.md)."""
    return (policy is not None and capabilities_of(policy).recurrent
            and all(callable(getattr(policy, n, None)) for n in ("torch_step", "state_tensors", "memory_of")))
