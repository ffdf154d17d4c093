"""Loading ``torch.export`` archives (rlviz ``.pt2`` checkpoints and bare programs) as a :class:`LoadedAgent`.

The archive is vetted first (:mod:`rlviz.agent.safety`): ``torch.export.load`` itself is not safe for untrusted
files. The JSON recipe inside an rlviz checkpoint is read under :mod:`rlviz.envs.trust`'s rule: an env id,
kwargs or wrapper the file names is acted on only if rlviz knows it, the caller passed that env id
themselves, or the caller trusts the file.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..envs.recipe import EnvRecipe, make_env
from ..errors import CheckpointError, EnvError, RlvizError, UsageError
from .actions import action_spec, space_from_json
from .files import META_NAME
from .policy import KINDS, Policy, TorchPolicy, action_names_for, resolve_device
from .safety import read_export_archive, verify_export_archive

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "LoadedAgent", "ExportedNetwork", "coerce_recipe", "env_facts",
           "load_export", "settle_kind"]

FORMAT_NAME = "rlviz-checkpoint"
FORMAT_VERSION = 1


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


class ExportedNetwork(nn.Module):
    """Holds the module of a loaded ExportedProgram. Exported programs are traced in eval mode and
    refuse ``.train()``/``.eval()``; here those are no-ops, so the holder behaves like any network.

    torch checks every input against the program's shape constraints before each forward (its pre-hook: 45-60 us,
    15-20% of a batch-16 MinAtar forward). The check depends on the input's shape, dtype and device only, so it
    runs once for each of those here (a bad input still gets torch's own message) and is skipped afterwards."""

    def __init__(self, program: nn.Module):
        super().__init__()
        self.program: Any = program
        self._checked: set = set()  # (shape, dtype, device) of inputs that passed torch's check

    def forward(self, obs: torch.Tensor):
        key = (tuple(obs.shape), obs.dtype, obs.device)
        if key in self._checked or not hasattr(self.program, "validate_inputs"):
            return self.program(obs)
        self.program.validate_inputs = True
        try:
            out = self.program(obs)
        finally:
            self.program.validate_inputs = False
        self._checked.add(key)
        return out

    def train(self, mode: bool = True) -> ExportedNetwork:
        return self


def coerce_recipe(env) -> EnvRecipe:
    """The caller's ``env`` (an id or a recipe: their own choice, so no trust check) as a recipe."""
    if isinstance(env, EnvRecipe):
        return env
    if isinstance(env, str) and env:
        return EnvRecipe.for_env_id(env)
    raise UsageError(f"env={env!r}: expected an env id such as 'ALE/Breakout-v5' or an rlviz EnvRecipe.")


def env_facts(recipe: EnvRecipe):
    """(observation_space, action_space, action names) of one env built from ``recipe``."""
    e = make_env(recipe, render_mode=None)
    try:
        spec = action_spec(e.action_space)
        names = action_names_for(e, spec.size) if spec.kind == "discrete" else spec.names()
        return e.observation_space, e.action_space, names
    finally:
        e.close()


def settle_kind(policy: Policy, observation_space, source: str | None = None) -> None:
    """Run one forward on a zero observation so a ``kind="auto"`` policy decides its kind (and A); with
    ``source``, a network that rejects the env's observation shape raises a one-line :class:`EnvError`."""
    shape = getattr(observation_space, "shape", None)
    if not shape:
        return
    try:
        with torch.no_grad():
            policy.forward(policy.to_tensor(np.zeros((1, *shape), dtype=np.float32)))
    except RlvizError:
        raise
    except Exception as exc:
        if source is None:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise EnvError(
            f"{source}: the network rejects the env's observations of shape {tuple(shape)} ({first}); pass the env "
            "(and preprocessing) it was trained on."
        ) from None


def _meta_from(members: dict[str, bytes], source: str) -> dict | None:
    blob = members.get(f"extra/{META_NAME}")
    if blob is None:
        return None
    try:
        meta = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{source}: extra/{META_NAME} is not valid JSON ({exc}).") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{source}: extra/{META_NAME} does not describe an rlviz checkpoint.")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{source} is rlviz checkpoint format {version!r}; this rlviz reads up to {FORMAT_VERSION}. Upgrade rlviz."
        )
    return meta


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


