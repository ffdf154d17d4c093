"""The code generator of :mod:`rlviz.sources.pt2.graph`: a ``.pt2`` program's serialized node list -> a Python
function ``run(tensors, obs)`` calling the same aten operators with the same arguments.

Every value is a local named here (``v0``, ``v1``...), every constant the file gives (numbers, lists, dtypes,
operators) is passed in by name (``k0``...): nothing of the file is pasted into the source. Operators are resolved
only as ``torch.ops.aten.<op>.<overload>`` (an ``OpOverload``) or the plain ``operator`` functions of shape
arithmetic; anything else raises :class:`Declined` (the caller loads the file with torch's loader instead).
"""

from __future__ import annotations

import keyword
import operator
import re
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["Declined", "compile_graph", "aten_bindings", "dtype_of"]

# torch/_export/serde/schema.py's ScalarType, Layout, MemoryFormat codes (part of the file format)
_DTYPES = {1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64, 6: torch.float16,
           7: torch.float32, 8: torch.float64, 9: torch.complex32, 10: torch.complex64, 11: torch.complex128,
           12: torch.bool, 13: torch.bfloat16}
_LAYOUTS = {7: torch.strided}
_MEMORY_FORMATS = {1: torch.contiguous_format, 2: torch.channels_last, 3: torch.channels_last_3d,
                   4: torch.preserve_format}
_ATEN = re.compile(r"torch\.ops\.aten\.(_?[A-Za-z][A-Za-z0-9_]*)\.([A-Za-z][A-Za-z0-9_]*)")
_OPERATORS = {"add", "sub", "mul", "floordiv", "mod", "neg", "pos", "truediv", "eq", "ne", "lt", "le", "gt", "ge"}
_SKIPPED = "torch.ops.aten._assert_tensor_metadata.default"  # a check with no result (the input check is ours)


class Declined(Exception):
    """The archive holds something this reader does not run: torch's loader takes it."""


def aten_bindings() -> dict:
    """aten operators (OpOverloads, as exported graphs name them) -> the Python binding that dispatches to the same
    operator for the same positional arguments, without the OpOverload's per-call cost."""
    aten, nn_ = torch.ops.aten, torch._C._nn
    return {aten.conv1d.default: torch.conv1d, aten.conv2d.default: torch.conv2d, aten.linear.default: nn_.linear,
            aten.relu.default: torch.relu, aten.tanh.default: torch.tanh, aten.sigmoid.default: torch.sigmoid,
            aten.permute.default: torch.permute, aten.flatten.using_ints: torch.flatten,
            aten.squeeze.dim: torch.squeeze, aten.unsqueeze.default: torch.unsqueeze,
            aten.reshape.default: torch.reshape, aten.add.Tensor: torch.add, aten.sub.Tensor: torch.sub,
            aten.mul.Tensor: torch.mul, aten.div.Tensor: torch.div, aten.cat.default: torch.cat,
            aten.addmm.default: torch.addmm, aten.t.default: torch.t, aten.exp.default: torch.exp,
            aten.softmax.int: torch.softmax, aten.log_softmax.int: torch.log_softmax,
            aten.max_pool2d.default: torch.max_pool2d, aten.layer_norm.default: torch.layer_norm,
            aten.clamp.default: torch.clamp, aten.mean.dim: torch.mean}


def dtype_of(code: Any) -> torch.dtype:
    """A scalar type code of the serialization schema -> the torch dtype."""
    if code not in _DTYPES:
        raise Declined(f"scalar type {code}")
    return _DTYPES[code]


def _target(name: str) -> Any:
    m = _ATEN.fullmatch(name)
    if m:
        packet = getattr(torch.ops.aten, m.group(1), None)
        op = getattr(packet, m.group(2), None) if packet is not None else None
        if isinstance(op, torch._ops.OpOverload):
            return op
    elif name.startswith("_operator.") and name[len("_operator."):] in _OPERATORS:
        return getattr(operator, name[len("_operator."):])
    raise Declined(f"target {name[:80]}")


