"""Writing rlviz checkpoints: :func:`save_checkpoint`.

**Format** (``FORMAT_NAME`` version ``FORMAT_VERSION``): a ``torch.export`` archive (``.pt2``) of the network
with a dynamic batch dimension, weights on the CPU, plus ``extra/rlviz.json``: format name and version, the
env recipe (:meth:`EnvRecipe.to_dict`), obs shape/dtype, action names, gamma, kind, rlviz and torch versions
and free-form user metadata. The program returns ``(logits [B, A], value [B])`` for ``kind="actor_critic"``
and logits / Q-values ``[B, A]`` otherwise; gradients w.r.t. the input flow through it (saliency).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..._version import __version__
from ...agent.actions import action_spec, space_to_json
from ...agent.obs import ObsAdapter
from ...agent.outputs import canonical_output
from ...agent.policy import KINDS, Policy, TorchPolicy, action_names_for
from ...envs.recipe import EnvRecipe, make_env
from ...errors import CheckpointError, RlvizError, UsageError
from ..files import META_NAME, atomic_write
from ..loaded import coerce_recipe
from .exported import FORMAT_NAME, FORMAT_VERSION, load_export

__all__ = ["save_checkpoint"]


class _Normalised(nn.Module):
    """Wrap what the user has so the exported program returns one form (:func:`~rlviz.agent.outputs.canonical_output`:
    (logits, value) or logits; Box actions: (mean [+ log std], value) or mean [+ log std]), whatever form the module
    returns: every output form ``TorchPolicy`` accepts is accepted here, by the same function."""

    def __init__(self, inner, kind: str, transform=None, box_dim: int | None = None):
        super().__init__()
        self.inner = inner
        self.kind = kind
        self.transform = transform
        self.box_dim = box_dim

    def forward(self, obs: torch.Tensor):
        x = self.transform(obs) if self.transform is not None else obs
        out = self.inner.heads(x) if isinstance(self.inner, Policy) else self.inner(x)
        return canonical_output(out, self.kind, self.box_dim)


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(type(obj).__name__)


def _device_of(module) -> torch.device:
    if isinstance(module, Policy):
        return module.device
    for t in list(module.parameters()) + list(module.buffers()):
        return t.device
    return torch.device("cpu")


def _check_arguments(module, kind, gamma, metadata) -> dict:
    """Validate the plain arguments; returns the user metadata as JSON values."""
    if kind not in KINDS:
        raise UsageError(f"kind={kind!r}; expected one of {KINDS}.")
    if not 0.0 < float(gamma) <= 1.0:
        raise UsageError(f"gamma={gamma}; expected a discount in (0, 1].")
    if not isinstance(module, (nn.Module, Policy)):
        raise UsageError(f"save_checkpoint needs a torch.nn.Module or an rlviz Policy; got {type(module).__name__}.")
    if getattr(module, "stateful", False) or getattr(module, "needs_action_masks", False):
        raise UsageError(f"save_checkpoint exports a forward of observations alone; {type(module).__name__} also "
                         "takes a recurrent state or the env's action masks. Load its own file (the SB3 zip) instead.")
    try:
        return json.loads(json.dumps(metadata or {}, default=_json_default))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"metadata must hold JSON values (str, numbers, lists, dicts); {exc}.") from exc


def _example_and_names(recipe: EnvRecipe, example_obs, action_names):
    """(example batch, action names, the action space as JSON or None for Discrete, D for Box actions or None)
    from one env of ``recipe``."""
    e = make_env(recipe, render_mode=None)
    try:
        spec = action_spec(e.action_space)
        space_json = space_to_json(e.action_space)
        if example_obs is None:  # what the policy sees: Discrete/Tuple/Dict flattened (rlviz.agent.obs)
            example_obs = ObsAdapter(e.observation_space).batch([e.reset(seed=0)[0]])
        if action_names is None:
            action_names = action_names_for(e, spec.size) if spec.kind == "discrete" else spec.names()
    finally:
        e.close()
    example = np.asarray(example_obs)
    if example.ndim < 2:
        raise UsageError(f"example_obs has shape {example.shape}; expected a batch [1, *obs_shape].")
    return example, action_names, space_json, (spec.size if spec.continuous else None)


def _export(wrapper: _Normalised, inner, x: torch.Tensor):
    """(exported program on the CPU, the module's own outputs for ``x``)."""
    was_training = inner.training if isinstance(inner, nn.Module) else None
    if isinstance(inner, nn.Module):
        inner.eval()
    try:
        with torch.no_grad():
            reference = wrapper(x)
        try:
            ep = torch.export.export(wrapper, (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1)},))
        except RlvizError:
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(
                f"torch.export could not trace {type(inner).__name__} ({first}). rlviz checkpoints need a forward "
                "without data-dependent Python control flow; alternatively torch.save(module.state_dict()) and load "
                "it with load_agent(path, model='pkg.mod:Class', env=...)."
            ) from exc
    finally:
        if was_training:
            inner.train()
    if x.device.type != "cpu":
        ep = torch.export.passes.move_to_device_pass(ep, "cpu")  # type: ignore[attr-defined]
    return ep, (reference if isinstance(reference, tuple) else (reference, None))