def _network(data: bytes, source: str, device) -> ExportedNetwork:
    try:
        ep = _export_load(data)
        dev = resolve_device(device)
        if dev.type != "cpu":
            ep = torch.export.passes.move_to_device_pass(ep, dev)  # type: ignore[attr-defined]
        module = ExportedNetwork(ep.module(check_guards=False))  # (see ExportedNetwork)
    except RlvizError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{source}: torch.export could not load the program ({first}).") from exc
    for p in module.parameters():
        p.requires_grad_(False)  # gradients are taken w.r.t. the input only
    return module


def _recipe_from_meta(meta: dict, source: str, env, trust: bool) -> EnvRecipe:
    """The env to run: the file's recipe (under the trust rule; ``env`` equal to its id is consent for that
    id), or the caller's ``env`` when it names another env (then nothing of the file's recipe is acted on)."""
    raw = meta["recipe"]
    file_recipe = EnvRecipe.from_dict(raw)  # parsing only: malformed files fail here
    if env is not None and env != file_recipe.env_id:
        return coerce_recipe(env)
    return EnvRecipe.from_dict(raw, source, trusted=trust, consented_env=env)


def _rlviz_meta(meta: dict, source: str, env, trust: bool) -> tuple[EnvRecipe, str, tuple, float]:
    try:
        recipe = _recipe_from_meta(meta, source, env, trust)
        kind, names, gamma = str(meta["kind"]), tuple(str(a) for a in meta["action_names"]), float(meta["gamma"])
        if kind not in KINDS or not names:
            raise ValueError(f"kind {kind!r}, {len(names)} action names")
    except (KeyError, TypeError, ValueError) as exc:  # (UnsafeCheckpointError passes through)
        raise CheckpointError(f"{source}: malformed extra/{META_NAME} ({exc}).") from None
    if env is not None:
        obs_space, space, _ = env_facts(recipe)
        if action_spec(space).size != len(names):
            raise UsageError(f"{source} has {len(names)} actions but env {recipe.env_id!r} has "
                             f"{action_spec(space).size}.")
        saved, got = meta.get("obs_shape"), tuple(getattr(obs_space, "shape", None) or ())
        if isinstance(saved, list) and tuple(saved) != got:
            raise UsageError(
                f"{source} was saved for observations of shape {tuple(saved)} but env {recipe.env_id!r} gives "
                f"{got}; pass the env (and preprocessing) it was trained on, or leave --env out to use the "
                "checkpoint's own."
            )
    return recipe, kind, names, gamma


def load_export(data: bytes, source: str, *, env, trust: bool, device, kind: str,
                trust_recipe: bool | None = None) -> LoadedAgent:
    """A :class:`LoadedAgent` from the bytes of a ``.pt2`` archive (rlviz checkpoint or bare program).
    ``trust``: skip the archive's vetting and the recipe's name checks; ``trust_recipe`` (default ``trust``):
    the recipe's names only (the saver checking its own output)."""
    trust_recipe = trust if trust_recipe is None else trust_recipe
    members = read_export_archive(data, source) if trust else verify_export_archive(data, source)
    meta = _meta_from(members, source)
    module = _network(data, source, device)
    if meta is not None:
        recipe, kind, names, gamma = _rlviz_meta(meta, source, env, trust_recipe)
        space_json = meta.get("action_space")  # absent for Discrete
        try:
            space = space_from_json(space_json)
        except UsageError as exc:
            raise CheckpointError(f"{source}: malformed extra/{META_NAME}: {exc}") from None
        policy = TorchPolicy(module, num_actions=len(names) if space is None else None, kind=kind, device=device,
                             action_space=space, squash=bool(isinstance(space_json, dict) and space_json.get("squash")))
        return LoadedAgent(policy, recipe, names, gamma, policy.kind, dict(meta.get("metadata") or {}),
                           Path(source), "rlviz")
    if env is None:
        raise UsageError(f"{source} is a torch.export program without rlviz metadata; pass env=<env id> (--env).")
    recipe = coerce_recipe(env)
    obs_space, _, names = env_facts(recipe)
    policy = TorchPolicy(module, num_actions=len(names), kind=kind, device=device)
    settle_kind(policy, obs_space, source)
    return LoadedAgent(policy, recipe, tuple(names), 0.99, policy.kind, {}, Path(source), "torch-export")
