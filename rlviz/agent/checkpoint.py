"""rlviz checkpoints, and the one loader every entry point uses.

**Format** (``FORMAT_NAME`` version ``FORMAT_VERSION``): a ``torch.export`` archive (``.pt2``) of
the network with a dynamic batch dimension, weights on the CPU, plus ``extra/rlviz.json``: format
name and version, the env recipe (:meth:`EnvRecipe.to_dict`), obs shape/dtype, action names,
gamma, kind, rlviz and torch versions and free-form user metadata. The program returns
``(logits [B, A], value [B])`` for ``kind="actor_critic"`` and logits / Q-values ``[B, A]``
otherwise; gradients w.r.t. the input flow through it (saliency). No Python class is needed to
load it, and loading unpickles nothing: the archive is vetted first
(:mod:`rlviz.checkpoint_safety`), because ``torch.export.load`` itself is not safe for untrusted files.

**Loader**: :func:`load_agent` detects the file kind from its bytes: rlviz checkpoint, plain
``torch.export`` program, ``torch.save`` file (a state_dict, with ``model=``; a pickled module only
with ``trust=True``), Stable-Baselines3 ``.zip``. Unusable files raise :class:`CheckpointError`.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .._version import __version__
from ..envs.recipe import EnvRecipe, make_env
from ..errors import CheckpointError, RlvizError, UnsafeCheckpointError, UsageError
from .adapters import build_model, to_policy
from .files import EXPECTED, META_NAME, atomic_write, describe, detect_format, read_file, torch_load
from .policy import KINDS, Policy, TorchPolicy, action_names_for, check_action_space, resolve_device
from .safety import read_export_archive, verify_export_archive
from .sb3 import load_sb3_zip
from .weights import find_state_dict, load_weights

__all__ = ["LoadedAgent", "save_checkpoint", "load_checkpoint", "load_agent", "detect_format", "settle_kind",
           "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "rlviz-checkpoint"
FORMAT_VERSION = 1
_META = META_NAME


@dataclass(frozen=True)
class LoadedAgent:
    """A policy ready to run, with what is needed to rebuild its env.

    policy: :class:`Policy` (forward: float32 obs [B, *obs_shape] -> logits [B, A], value [B] | None);
    recipe: the env it was trained on; action_names: A strings; gamma: discount for returns-to-go;
    kind: "actor_critic" | "logits" | "q"; metadata: user/training info (JSON types);
    path: the file; format: "rlviz" | "torch-export" | "torch-state-dict" | "torch-pickle" | "sb3-zip".
    """

    policy: Policy
    recipe: EnvRecipe
    action_names: tuple
    gamma: float
    kind: str
    metadata: dict = field(default_factory=dict)
    path: Path | None = None
    format: str = "rlviz"


# -- saving ---------------------------------------------------------------------------------------
class _Normalised(nn.Module):
    """Wrap what the user has so the exported program returns (logits, value) or logits only."""

    def __init__(self, inner, kind: str, transform=None):
        super().__init__()
        self.inner = inner
        self.kind = kind
        self.transform = transform

    def forward(self, obs: torch.Tensor):
        x = self.transform(obs) if self.transform is not None else obs
        if isinstance(self.inner, Policy):
            logits, value = self.inner.forward(x)
            return (logits, value) if self.kind == "actor_critic" else logits
        out = self.inner(x)
        if isinstance(out, dict):
            out = (out["logits"], out.get("value"))
        if isinstance(out, (tuple, list)):
            if self.kind != "actor_critic":
                return out[0]
            logits, value = out[0], out[1]
            if value.ndim == 2 and value.shape[-1] == 1:
                value = value[:, 0]
            return logits, value
        if self.kind == "actor_critic":
            raise UsageError("kind='actor_critic' but the module returned logits only; pass kind='logits' or 'q'.")
        return out


class ExportedNetwork(nn.Module):
    """Holds the module of a loaded ExportedProgram. Exported programs are traced in eval mode and
    refuse ``.train()``/``.eval()``; here those are no-ops, so the holder behaves like any network."""

    def __init__(self, program: nn.Module):
        super().__init__()
        self.program = program

    def forward(self, obs: torch.Tensor):
        return self.program(obs)

    def train(self, mode: bool = True) -> ExportedNetwork:
        return self


def _coerce_recipe(env) -> EnvRecipe:
    if isinstance(env, EnvRecipe):
        return env
    if isinstance(env, str) and env:
        return EnvRecipe.for_env_id(env)
    raise UsageError(f"env={env!r}: expected an env id such as 'ALE/Breakout-v5' or an rlviz EnvRecipe.")


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


def save_checkpoint(  # noqa: C901 - split by the security work
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
    recipe = _coerce_recipe(env)
    if kind is None:
        kind = module.kind if isinstance(module, Policy) else "actor_critic"
    if kind not in KINDS:
        raise UsageError(f"kind={kind!r}; expected one of {KINDS}.")
    if not 0.0 < float(gamma) <= 1.0:
        raise UsageError(f"gamma={gamma}; expected a discount in (0, 1].")
    try:
        meta_user = json.loads(json.dumps(metadata or {}, default=_json_default))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"metadata must hold JSON values (str, numbers, lists, dicts); {exc}.") from exc
    if not isinstance(module, (nn.Module, Policy)):
        raise UsageError(f"save_checkpoint needs a torch.nn.Module or an rlviz Policy; got {type(module).__name__}.")

    if example_obs is None or action_names is None:
        e = make_env(recipe, render_mode=None)
        try:
            n_env_actions = check_action_space(e.action_space)
            if example_obs is None:
                example_obs = np.asarray(e.reset(seed=0)[0])[None]
            if action_names is None:
                action_names = action_names_for(e, n_env_actions)
        finally:
            e.close()
    example = np.asarray(example_obs)
    if example.ndim < 2:
        raise UsageError(f"example_obs has shape {example.shape}; expected a batch [1, *obs_shape].")

    inner = module.module if isinstance(module, TorchPolicy) else module
    transform = module.obs_transform if isinstance(module, TorchPolicy) else None
    wrapper = _Normalised(inner, kind, transform)
    device = _device_of(module)
    x = torch.as_tensor(np.repeat(example[:1], 2, axis=0), dtype=torch.float32, device=device)
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
    if device.type != "cpu":
        ep = torch.export.passes.move_to_device_pass(ep, "cpu")
    logits = reference[0] if isinstance(reference, tuple) else reference
    num_actions = int(logits.shape[-1])
    action_names = tuple(str(a) for a in action_names)
    if len(action_names) != num_actions:
        raise UsageError(f"{len(action_names)} action names for a network with {num_actions} outputs.")

    meta = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "rlviz_version": __version__,
        "torch_version": torch.__version__, "kind": kind, "recipe": recipe.to_dict(),
        "obs_shape": list(example.shape[1:]), "obs_dtype": str(example.dtype), "num_actions": num_actions,
        "action_names": list(action_names), "gamma": float(gamma), "metadata": meta_user,
    }
    buffer = io.BytesIO()
    torch.export.save(ep, buffer, extra_files={_META: json.dumps(meta, sort_keys=True)})
    data = buffer.getvalue()
    # Check what we wrote: the safe loader accepts it and it computes what the module computed.
    loaded = _load_export(data, str(path), env=None, trust=False, device="cpu", kind="auto")
    with torch.no_grad():
        got = loaded.policy.forward(x.cpu())
    ref = reference if isinstance(reference, tuple) else (reference, None)
    same = torch.allclose(got[0], ref[0].cpu(), rtol=1e-4, atol=1e-5)
    if kind == "actor_critic":
        same = same and torch.allclose(got[1], ref[1].cpu(), rtol=1e-4, atol=1e-5)
    if not same:
        raise CheckpointError(f"{path}: the exported program's outputs differ from the module's; not written.")
    atomic_write(path, data)
    return path


# -- loading ------------------------------------------------------------------------------------
def _meta_from(members: dict[str, bytes], source: str) -> dict | None:
    blob = members.get(f"extra/{_META}")
    if blob is None:
        return None
    try:
        meta = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{source}: extra/{_META} is not valid JSON ({exc}).") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{source}: extra/{_META} does not describe an rlviz checkpoint.")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{source} is rlviz checkpoint format {version!r}; this rlviz reads up to {FORMAT_VERSION}. Upgrade rlviz."
        )
    return meta


def _env_facts(recipe: EnvRecipe):
    e = make_env(recipe, render_mode=None)
    try:
        n = check_action_space(e.action_space)
        return e.observation_space, e.action_space, action_names_for(e, n)
    finally:
        e.close()


def _load_export(data: bytes, source: str, *, env, trust: bool, device, kind: str) -> LoadedAgent:
    members = read_export_archive(data, source) if trust else verify_export_archive(data, source)
    meta = _meta_from(members, source)
    try:
        ep = _export_load(data)
        dev = resolve_device(device)
        if dev.type != "cpu":
            ep = torch.export.passes.move_to_device_pass(ep, dev)
        module = ExportedNetwork(ep.module())
    except RlvizError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{source}: torch.export could not load the program ({first}).") from exc
    for p in module.parameters():
        p.requires_grad_(False)  # gradients are taken w.r.t. the input only
    if meta is not None:
        try:
            recipe = EnvRecipe.from_dict(meta["recipe"])
            kind, names, gamma = str(meta["kind"]), tuple(str(a) for a in meta["action_names"]), float(meta["gamma"])
            if kind not in KINDS or not names:
                raise ValueError(f"kind {kind!r}, {len(names)} action names")
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise CheckpointError(f"{source}: malformed extra/{_META} ({exc}).") from None
        if env is not None:
            recipe = _coerce_recipe(env)
            _, space, _ = _env_facts(recipe)
            if check_action_space(space) != len(names):
                raise UsageError(f"{source} has {len(names)} actions but env {recipe.env_id!r} has {space.n}.")
        fmt, user_meta = "rlviz", dict(meta.get("metadata") or {})
    else:
        if env is None:
            raise UsageError(f"{source} is a torch.export program without rlviz metadata; pass env=<env id> (--env).")
        recipe = _coerce_recipe(env)
        _, _, names = _env_facts(recipe)
        gamma, fmt, user_meta = 0.99, "torch-export", {}
    policy = TorchPolicy(module, num_actions=len(names), kind=kind, device=device)
    if meta is None:
        settle_kind(policy, _env_facts(recipe)[0])
    return LoadedAgent(policy, recipe, tuple(names), gamma, policy.kind, user_meta, Path(source), fmt)


def _export_load(data: bytes):
    """torch.export.load without its fallback to the pre-2.8 layout (which may unpickle with weights_only=False)."""
    try:
        from torch.export.pt2_archive._package import load_pt2
    except ImportError:  # pragma: no cover - older torch
        return torch.export.load(io.BytesIO(data))
    contents = load_pt2(io.BytesIO(data))
    if "model" not in contents.exported_programs:
        raise CheckpointError("the archive holds no program named 'model'")
    return contents.exported_programs["model"]


def settle_kind(policy: Policy, observation_space) -> None:
    """Run one forward on a zero observation so a ``kind="auto"`` policy decides its kind (and A)."""
    shape = getattr(observation_space, "shape", None)
    if not shape:
        return
    with torch.no_grad():
        policy.forward(policy.to_tensor(np.zeros((1, *shape), dtype=np.float32)))


def load_checkpoint(path, *, device: str = "auto", trust: bool = False) -> LoadedAgent:
    """Load a file written by :func:`save_checkpoint` (anything else: :class:`CheckpointError`)."""
    data = read_file(path)
    fmt = detect_format(data)
    if fmt != "rlviz":
        what = {"sb3-zip": "a Stable-Baselines3 zip", "torch-save": "a torch.save file",
                "torch-export": "a torch.export program without rlviz metadata"}.get(fmt, describe(data))
        raise CheckpointError(
            f"{path} is {what}, not an rlviz checkpoint written by save_checkpoint; use load_agent(path, env=...)."
        )
    return _load_export(data, str(path), env=None, trust=trust, device=device, kind="auto")


# -- the generic loader ---------------------------------------------------------------------------
def load_agent(
    path,
    *,
    env: EnvRecipe | str | None = None,
    model: Any = None,
    trust: bool = False,
    device: str = "auto",
    kind: str = "auto",
) -> LoadedAgent:
    """Load any supported checkpoint as a :class:`LoadedAgent`; never unpickles code unless ``trust``.

    env: needed for files that do not record it (SB3, torch.save, bare torch.export); overrides the
      recipe of an rlviz checkpoint. model: for a state_dict file, the network to load it into: an
      ``nn.Module`` instance, a class, or ``"pkg.module:Class"`` / ``"path/to/file.py:Class(k=v)"``
      (constructor arguments named env/envs, observation_space, action_space, num_actions, obs_shape
      are filled from ``env``). kind: "auto" | "actor_critic" | "logits" | "q" for plain torch files.
    """
    if kind != "auto" and kind not in KINDS:
        raise UsageError(f"kind={kind!r}; expected 'auto' or one of {KINDS}.")
    data = read_file(path)
    fmt = detect_format(data)
    source = str(path)
    if model is not None and fmt not in ("torch-save",):
        raise UsageError(f"model= is for state_dict files; {source} ({fmt}) carries its own network.")
    if fmt in ("rlviz", "torch-export"):
        return _load_export(data, source, env=env, trust=trust, device=device, kind=kind)
    if fmt == "sb3-zip":
        recipe = _need_env(env, source, "a Stable-Baselines3 zip")
        obs_space, act_space, names = _env_facts(recipe)
        policy, gamma, meta = load_sb3_zip(data, source, observation_space=obs_space, action_space=act_space,
                                           trust=trust, device=device)
        return LoadedAgent(policy, recipe, tuple(names), gamma, policy.kind, meta, Path(source), "sb3-zip")
    if fmt == "torch-save":
        return _load_torch_file(data, source, env=env, model=model, trust=trust, device=device, kind=kind)
    if fmt == "corrupt-zip":
        raise CheckpointError(f"{source} is a truncated or corrupt zip archive; expected {EXPECTED}.")
    what = "a zip archive of unknown layout" if fmt == "zip" else describe(data)
    raise CheckpointError(f"{source} is {what}; expected {EXPECTED}.")


def _need_env(env, source: str, what: str) -> EnvRecipe:
    if env is None:
        raise UsageError(f"{source} is {what}, which does not record its environment; pass env=<env id> (--env).")
    return _coerce_recipe(env)


def _load_torch_file(data: bytes, source: str, *, env, model, trust: bool, device, kind: str) -> LoadedAgent:

    recipe = _need_env(env, source, "a torch.save file")
    try:
        obj, fmt = torch_load(data, source, weights_only=True), "torch-state-dict"
    except UnsafeCheckpointError:
        if not trust:
            raise
        obj, fmt = torch_load(data, source, weights_only=False), "torch-pickle"
    obs_space, act_space, names = _env_facts(recipe)
    if isinstance(obj, nn.Module):
        if model is not None:
            raise UsageError(f"{source} holds a whole module; model= is only for state_dict files.")
        module = obj
    elif isinstance(obj, dict):
        state = find_state_dict(obj, source)
        if model is None:
            raise UsageError(
                f"{source} holds a state_dict (weights only); say which network they belong to with "
                "model='pkg.module:Class' or 'path/to/file.py:Class' (CLI: --model)."
            )
        module = build_model(model, observation_space=obs_space, action_space=act_space)
        load_weights(module, state, source)
    else:
        raise CheckpointError(f"{source} holds a {type(obj).__name__}; expected a state_dict or an nn.Module.")
    policy = to_policy(module, observation_space=obs_space, action_space=act_space, kind=kind, device=device)
    settle_kind(policy, obs_space)
    return LoadedAgent(policy, recipe, tuple(names), 0.99, policy.kind, {}, Path(source), fmt)