class _Source:
    """The generated function's text and the objects it refers to (every one passed in by name, none pasted)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # graph value name -> local name
        self.space: dict[str, Any] = {}
        self.lines: list[str] = []

    def local(self, graph_name: str) -> str:
        if graph_name not in self.names:
            self.names[graph_name] = f"v{len(self.names)}"
        return self.names[graph_name]

    def ref(self, graph_name: str) -> str:
        if graph_name not in self.names:
            raise Declined(f"{graph_name} used before it is made")
        return self.names[graph_name]

    def const(self, value: Any) -> str:
        name = f"k{len(self.space)}"
        self.space[name] = value
        return name


def _arg(src: _Source, arg: dict) -> str:
    """Python source for one serialized argument: a local's name, or a constant's."""
    (kind, value), = arg.items()
    if kind in _SCALARS:
        return src.const(_scalar(kind, value))
    if kind[:-1] in _SCALARS and kind.endswith("s"):
        if not isinstance(value, list):
            raise Declined(f"{kind} not a list")
        return src.const([_scalar(kind[:-1], v) for v in value])
    if kind not in _ARGUMENTS:
        raise Declined(f"argument {kind}")
    return _ARGUMENTS[kind](src, value)


def _listed(src: _Source, values: Any, one: Callable[[_Source, Any], str]) -> str:
    if not isinstance(values, list):
        raise Declined("not a list")
    return "[" + ", ".join(one(src, v) for v in values) + "]"


def _code(table: dict, what: str) -> Callable[[_Source, Any], str]:
    def read(src: _Source, value: Any) -> str:
        if value not in table:
            raise Declined(f"{what} {value}")
        return src.const(table[value])
    return read


def _device(src: _Source, value: dict) -> str:
    if value.get("type") != "cpu":
        raise Declined("a device other than the CPU")
    return src.const(torch.device("cpu"))


#: scalar argument kinds -> the Python types their JSON values may have (floats: also "NaN", "Infinity", "-Infinity")
_SCALARS: dict[str, tuple] = {"as_int": (int,), "as_float": (float, int, str), "as_bool": (bool,), "as_string": (str,)}
_FLOAT_WORDS = {"NaN", "Infinity", "-Infinity"}


def _scalar(kind: str, value: Any) -> Any:
    """A scalar argument's value as torch's deserializer makes it (an int-valued float stays a float)."""
    if type(value) not in _SCALARS[kind] or (kind == "as_float" and type(value) is str and value not in _FLOAT_WORDS):
        raise Declined(f"{kind} of type {type(value).__name__}")
    return float(value) if kind == "as_float" else value


def _optional(src: _Source, v: dict) -> str:
    return "None" if "as_none" in v else src.ref(v["as_tensor"]["name"])


def _sym(src: _Source, v: dict) -> str:
    if "as_name" in v:
        return src.ref(v["as_name"])
    if "as_int" in v and type(v["as_int"]) is int:
        return src.const(v["as_int"])
    raise Declined("symbolic int")


#: argument kinds other than scalars -> how each becomes source text
_ARGUMENTS: dict[str, Callable[[_Source, Any], str]] = {
    "as_tensor": lambda src, v: src.ref(v["name"]),
    "as_tensors": lambda src, v: _listed(src, v, lambda s, t: s.ref(t["name"])),
    "as_optional_tensor": _optional,
    "as_optional_tensors": lambda src, v: _listed(src, v, _optional),
    "as_none": lambda src, v: "None",
    "as_sym_int": _sym,
    "as_sym_ints": lambda src, v: _listed(src, v, _sym),
    "as_scalar_type": lambda src, v: src.const(dtype_of(v)),
    "as_layout": _code(_LAYOUTS, "layout"),
    "as_memory_format": _code(_MEMORY_FORMATS, "memory format"),
    "as_device": _device,
}


def compile_graph(nodes: list, user: str, bound: dict[str, str], outputs: list[str], shape: str, attrs: list[str],
             fast: dict) -> Callable:
    """``run(tensors, obs)``: the graph as generated Python (``fast``: OpOverload -> binding for calls with
    positional arguments only; empty: every operator through its OpOverload, as torch's module calls it)."""
    src = _Source()
    order = {attr: i for i, attr in enumerate(attrs)}
    held = [src.local(g) for g in sorted(bound, key=lambda g: order[bound[g]])]  # in the order of `tensors`
    src.lines.append(f"def run(tensors, {src.local(user)}):")
    if held:
        src.lines.append(f"    {', '.join(held)}, = tensors")
    for node in nodes:
        target = node["target"]
        if target == _SKIPPED and not node.get("outputs"):
            continue
        fn = _target(target)
        args, kwargs = _call_args(src, fn, node["inputs"])
        if not kwargs and fn in fast:
            fn = fast[fn]
        call = f"{src.const(fn)}({', '.join([*args, *(f'{k}={v}' for k, v in kwargs)])})"
        src.lines.append(f"    {_assign(src, node['outputs'], fn)} = {call}")
    outs = [src.ref(o) for o in outputs]
    if shape == "leaf":
        src.lines.append(f"    return {outs[0]}")
    else:
        opener, closer = ("(", ")") if shape == "tuple" else ("[", "]")
        src.lines.append(f"    return {opener}{', '.join(outs)}{',' if shape == 'tuple' and len(outs) == 1 else ''}"
                         f"{closer}")
    code = compile("\n".join(src.lines), "<rlviz .pt2 graph>", "exec")
    space = dict(src.space)
    exec(code, space)  # noqa: S102  (source made of generated local names only; the file's values are in `space`)
    return space["run"]


def _call_args(src: _Source, fn: Any, inputs: list) -> tuple[list[str], list[tuple[str, str]]]:
    """Arguments in the operator schema's order, positional or keyword as the file says (torch's rule)."""
    given = {i["name"]: i for i in inputs}
    if len(given) != len(inputs):
        raise Declined("an argument given twice")
    if isinstance(fn, torch._ops.OpOverload):
        order = [a.name for a in fn._schema.arguments]
        if set(given) - set(order):
            raise Declined("an argument the operator does not take")
    else:
        order = [i["name"] for i in inputs]
    args: list[str] = []
    kwargs: list[tuple[str, str]] = []
    for name in order:
        if name not in given:
            continue
        kind, text = given[name].get("kind"), _arg(src, given[name]["arg"])
        if kind == 1:
            args.append(text)
        elif kind == 2 and name.isidentifier() and not keyword.iskeyword(name):
            kwargs.append((name, text))
        else:
            raise Declined(f"argument {name} of kind {kind}")
    return args, kwargs


def _assign(src: _Source, outs: list, fn: Any) -> str:
    """The left-hand side for a node's outputs."""
    if len(outs) == 1:
        (kind, value), = outs[0].items()
        if kind == "as_tensor":
            return src.local(value["name"])
        if kind == "as_sym_int" and "as_name" in value:
            return src.local(value["as_name"])
        if kind == "as_tensors":
            names = [src.local(v["name"]) for v in value]
            return (", ".join(names) + ",") if names else "_"
        if kind == "as_none":
            return "_"
        raise Declined(f"output {kind}")
    if not outs:
        return "_"
    parts = []
    for o in outs:
        (kind, value), = o.items()
        if kind == "as_tensor":
            parts.append(src.local(value["name"]))
        elif kind == "as_none":
            parts.append("_")
        else:
            raise Declined(f"output {kind}")
    return ", ".join(parts) + ","
