"""Explanation methods as types: one :class:`Attribution` protocol, one class per saliency method, and the registry
that maps the names a user chooses (``--saliency``) to the classes (:data:`ATTRIBUTIONS`: the one registry,
:data:`rlviz.choices.ATTRIBUTION_METHODS`, with its classes; each class's ``name`` is read from it).

>>> method = attribution_class("gradient")(policy)           # doctest: +SKIP
>>> grads = method.attribute(obs, target="action")           # like obs: [B, *obs_shape], float32, >= 0
>>> maps = method.maps(obs, target="action")                 # reduced: [B, H, W] (vectors: [B, D])

The contract is captum's ``attribute(inputs, target)``: the output has the inputs' shape, and nothing the caller
passed is changed (gradients are taken on a detached copy; the module's ``.grad`` and train/eval mode are left
alone). :meth:`SaliencyMethod.maps` reduces it to one number per pixel, as the videos draw it (the functional
:func:`rlviz.explain.attribute` is ``maps``). Each class also says what it needs of a policy (:meth:`check_policy`,
the one rule the recorder, :func:`~rlviz.explain.attribute` and attention all apply, read from the policy's
:class:`~rlviz.agent.capabilities.PolicyCapabilities`; a recurrent policy is explained given the state it carried:
:class:`~rlviz.explain.given_state.GivenState`, :func:`~rlviz.explain.episode_saliency`). ``times_input=True`` gives attention's attribution per
object: |attribution x input| summed over channels (the perturbation score is already spatial and stays as is).

Importing this module loads no torch (the recorder validates its options with it); the methods load it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..agent.capabilities import capabilities_of
from ..choices import ATTRIBUTION_METHODS
from ..errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Attribution", "SaliencyMethod", "Gradient", "SmoothGrad", "Perturbation", "ATTRIBUTIONS",
           "attribution_class"]


@runtime_checkable
class Attribution(Protocol):
    """What every explanation method is: ``attribute(inputs, target)`` -> float32 shaped like ``inputs`` (one
    number per input element), the caller's arrays and tensors unchanged."""

    name: ClassVar[str]

    def attribute(self, inputs: Any, target: str | int = "action", actions: Any = None) -> np.ndarray: ...


