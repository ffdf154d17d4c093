"""Run a ``.pt2`` archive's program straight from its serialized graph, without ``torch.export``'s loader.

``torch.export.load`` (torch 2.13) imports ``torch._dynamo``, ``torch._inductor``'s C++ builder and sympy before
it reads a byte (~1.5 s of a job's start-up, measured), then builds fake tensors and an unlifted ``GraphModule``
(~0.2 s per file). An rlviz checkpoint's program is a short list of ``aten`` operator calls on one observation
tensor and the file's weights, which this module reads as the JSON and raw tensor bytes the archive holds:

``models/model.json``     ``graph_module.graph.nodes`` (target ``torch.ops.aten.<op>.<overload>``, named inputs
                          with their kind, outputs), ``signature`` (which graph inputs are parameters, buffers,
                          constants, the user's input; which values are returned), the user input's tensor meta
                          (dtype, sizes: whole numbers or a shape symbol with its ``range_constraints``)
``data/weights``, ``data/constants``   ``model_*_config.json`` (per tensor: file, dtype, sizes, strides, offset)
                          and the raw little-endian bytes

:func:`read_program` returns a :class:`GraphNetwork` (an ``nn.Module`` holding those tensors as parameters and
buffers, its forward a Python function generated from the node list: every value a local, every constant passed
in, nothing from the file pasted into the source) or None for anything it does not know: then torch's own
loader runs, so a file it declines loads as before. It declines: another schema major version, pickled payloads,
custom objects, operators outside ``aten`` (and the plain ``operator`` functions of shape arithmetic), symbolic
floats or bools, keyword names Python cannot take, nested or dict outputs, more than one input, a byte order other
than little-endian. ``RLVIZ_PT2_LOADER=torch`` makes torch's loader run always.

Numbers: the graph's operators are called exactly as torch's unlifted module calls them (the same
``OpOverload``, the same arguments in its schema's order), so the results are torch's; the common operators go
through their Python bindings (:func:`aten_bindings`, the same kernels with less per-call cost), and the first
input of each shape is run both ways and compared bit for bit (a difference keeps the ``OpOverload`` calls).
The input check torch runs before each call (dtype, rank, fixed sizes, a symbolic size's range) is done here
once per input shape, dtype and device, with a one-line :class:`ValueError` naming what was expected.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .codegen import Declined, aten_bindings, compile_graph, dtype_of

__all__ = ["GraphNetwork", "ProgramGraph", "read_program", "same_output", "aten_bindings", "SCHEMA_MAJOR", "LOADER_ENV"]

#: The serialization schema's major version this reader knows (torch 2.13 writes 8); others go to torch's loader.
SCHEMA_MAJOR = 8
#: Set to ``torch`` to always load ``.pt2`` programs with ``torch.export``'s loader.
LOADER_ENV = "RLVIZ_PT2_LOADER"

_SYMBOL = re.compile(r"Symbol\('([a-z]\d{1,9})'(?:, [a-z]+=True)*\)")  # a size that is one shape symbol


@dataclass(frozen=True)
class ProgramGraph:
    """What a :class:`GraphNetwork` runs, as read from the archive (JSON values): ``nodes`` (the serialized node
    list), ``user`` (the input's name), ``bound`` (graph input name -> module attribute of a stored tensor),
    ``outputs`` (returned names), ``shape`` ("leaf", "tuple" or "list"), ``meta`` (the input's tensor meta) and
    ``ranges`` (the shape symbols' ranges). Kept so the functions can be generated again (a pickled network)."""

    nodes: list
    user: str
    bound: dict
    outputs: list
    shape: str
    meta: dict
    ranges: dict


class GraphNetwork(nn.Module):
    """A ``.pt2`` program's graph run as a plain function of one tensor (:func:`read_program` builds it).

    forward(obs: tensor shaped like the program's input, e.g. float32 ``[B, *obs_shape]``) -> what the program
    returns (a tensor, or a tuple/list of them). The file's parameters are this module's parameters (``.to()``,
    ``requires_grad_`` and gradients with respect to the input work as for any module); ``train()``/``eval()``
    change nothing (an exported graph is fixed). It pickles (its functions are generated again on loading)."""

    def __init__(self, graph: ProgramGraph, tensors: dict[str, tuple[torch.Tensor, bool]]):
        super().__init__()
        self._names = list(tensors)
        for name, (tensor, is_param) in tensors.items():
            if is_param:
                self.register_parameter(name, nn.Parameter(tensor, requires_grad=False))
            else:
                self.register_buffer(name, tensor)
        self.graph = graph
        self._build()

    def _build(self) -> None:
        g = self.graph
        self._run = compile_graph(g.nodes, g.user, g.bound, g.outputs, g.shape, self._names, aten_bindings())
        self._reference = compile_graph(g.nodes, g.user, g.bound, g.outputs, g.shape, self._names, {})
        self._check = _input_check(g.meta, g.ranges)
        self._checked: set = set()  # (shape, dtype, device) of inputs checked, and run both ways

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_run", "_reference", "_check", "_checked")}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._build()

    def _tensors(self) -> tuple:
        return tuple(getattr(self, n) for n in self._names)

    def forward(self, obs: torch.Tensor) -> Any:
        if _tracing():  # inside torch.export / torch.compile (e.g. a wrapper saved again): the operators, as torch's
            return self._reference(self._tensors(), obs)
        key = (tuple(obs.shape), obs.dtype, obs.device)
        if key in self._checked:
            return self._run(self._tensors(), obs)
        self._check(obs)
        out = self._reference(self._tensors(), obs)
        if self._run is not self._reference and not same_output(out, self._run, self._tensors(), obs):
            self._run = self._reference
        self._checked.add(key)
        return out

    def train(self, mode: bool = True) -> GraphNetwork:
        return self

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> Any:  # .to(), .float(): check the new inputs again
        self._checked = set()
        return super()._apply(fn, *args, **kwargs)


def _tracing() -> bool:
    compiler = torch.compiler
    return bool(getattr(compiler, "is_exporting", lambda: False)() or getattr(compiler, "is_compiling", lambda: False)())


def same_output(out: Any, run: Callable[..., Any], *args: Any) -> bool:
    """Whether ``run(*args)`` (without gradients) gives exactly ``out``: the same structure, tensors equal bit for
    bit (the check before a faster way of running a program replaces the reference one; ExportedNetwork's too)."""
    try:
        with torch.no_grad():
            mine = run(*args)
    except Exception:
        return False
    a, spec_a = torch.utils._pytree.tree_flatten(out)
    b, spec_b = torch.utils._pytree.tree_flatten(mine)
    return spec_a == spec_b and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) else x == y
        for x, y in zip(a, b))


def read_program(members: dict[str, bytes]) -> GraphNetwork | None:
    """The archive's program (``members``: name relative to the archive root -> bytes, as
    :func:`rlviz.sources.pt2.safety.read_export_archive` gives them) as a :class:`GraphNetwork`, or None when it holds
    something this reader does not run (then load it with ``torch.export``). Raises nothing for a well-formed
    archive; a malformed one may raise (KeyError, TypeError, ValueError): the caller falls back to torch's loader,
    which says what is wrong."""
    if os.environ.get(LOADER_ENV, "").strip().lower() == "torch":
        return None
    try:
        return _read(members)
    except Declined:
        return None


def _read(members: dict[str, bytes]) -> GraphNetwork:
    if members.get("byteorder", b"little").strip() != b"little":
        raise Declined("big-endian payloads")
    program = json.loads(members["models/model.json"])
    if (program.get("schema_version") or {}).get("major") != SCHEMA_MAJOR or program.get("guards_code"):
        raise Declined("schema")
    gm = program["graph_module"]
    graph, sig = gm["graph"], gm["signature"]
    if any(graph.get(k) for k in ("custom_obj_values", "sym_float_values", "sym_bool_values")):
        raise Declined("custom objects or symbolic floats/bools")
    _plain_call_spec(gm.get("module_call_graph") or [])
    stored = {**_payloads(members, "data/weights/model_weights_config.json", "data/weights/"),
              **_payloads(members, "data/constants/model_constants_config.json", "data/constants/")}
    tensors: dict[str, tuple[torch.Tensor, bool]] = {}  # module attribute -> (tensor, is a parameter)
    bound: dict[str, str] = {}  # graph input name -> module attribute
    user: list[str] = []
    for spec in sig["input_specs"]:
        (kind, body), = spec.items()
        if kind == "user_input":
            user.append(body["arg"]["as_tensor"]["name"])
            continue
        fqn = {"parameter": "parameter_name", "buffer": "buffer_name",
               "tensor_constant": "tensor_constant_name"}.get(kind)
        if fqn is None or body[fqn] not in stored:
            raise Declined(f"input kind {kind}")
        attr = f"w{len(tensors)}"
        tensors[attr] = (stored[body[fqn]], kind == "parameter")
        bound[body["arg"]["name"]] = attr
    if len(user) != 1:
        raise Declined("not one user input")
    outputs = []
    for spec in sig["output_specs"]:
        (kind, body), = spec.items()
        if kind != "user_output" or "as_tensor" not in body["arg"]:
            raise Declined(f"output kind {kind}")
        outputs.append(body["arg"]["as_tensor"]["name"])
    shape = _out_shape(gm.get("module_call_graph") or [], len(outputs))
    meta = graph["tensor_values"][user[0]]
    network = GraphNetwork(ProgramGraph(graph["nodes"], user[0], bound, outputs, shape, meta,
                                        program.get("range_constraints") or {}), tensors)
    try:  # a graph this reader misreads fails here, on the traced input's shape, and goes to torch's loader
        with torch.no_grad():
            network._reference(network._tensors(), torch.zeros(_traced_shape(meta), dtype=dtype_of(meta["dtype"])))
    except Exception as exc:
        raise Declined(f"the graph does not run here ({type(exc).__name__})") from None
    return network


def _traced_shape(meta: dict) -> list[int]:
    """The user input's shape at tracing (a symbolic size's hint)."""
    return [int(s["as_int"]) if "as_int" in s else int(s["as_expr"]["hint"]["as_int"]) for s in meta["sizes"]]


def _payloads(members: dict[str, bytes], config_name: str, folder: str) -> dict[str, torch.Tensor]:
    """fqn -> tensor of one payload table (raw bytes only; tensors sharing a file share its storage)."""
    if config_name not in members:
        return {}
    config = json.loads(members[config_name])["config"]
    files: dict[str, torch.Tensor] = {}
    out = {}
    for fqn, meta in config.items():
        if meta.get("use_pickle") is not False:
            raise Declined("pickled payload")
        tm = meta["tensor_meta"]
        dtype = dtype_of(tm["dtype"])
        if (tm.get("device") or {}).get("type") != "cpu" or tm.get("layout", 7) != 7:
            raise Declined("a payload not on the CPU, or not strided")
        path = meta["path_name"]
        if path not in files:
            blob = members[folder + path]
            size = torch.empty((), dtype=dtype).element_size()
            if len(blob) % size:
                raise ValueError(f"{path}: {len(blob)} bytes is not a whole number of {dtype} elements")
            files[path] = torch.frombuffer(bytearray(blob), dtype=dtype) if blob else torch.zeros(0, dtype=dtype)
        sizes, strides = [_int(s) for s in tm["sizes"]], [_int(s) for s in tm["strides"]]
        flat = files[path]
        out[fqn] = (flat.as_strided(sizes, strides, _int(tm["storage_offset"])) if flat.numel()
                    else torch.zeros(sizes, dtype=dtype))
    return out


def _int(value: dict) -> int:
    if set(value) != {"as_int"} or not isinstance(value["as_int"], int):
        raise Declined("a symbolic size in a payload")
    return value["as_int"]


def _tree(spec: str) -> Any:
    """A pytree spec string -> "leaf", ("tuple"|"list", [children]) or ("dict", ...): only plain containers."""
    protocol, node = json.loads(spec)
    if protocol != 1:
        raise Declined("pytree protocol")

    def visit(n: dict) -> Any:
        kind = n.get("type")
        if kind is None:
            return "leaf"
        if kind in ("builtins.tuple", "builtins.list"):
            return kind.split(".")[1], [visit(c) for c in n["children_spec"]]
        raise Declined(f"pytree {kind}")
    return visit(node)


def _plain_call_spec(entries: list) -> None:
    """The program is called as ``f(obs)``: its in_spec is ((leaf,), {})."""
    root = next((e for e in entries if e.get("fqn") == ""), None)
    if root is None or not root.get("signature"):
        raise Declined("no call signature")
    protocol, node = json.loads(root["signature"]["in_spec"])
    args, kwargs = (node.get("children_spec") or [None, None]) + [None] * (2 - len(node.get("children_spec") or []))
    if (protocol != 1 or node.get("type") != "builtins.tuple" or args is None or kwargs is None
            or args.get("type") != "builtins.tuple" or [c.get("type") for c in args["children_spec"]] != [None]
            or kwargs.get("type") != "builtins.dict" or kwargs.get("children_spec")):
        raise Declined("not called with one tensor")


def _out_shape(entries: list, count: int) -> Any:
    root = next(e for e in entries if e.get("fqn") == "")
    shape = _tree(root["signature"]["out_spec"])
    if shape == "leaf" and count == 1:
        return shape
    if shape != "leaf" and all(c == "leaf" for c in shape[1]) and len(shape[1]) == count:
        return shape[0]
    raise Declined("nested outputs")


def _input_check(meta: dict, ranges: dict) -> Callable[[torch.Tensor], None]:
    """torch's input check for the one input: dtype, rank, fixed sizes, a symbolic size's range."""
    dtype = dtype_of(meta["dtype"])
    if (meta.get("device") or {}).get("type") != "cpu":
        raise Declined("input not on the CPU")
    dims: list[Any] = []
    for s in meta["sizes"]:
        if "as_int" in s:
            dims.append(int(s["as_int"]))
            continue
        m = _SYMBOL.fullmatch((s.get("as_expr") or {}).get("expr_str", ""))
        if m is None:
            raise Declined("a size expression")
        r = ranges.get(m.group(1)) or {}
        lo, hi = r.get("min_val"), r.get("max_val")
        dims.append((m.group(1), 0 if lo is None else int(lo), None if hi is None else int(hi)))
    shown = "[" + ", ".join(str(d) if isinstance(d, int) else d[0] for d in dims) + "]"

    def check(obs: torch.Tensor) -> None:
        seen: dict[str, int] = {}
        ok = obs.dtype == dtype and obs.device.type == "cpu" and obs.dim() == len(dims)
        for d, n in zip(dims, obs.shape) if ok else ():
            if isinstance(d, int):
                ok = ok and n == d
            else:
                name, lo, hi = d
                ok = ok and n >= lo and (hi is None or n <= hi) and seen.setdefault(name, n) == n
        if not ok:
            raise ValueError(f"the program takes a {dtype} CPU tensor of shape {shown}; got a {obs.dtype} "
                             f"{obs.device.type} tensor of shape {list(obs.shape)}")
    return check
