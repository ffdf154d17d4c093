"""Loading ``torch.export`` archives (rlviz ``.pt2`` checkpoints and bare programs) as a :class:`LoadedAgent`.

The archive is vetted first (:mod:`rlviz.sources.pt2.safety`): ``torch.export.load`` itself is not safe for untrusted
files. The JSON recipe inside an rlviz checkpoint is read under :mod:`rlviz.envs.trust`'s rule: an env id,
kwargs or wrapper the file names is acted on only if rlviz knows it, the caller passed that env id
themselves, or the caller trusts the file.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...agent.actions import action_spec, space_from_json
from ...agent.obs import ObsAdapter
from ...agent.policy import KINDS, TorchPolicy, resolve_device
from ...envs.recipe import EnvRecipe
from ...errors import CheckpointError, RlvizError, UsageError
from ..files import META_NAME
from ..limits import loads_json
from ..loaded import LoadedAgent, check_forward, coerce_recipe, env_facts, settle_kind
from ..schema import NUMBER, Field, check_fields, check_recipe
from .codegen import aten_bindings
from .graph import read_program, same_output
from .safety import read_export_archive, verify_export_archive

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ExportedNetwork", "load_export"]

FORMAT_NAME = "rlviz-checkpoint"
FORMAT_VERSION = 1


class ExportedNetwork(nn.Module):
    """Holds the module of a loaded ExportedProgram. Exported programs are traced in eval mode and
    refuse ``.train()``/``.eval()``; here those are no-ops, so the holder behaves like any network.

    torch checks every input against the program's shape constraints before each forward (its pre-hook: 45-60 us,
    15-20% of a batch-16 MinAtar forward). The check depends on the input's shape, dtype and device only, so it
    runs once for each of those here (a bad input still gets torch's own message) and is skipped afterwards.

    Afterwards the forward runs the same graph without the program's per-call wrapping (:func:`plain_forward`:
    no module hooks, no pytree of inputs and outputs, the common aten operators called through their Python
    bindings), ~30% less time for a small network's batch of 16; the same kernels, so the same numbers, checked on
    the first input of each shape (a difference, or a graph it does not handle, keeps the program's own call)."""

    def __init__(self, program: nn.Module):
        super().__init__()
        self.program: Any = program
        self._checked: set = set()  # (shape, dtype, device) of inputs that passed torch's check
        self._plain: Any = None  # plain_forward(program), built at the first input: False when it does not apply

    def forward(self, obs: torch.Tensor):
        key = (tuple(obs.shape), obs.dtype, obs.device)
        if key in self._checked:
            return self.program(obs) if self._plain is False else self._plain(obs)
        if not hasattr(self.program, "validate_inputs"):
            return self.program(obs)
        self.program.validate_inputs = True
        try:
            out = self.program(obs)
        finally:
            self.program.validate_inputs = False
        if self._plain is None:
            self._plain = plain_forward(self.program) or False
        if self._plain is not False and not same_output(out, self._plain, obs):
            self._plain = False
        self._checked.add(key)
        return out

    def train(self, mode: bool = True) -> ExportedNetwork:
        return self

    def _apply(self, fn, *args, **kwargs):  # .to(), .float(), ...: the parameters may be new ones
        self._checked, self._plain = set(), None
        return super()._apply(fn, *args, **kwargs)


def plain_forward(program: Any) -> Any:
    """The forward of an unlifted exported program (``ExportedProgram.module()``, one tensor in) as a plain
    function of that tensor: its graph with the default code generation (no pytree of inputs and outputs), the
    input check dropped (:class:`ExportedNetwork` runs torch's own once per input shape), parameters and buffers
    read as flat attributes, common aten operators called through :func:`.pt2_graph.aten_bindings`; the output rebuilt with the
    program's output spec. None when the program is not such a graph."""
    import torch.fx as fx
    from torch.utils import _pytree as pytree

    try:
        in_spec, out_spec = program._in_spec, program._out_spec
        if pytree.tree_unflatten([0], in_spec) != ((0,), {}):
            return None
        graph = fx.Graph()  # (the default code generation)
        graph.output(graph.graph_copy(program.graph, {}))
        fast, assert_meta = aten_bindings(), torch.ops.aten._assert_tensor_metadata.default
        state: dict[str, Any] = {}
        for node in list(graph.nodes):
            if node.op == "get_attr":
                name = f"_{len(state)}"
                state[name] = fx.graph_module._get_attr(program, node.target)
                node.target = name
            elif node.op == "call_function":
                if node.target is assert_meta and not node.users:
                    graph.erase_node(node)
                elif node.target in fast:
                    node.target = fast[node.target]
            elif node.op not in ("placeholder", "output"):
                return None
        module = fx.GraphModule(state, graph)
    except Exception:
        return None
    run = module.forward
    leaves_only = out_spec.num_leaves == out_spec.num_nodes - 1 and out_spec.type is tuple

    def forward(obs: torch.Tensor):
        out = run(obs)
        return tuple(out) if leaves_only else pytree.tree_unflatten(list(out), out_spec)

    forward.module = module  # type: ignore[attr-defined]  # (kept alive with the function)
    return forward


def _meta_from(members: dict[str, bytes], source: str) -> dict | None:
    blob = members.get(f"extra/{META_NAME}")
    if blob is None:
        return None
    meta = loads_json(blob, source, f"extra/{META_NAME}")  # bounded: size and depth (limits.py)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{source}: extra/{META_NAME} does not describe an rlviz checkpoint.")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{source} is rlviz checkpoint format {version!r}; this rlviz reads up to {FORMAT_VERSION}. Upgrade rlviz."
        )
    check_fields(meta, _META_FIELDS, source, f"extra/{META_NAME}", required=("recipe", "kind", "action_names", "gamma"))
    check_recipe(meta["recipe"], source, f"extra/{META_NAME} recipe")
    return meta


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 24