class SaliencyMethod:
    """The shared part of the saliency methods: validation, batching by memory, the reduction to maps.

    Args:
        policy: an rlviz :class:`~rlviz.agent.policy.Policy`; computation runs on ``policy.device``.
        layout: "chw" | "hwc" | ... (default: detected, :func:`~rlviz.explain.layout.detect_layout`).
        batch_size: inputs per forward (noisy copies or perturbed frames count one each); default: what fits
            ``memory_budget_mb``.
        times_input: attention's attribution: |attribution x input| summed over channels (gradient methods).
        options: the method's own (:attr:`defaults`).
    """

    #: The CLI / API name: the class's key in the registry (:data:`rlviz.choices.ATTRIBUTION_METHODS`), set from it
    #: when the class is made (never written on a registered class); a method of one's own outside the registry
    #: (passed as a class) keeps its own, or its class name in lower case.
    name: ClassVar[str]
    #: The method's options and their defaults.
    defaults: ClassVar[dict[str, Any]] = {}
    #: Takes gradients through the policy: refused for a forward-only policy (a numpy callable).
    gradients: ClassVar[bool] = True
    #: Scores image regions: already one number per pixel, refuses flat vector observations.
    spatial: ClassVar[bool] = False
    #: Its maps can come from the graph of the forward that computed the panels (one pass of the policy).
    from_forward: ClassVar[bool] = False
    #: With target "action", scores the whole output (all logits), not the chosen action: needs no actions.
    whole_policy_action: ClassVar[bool] = False
    #: One input per frame (no noisy or perturbed copies): a recurrent policy's frames, each given the state it
    #: carried, are attributed as one batch (:class:`~rlviz.explain.given_state.GivenState`), not frame by frame.
    single_pass: ClassVar[bool] = False
    #: What attention's object shares are shares of (``times_input``), as the docs and summary.json name it.
    object_attribution: ClassVar[str] = ""
    #: Its memory variant (``--memory-saliency``): a :class:`~rlviz.explain.memory.MemorySaliency` class of
    #: :mod:`rlviz.explain.memory`, by name (that module builds on this one); :data:`MEMORY_ATTRIBUTIONS
    #: <rlviz.explain.memory.MEMORY_ATTRIBUTIONS>` is read from it.
    memory: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        path = f"{cls.__module__}:{cls.__qualname__}"
        named = next((name for name, where in ATTRIBUTION_METHODS.items() if where == path), None)
        if named is not None:
            cls.name = named
        elif "name" not in cls.__dict__:
            cls.name = cls.__qualname__.lower()

    def __init__(self, policy: Any, *, layout: str | None = None, batch_size: int | None = None,
                 memory_budget_mb: float = 512.0, times_input: bool = False, **options: Any):
        self.policy, self.layout, self.batch_size = policy, layout, batch_size
        self.memory_budget_mb, self.times_input, self.options = memory_budget_mb, bool(times_input), dict(options)
        self.known_options(options)

    # -- what a policy must support: one rule for the recorder, attribute() and attention --------------
    @classmethod
    def check_policy(cls, policy: Any) -> None:
        """A one-line :class:`~rlviz.errors.UsageError` when ``policy``'s capabilities rule this method out."""
        caps, who = capabilities_of(policy), type(policy).__name__
        if cls.gradients and not caps.differentiable:
            raise UsageError(f"saliency {cls.name!r} takes gradients, but this policy is forward-only ({who}: a numpy "
                             "callable); use saliency 'perturbation' (CLI: --saliency perturbation), which needs "
                             "forward passes only.")
        if caps.recurrent and not callable(getattr(policy, "torch_step", None)):
            raise UsageError(f"saliency {cls.name!r}: this policy is recurrent ({who}: its outputs depend on its state) "
                             "but has no torch_step, the differentiable step saliency takes (docs/memory.md); use no "
                             "saliency (CLI: --saliency none; API: saliency=None).")

    @classmethod
    def known_options(cls, options: dict) -> dict:
        """``options``, after checking the method takes each of them (a one-line UsageError naming its own)."""
        unknown = set(options) - set(cls.defaults)
        if unknown:
            raise UsageError(f"method={cls.name!r} does not take {', '.join(sorted(unknown))}; its options are "
                             f"{', '.join(sorted(cls.defaults)) or 'none'}.")
        return options

    @classmethod
    def resolve_options(cls, options: dict, hw: tuple[int, int]) -> dict:
        """The method's options: ``options`` over :attr:`defaults`, checked (``hw``: the maps' size)."""
        opts = {**cls.defaults, **cls.known_options(options)}
        if opts.get("reduce", "max") not in ("max", "sum"):
            raise UsageError(f"reduce={opts['reduce']!r}: use 'max' or 'sum'.")
        return opts

    @classmethod
    def inputs_per_frame(cls, opts: dict, hw: tuple[int, int]) -> int:
        """Inputs forwarded per frame (noisy copies, perturbed frames)."""
        return 1

    @classmethod
    def chunk_maps(cls, policy: Any, x: torch.Tensor, layout: Any, kind: str, index: int | None, actions: Any,
                   opts: dict, bs: int) -> torch.Tensor:
        """Maps [F, h, w] (``layout.reduce`` of the attribution) for frames x float32 [F, *obs] on the device."""
        raise NotImplementedError

    # -- the API ------------------------------------------------------------------------------------------
    def attribute(self, inputs: Any, target: str | int = "action", actions: Any = None) -> np.ndarray:
        """float32 [B, *obs_shape], >= 0: the attribution of each input element (a spatial score is given to every
        channel of its pixel). ``inputs``: [B, *obs_shape] (any array-like with shape and slicing); ``target``:
        "action" | "logprob" | "value" | an action index; ``actions``: int [B] (default: each row's argmax)."""
        return self._run(inputs, target, actions, elementwise=True)

    def maps(self, inputs: Any, target: str | int = "action", actions: Any = None) -> np.ndarray:
        """float32 [B, H, W] >= 0, not normalised (flat vector observations: [B, D]): the attribution reduced over
        channels and stacked frames (the max; ``reduce="sum"`` for a sum; ``times_input``: the sum)."""
        return self._run(inputs, target, actions, elementwise=False)

    def _run(self, inputs: Any, target: Any, actions: Any, elementwise: bool) -> np.ndarray:
        from .batching import iter_chunks

        out = None
        for s, m in iter_chunks(self, inputs, target, actions, elementwise):
            if out is None:
                out = np.empty((inputs.shape[0],) + m.shape[1:], dtype=np.float32)
            out[s : s + m.shape[0]] = m
        return out  # type: ignore[return-value]  # inputs have at least one row


class Gradient(SaliencyMethod):
    """|d target / d obs| (Simonyan et al. 2014): one backward of the sum of a chunk's per-frame targets (exact: frames
    do not interact in the network). ``times_input``: |gradient x input| (Shrikumar et al. 2016)."""

    memory = "MemoryGradient"
    single_pass = True
    defaults: ClassVar[dict[str, Any]] = {"reduce": "max"}
    from_forward = True
    object_attribution = "|gradient x input|"

    @classmethod
    def chunk_maps(cls, policy, x, layout, kind, index, actions, opts, bs):
        import torch

        from .gradients import _gradients

        return torch.cat([layout.reduce(_gradients(policy, x[s : s + bs], kind, None if actions is None else
                                                   actions[s : s + bs], index, layout), opts["reduce"])
                          for s in range(0, x.shape[0], bs)])