def _check_finite(path: Path, reference, kind: str) -> None:
    outputs = reference if kind == "actor_critic" else reference[:1]
    for name, t in zip(("logits", "value"), outputs):
        if t is not None and not bool(torch.isfinite(t).all()):
            what = "NaN" if bool(torch.isnan(t).any()) else "infinity"
            raise CheckpointError(
                f"{path}: the module outputs {what} ({name}) for the example observation; not written. Check the "
                "network's weights (a diverged training run?) and example_obs."
            )


def save_checkpoint(
    path: str | os.PathLike,
    module: nn.Module | Policy,
    *,
    env: EnvRecipe | str,
    example_obs: np.ndarray | None = None,
    kind: str | None = None,
    action_names=None,
    gamma: float = 0.99,
    metadata: dict | None = None,
) -> Path:
    """Export ``module`` (an ``nn.Module`` taking float32 obs [B, *obs_shape], a :class:`TorchPolicy`
    (its ``obs_transform`` is kept) or any :class:`Policy` whose forward torch.export can trace) to one
    self-describing file at ``path``. ``example_obs``: [1, *obs_shape] (default: a reset observation of
    ``env``). ``kind``: "actor_critic" | "logits" | "q" (default: the policy's kind, else
    "actor_critic"). Written to a temporary name, checked by loading it back, then renamed. Returns the path.
    """
    path = Path(path)
    recipe = coerce_recipe(env)
    if kind is None:
        kind = module.kind if isinstance(module, Policy) else "actor_critic"
    meta_user = _check_arguments(module, kind, gamma, metadata)
    example, action_names, space_json, box_dim = _example_and_names(recipe, example_obs, action_names)

    inner = module.module if isinstance(module, TorchPolicy) else module
    transform = module.obs_transform if isinstance(module, TorchPolicy) else None
    x = torch.as_tensor(np.repeat(example[:1], 2, axis=0), dtype=torch.float32, device=_device_of(module))
    ep, ref = _export(_Normalised(inner, kind, transform, box_dim), inner, x)
    _check_finite(path, ref, kind)
    num_actions = int(ref[0].shape[-1]) if space_json is None else len(action_names)
    action_names = tuple(str(a) for a in action_names)
    if len(action_names) != num_actions:
        raise UsageError(f"{len(action_names)} action names for a network with {num_actions} outputs.")

    meta = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "rlviz_version": __version__,
        "torch_version": torch.__version__, "kind": kind, "recipe": recipe.to_dict(),
        "obs_shape": list(example.shape[1:]), "obs_dtype": str(example.dtype), "num_actions": num_actions,
        "action_names": list(action_names), "gamma": float(gamma), "metadata": meta_user,
    }
    if space_json is not None:  # not Discrete; a tanh-squashed Box policy (SAC) keeps its squash
        meta["action_space"] = {**space_json, "squash": bool(getattr(module, "squash", False))}
    buffer = io.BytesIO()
    torch.export.save(ep, buffer, extra_files={META_NAME: json.dumps(meta, sort_keys=True)})
    data = buffer.getvalue()
    # Check what we wrote: the safe loader accepts it and it computes what the module computed. (The recipe is
    # the caller's own, from their code, not from a file: their consent.)
    loaded = load_export(data, str(path), env=None, trust=False, trust_recipe=True, device="cpu", kind="auto")
    with torch.no_grad():
        got = loaded.policy.forward(x.cpu()) if space_json is None else loaded.policy.module(x.cpu())
    got = got if isinstance(got, tuple) else (got, None)
    same = torch.allclose(got[0], ref[0].cpu(), rtol=1e-4, atol=1e-5)
    if kind == "actor_critic":
        same = same and torch.allclose(got[1], ref[1].cpu(), rtol=1e-4, atol=1e-5)
    if not same:
        raise CheckpointError(f"{path}: the exported program's outputs differ from the module's; not written.")
    atomic_write(path, data)
    return path