#: The fields of ``extra/rlviz.json`` rlviz acts on (see :mod:`rlviz.sources.pt2.saving`), with their types and ranges.
_META_FIELDS = {
    "kind": Field((str,), 1, 40), "gamma": Field(NUMBER, 1e-9, 1.0), "metadata": Field((dict, type(None))),
    "action_names": Field((list,), 1, 1 << 16, items=lambda a: isinstance(a, (str, int)), items_what="names"),
    "obs_shape": Field((list,), 0, 8, items=_positive_int, items_what="positive whole numbers"),
    "action_space": Field((dict, type(None))), "num_actions": Field((int,), 1, 1 << 16),
}


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


def _network(data: bytes, members: dict[str, bytes], source: str, device) -> nn.Module:
    """The program's network: read from its graph here (:mod:`.pt2_graph`: no torch.export import) on the CPU, or
    by torch.export's loader (another device, or a program that reader declines)."""
    dev = resolve_device(device)
    if dev.type == "cpu":
        try:
            graph = read_program(members)
        except Exception:  # malformed: torch's loader says what is wrong with it
            graph = None
        if graph is not None:
            return graph
    try:
        ep = _export_load(data)
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
    # the env the file (or the caller) names must be the one the program takes: a file whose recipe and program
    # disagree is corrupt (CheckpointError); the caller's --env that does not fit is a usage error. (A trusted
    # file's env is not built at load: building it may import what the file names, which waits for make_env.)
    if env is None and trust:
        return recipe, kind, names, gamma
    obs_space, space, _ = env_facts(recipe)
    error = UsageError if env is not None else CheckpointError
    if action_spec(space).size != len(names):
        raise error(f"{source} has {len(names)} actions but env {recipe.env_id!r} has {action_spec(space).size}.")
    saved, got = meta.get("obs_shape"), tuple(getattr(obs_space, "shape", None) or ())
    adapter = ObsAdapter(obs_space)
    if isinstance(saved, list) and tuple(saved) not in (got, (adapter.size,)):
        fix = ("pass the env (and preprocessing) it was trained on, or leave --env out to use the checkpoint's own"
               if env is not None else "its recipe names another env than its network takes: the file is corrupt")
        raise error(f"{source} was saved for observations of shape {tuple(saved)} but env {recipe.env_id!r} gives "
                    f"{got}; {fix}.")
    return recipe, kind, names, gamma


def load_export(data: bytes, source: str, *, env, trust: bool, device, kind: str,
                trust_recipe: bool | None = None) -> LoadedAgent:
    """A :class:`LoadedAgent` from the bytes of a ``.pt2`` archive (rlviz checkpoint or bare program).
    ``trust``: skip the archive's vetting and the recipe's name checks; ``trust_recipe`` (default ``trust``):
    the recipe's names only (the saver checking its own output)."""
    trust_recipe = trust if trust_recipe is None else trust_recipe
    members = read_export_archive(data, source) if trust else verify_export_archive(data, source)
    meta = _meta_from(members, source)
    module = _network(data, members, source, device)
    if meta is not None:
        recipe, kind, names, gamma = _rlviz_meta(meta, source, env, trust_recipe)
        space_json = meta.get("action_space")  # absent for Discrete
        try:
            space = space_from_json(space_json)
        except UsageError as exc:
            raise CheckpointError(f"{source}: malformed extra/{META_NAME}: {exc}") from None
        policy = TorchPolicy(module, num_actions=len(names) if space is None else None, kind=kind, device=device,
                             action_space=space, squash=bool(isinstance(space_json, dict) and space_json.get("squash")))
        if isinstance(meta.get("obs_shape"), list):
            check_forward(policy, meta["obs_shape"], source)
        return LoadedAgent(policy, recipe, names, gamma, policy.kind, dict(meta.get("metadata") or {}),
                           Path(source), "rlviz")
    if env is None:
        raise UsageError(f"{source} is a torch.export program without rlviz metadata; pass env=<env id> (--env).")
    recipe = coerce_recipe(env)
    obs_space, _, names = env_facts(recipe)
    policy = TorchPolicy(module, num_actions=len(names), kind=kind, device=device)
    settle_kind(policy, obs_space, source)
    return LoadedAgent(policy, recipe, tuple(names), 0.99, policy.kind, {}, Path(source), "torch-export")