class SmoothGrad(SaliencyMethod):
    """The mean |gradient| over ``n_samples`` noisy copies (Smilkov et al. 2017), noise sigma = ``noise_level`` x
    (max - min) of each frame; the same ``n_samples`` noise patterns (seeded by ``seed``) for every frame."""

    memory = "MemoryGradient"  # (its noise averages input gradients; the memory's are exact)
    defaults: ClassVar[dict[str, Any]] = {"reduce": "max", "n_samples": 16, "noise_level": 0.15, "seed": 0}
    object_attribution = "|smoothgrad x input|"

    @classmethod
    def resolve_options(cls, options, hw):
        opts = super().resolve_options(options, hw)
        if int(opts["n_samples"]) < 1 or float(opts["noise_level"]) < 0:
            raise UsageError(f"smoothgrad needs n_samples >= 1 and noise_level >= 0; received {opts}.")
        return opts

    @classmethod
    def inputs_per_frame(cls, opts, hw):
        return int(opts["n_samples"])

    @classmethod
    def chunk_maps(cls, policy, x, layout, kind, index, actions, opts, bs):
        from .gradients import _smoothgrad

        return _smoothgrad(policy, x, layout, kind, actions, index, opts, bs)


class Perturbation(SaliencyMethod):
    """Greydanus et al. 2018 (:mod:`rlviz.explain.perturbation`): how much blurring each region changes the policy's
    output (target "action": all logits) or its value. Forward passes only; image observations only."""

    memory = "MemoryPerturbation"
    defaults: ClassVar[dict[str, Any]] = {"radius": None, "stride": None, "blur_sigma": "auto"}
    gradients = False
    spatial = True
    whole_policy_action = True
    object_attribution = "Greydanus perturbation score"

    @classmethod
    def resolve_options(cls, options, hw):
        from .perturbation import default_options

        opts, defaults = super().resolve_options(options, hw), default_options(*hw)
        return {k: defaults[k] if (v is None or (k == "blur_sigma" and v == "auto")) else v for k, v in opts.items()}

    @classmethod
    def inputs_per_frame(cls, opts, hw):
        from .perturbation import mask_count

        return mask_count(*hw, int(opts["stride"])) + 1

    @classmethod
    def chunk_maps(cls, policy, x, layout, kind, index, actions, opts, bs):
        import torch

        from . import perturbation as pert

        grid = pert.mask_grid(*layout.hw, float(opts["radius"]), int(opts["stride"]), str(x.device))
        if kind == "index":
            actions = torch.full((x.shape[0],), index, dtype=torch.long, device=x.device)
        return pert.perturbation_saliency(policy.forward, layout.to_canonical(x), layout.from_canonical, kind, actions,
                                          grid, opts["blur_sigma"], bs)


class _Registry(Mapping[str, "type[SaliencyMethod]"]):
    """:data:`rlviz.choices.ATTRIBUTION_METHODS` with its classes: each imported on first use (a method may live in
    a module of its own that imports this one)."""

    def __getitem__(self, name: str) -> type[SaliencyMethod]:
        module, _, qualname = ATTRIBUTION_METHODS[name].partition(":")
        cls = getattr(importlib.import_module(module), qualname)
        if not (isinstance(cls, type) and issubclass(cls, SaliencyMethod)):  # pragma: no cover - a registry typo
            raise TypeError(f"rlviz.choices.ATTRIBUTION_METHODS[{name!r}] = {ATTRIBUTION_METHODS[name]!r} is not a "
                            "SaliencyMethod class.")
        cls.name = name  # (the registry's name, whatever the class was made with)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(ATTRIBUTION_METHODS)

    def __len__(self) -> int:
        return len(ATTRIBUTION_METHODS)

    def __repr__(self) -> str:
        return f"ATTRIBUTIONS({dict(ATTRIBUTION_METHODS)!r})"


#: The registry: each name a user may choose -> its class (:data:`rlviz.choices.ATTRIBUTION_METHODS`, in that order).
ATTRIBUTIONS: Mapping[str, type[SaliencyMethod]] = _Registry()


def attribution_class(method: str | type[SaliencyMethod]) -> type[SaliencyMethod]:
    """The class of saliency ``method`` (a name of :data:`ATTRIBUTIONS`, or a class, returned as is); a one-line
    UsageError naming the choices for any other name."""
    if isinstance(method, type) and issubclass(method, SaliencyMethod):
        return method
    cls = ATTRIBUTIONS.get(method) if isinstance(method, str) else None
    if cls is None:
        raise UsageError(f"saliency method={method!r} is not known; use one of {', '.join(map(repr, ATTRIBUTIONS))}.")
    return cls
