"""Vet a ``torch.export`` archive (.pt2) before :func:`torch.export.load` sees it.

``torch.export.load`` is documented as unsafe for untrusted files ("uses pickle under the hood"),
and reading torch 2.13's loader (``torch/export/pt2_archive/_package.py``,
``torch/_export/serde/serialize.py``, ``torch/export/_unlift.py``) shows these ways a crafted
archive runs code:

1. weights/constants whose payload config says ``use_pickle`` -> ``torch.load(weights_only=False)``;
   ``opaque_obj_*`` constants -> ``pickle.loads``; ``custom_obj_*`` -> TorchScript unpickler;
   legacy ``data/weights/<model>.pt`` / ``data/constants/<model>.pt`` files and the sample
   inputs go through ``deserialize_torch_artifact``, which retries ``weights_only=False`` when the
   safe load fails;
2. every symbolic-shape expression string (``expr_str``) goes through ``sympy.sympify``, i.e. ``eval``;
3. node targets are resolved by ``getattr`` chains from ``torch``/``operator``/``math``, and any
   callable is accepted (``"torch.os.system"`` resolves to ``os.system``, called on forward);
4. ``guards_code`` strings are ``exec``-ed by ``ExportedProgram.module()`` (rlviz calls ``module(check_guards=False)``,
   which does not read them: :class:`rlviz.sources.pt2.exported.ExportedNetwork`; they are refused here all the same);
5. pytree specs (``in_spec``/``out_spec``) may name a module to import (defaultdict factories, enums).

:func:`verify_export_archive` therefore accepts only what rlviz's own saver writes: the member
names of a plain CPU export, raw (unpickled) tensor payloads, sample inputs that load with
``weights_only=True``, ``aten`` operators (and the plain ``operator`` functions used for symbolic
sizes), sympy expressions made of an allowlist of names, no guards code, no custom objects and
pytree specs of tuples/lists/dicts. Anything else raises :class:`UnsafeCheckpointError`; the caller
may opt in with ``trust=True``. The archive is read with the same reader torch uses
(``torch._C.PyTorchFileReader``) from the same bytes that are then loaded, so what is vetted is
what is loaded: by :mod:`rlviz.sources.pt2.graph` (which evaluates no expression, unpickles nothing and
resolves only aten operators and shape arithmetic), or by torch's loader for what that reader declines.
"""

from __future__ import annotations

import io
import re
import tokenize

import torch

from ...errors import CheckpointError, UnsafeCheckpointError
from ..files import quiet_torch_load, require_safe_torch_load
from ..limits import check_zip_bytes, loads_json

__all__ = ["verify_export_archive", "read_export_archive"]

_STATIC_MEMBERS = {"archive_format", "archive_version", "byteorder", ".data/version", ".data/serialization_id"}
_MEMBER_PATTERNS = [
    re.compile(r"models/model\.json"),
    re.compile(r"data/weights/model_weights_config\.json"),
    re.compile(r"data/weights/weight_\d+"),
    re.compile(r"data/constants/model_constants_config\.json"),
    re.compile(r"data/constants/tensor_\d+"),
    re.compile(r"data/sample_inputs/model\.pt"),
    re.compile(r"extra/[A-Za-z0-9_.\-]+"),
]
_TOP_KEYS = {"graph_module", "opset_version", "range_constraints", "schema_version", "verifiers", "torch_version",
             "guards_code"}
# Names an expression may use: sympy classes/functions torch's shape printer emits, and their assumptions.
_EXPR_NAMES = {
    "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Mod", "Max", "Min", "Abs", "FloorDiv", "CeilDiv",
    "CleanDiv", "IntTrueDiv", "FloatTrueDiv", "TruncToInt", "FloorToInt", "CeilToInt", "ToFloat", "PythonMod",
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "true", "false", "True", "False", "oo",
    "positive", "negative", "nonnegative", "nonpositive", "integer", "real", "finite", "zero", "nonzero",
}
_EXPR_OPS = {"(", ")", ",", "=", "+", "-", "*", "/", "//", "%", "<", ">", "<=", ">=", "==", "!="}
_SYMBOL_NAME = re.compile(r"[a-z]\d{1,9}")
_ATEN_TARGET = re.compile(r"torch\.ops\.aten\.(_?[A-Za-z][A-Za-z0-9_]*)\.([A-Za-z][A-Za-z0-9_]*)")
_DENIED_ATEN = {"from_file", "_print"}  # the aten ops that touch files or stdout
_OPERATOR_TARGETS = {"getitem", "eq", "ne", "le", "ge", "lt", "gt", "neg", "pos", "mul", "add", "sub", "floordiv",
                     "mod", "pow", "truediv", "and_", "or_"}
_SYM_TARGETS = {"torch.sym_not", "torch.sym_int", "torch.sym_float", "torch.sym_ite", "torch.sym_max",
                "torch.sym_min", "torch.sym_sqrt", "math.trunc"}
_PYTREE_TYPES = {None, "builtins.tuple", "builtins.list", "builtins.dict"}
_BAD_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")


class _Unsafe(Exception):
    pass


def read_export_archive(data: bytes, source: str) -> dict[str, bytes]:
    """All members of a .pt2 archive as {name relative to the archive root: bytes}, read with torch's reader."""
    check_zip_bytes(data, source)  # declared member sizes first: torch's reader inflates what they declare
    try:
        reader = torch._C.PyTorchFileReader(io.BytesIO(data))
        return {name: bytes(reader.get_record(name)) for name in reader.get_all_records()}
    except Exception as exc:  # torch raises RuntimeError with a C++ trace for any zip problem
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{source}: truncated or corrupt torch.export archive ({first}).") from exc


def verify_export_archive(data: bytes, source: str) -> dict[str, bytes]:
    """Raise :class:`UnsafeCheckpointError` unless the archive is one rlviz's saver could have written.

    Returns the members (as :func:`read_export_archive`). Corrupt archives raise :class:`CheckpointError`.
    """
    members = read_export_archive(data, source)
    require_safe_torch_load(source)  # its sample inputs are read with torch.load(weights_only=True)
    try:
        _check_members(members)
        _check_payload_config(members, "data/weights/model_weights_config.json", "weight_")
        _check_payload_config(members, "data/constants/model_constants_config.json", "tensor_")
        _check_sample_inputs(members["data/sample_inputs/model.pt"])
        _check_program(_json(members, "models/model.json"))
    except _Unsafe as exc:
        raise UnsafeCheckpointError(
            f"{source}: refusing to load this torch.export program: {exc}. Loading it would let the file run "
            "code (torch.export.load unpickles payloads, evals shape expressions and resolves operators by "
            "name), and rlviz's saver never writes this. Load it only if you trust where it came from: "
            "trust=True (CLI: --trust-checkpoint)."
        ) from None
    except CheckpointError as exc:
        raise CheckpointError(f"{source}: corrupt torch.export archive: {exc}.") from None
    except (AttributeError, TypeError, KeyError, ValueError, RecursionError) as exc:  # JSON of unexpected types:
        raise CheckpointError(  # what cannot be vetted is refused
            f"{source}: corrupt torch.export archive: a JSON member has fields of unexpected types "
            f"({type(exc).__name__}: {str(exc)[:120]}); expected a program written by torch.export.save.") from None
    return members


def _json(members: dict[str, bytes], name: str):
    try:
        return loads_json(members[name], "the archive", name)
    except CheckpointError as exc:
        raise CheckpointError(str(exc).removeprefix("the archive: ").rstrip(".")) from None


def _check_members(members: dict[str, bytes]) -> None:
    for name in members:
        if name not in _STATIC_MEMBERS and not any(p.fullmatch(name) for p in _MEMBER_PATTERNS):
            raise _Unsafe(f"it contains {name!r}, which a plain exported program does not")
    for need in ("archive_format", "models/model.json", "data/weights/model_weights_config.json",
                 "data/constants/model_constants_config.json", "data/sample_inputs/model.pt"):
        if need not in members:
            raise CheckpointError(f"the archive has no {need!r}; it is not a complete torch.export program")
    if members["archive_format"] != b"pt2":
        raise CheckpointError(f"archive_format is {members['archive_format'][:20]!r}, expected b'pt2'")


def _check_payload_config(members: dict[str, bytes], name: str, prefix: str) -> None:
    config = _json(members, name)
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise _Unsafe(f"{name} is not a payload table")
    for fqn, meta in config["config"].items():
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise _Unsafe(f"the payload {fqn!r} is stored as a pickle")
        path = meta.get("path_name")
        if not isinstance(path, str) or not re.fullmatch(re.escape(prefix) + r"\d+", path):
            raise _Unsafe(f"the payload {fqn!r} points at {path!r}")
        device = ((meta.get("tensor_meta") or {}).get("device") or {}).get("type")
        if device != "cpu":
            raise CheckpointError(
                f"the tensor {fqn!r} is stored for device {device!r}; rlviz checkpoints keep weights on the CPU. "
                "Re-save it with rlviz.save_checkpoint on the CPU"
            )


def _check_sample_inputs(blob: bytes) -> None:
    if not blob:
        return
    try:
        with quiet_torch_load():
            obj = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise _Unsafe(f"its sample inputs do not load with weights_only=True ({type(exc).__name__})") from None
    if not isinstance(obj, (tuple, dict)):
        raise _Unsafe(f"its sample inputs are a {type(obj).__name__}, not a tuple")


def _check_program(program) -> None:
    if not isinstance(program, dict):
        raise _Unsafe("models/model.json is not an exported program")
    unknown = set(program) - _TOP_KEYS
    if unknown:
        raise _Unsafe(f"the program has unexpected fields {sorted(unknown)}")
    if program.get("guards_code"):
        raise _Unsafe("the program carries guard code, which torch executes")
    if set(program.get("opset_version") or {}) - {"aten"}:
        raise _Unsafe(f"the program needs operator sets {sorted(program['opset_version'])}; only aten is allowed")
    _walk(program)
    sig = (program.get("graph_module") or {}).get("module_call_graph") or []
    for entry in sig:
        s = (entry or {}).get("signature") or {}
        for key in ("in_spec", "out_spec"):
            if key in s:
                _check_treespec(s[key])


def _walk(node) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "as_custom_obj" or (key == "custom_obj_values" and value) or key == "custom_obj":
                raise _Unsafe("the program holds custom (pickled) objects")
            if key == "target" and isinstance(value, str):
                _check_target(value)
            elif key == "as_operator":
                _check_target(value if isinstance(value, str) else repr(value))
            elif key == "expr_str":
                _check_expr(value)
            else:
                _walk(value)
    elif isinstance(node, list):
        for value in node:
            _walk(value)
    elif isinstance(node, str):
        if _BAD_CHARS.search(node):
            raise _Unsafe(f"a string in the program holds control characters: {node[:60]!r}")


def _check_target(target: str) -> None:
    m = _ATEN_TARGET.fullmatch(target)
    if m:
        op, overload = m.groups()
        if op in _DENIED_ATEN:
            raise _Unsafe(f"it calls {target}, which reads files")
        packet = getattr(torch.ops.aten, op, None)
        if packet is None or not isinstance(getattr(packet, overload, None), torch._ops.OpOverload):
            raise _Unsafe(f"it calls {target!r}, which is not an aten operator here")
        return
    if target.startswith("_operator.") and target[len("_operator."):] in _OPERATOR_TARGETS:
        return
    if target in _SYM_TARGETS:
        return
    raise _Unsafe(f"it calls {target[:80]!r}; only aten operators are allowed")


def _check_expr(expr) -> None:
    if not isinstance(expr, str) or len(expr) > 4000:
        raise _Unsafe("a shape expression is not a short string")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expr).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        raise _Unsafe(f"the shape expression {expr[:60]!r} does not parse") from None
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.NAME and (tok.string in _EXPR_NAMES or _SYMBOL_NAME.fullmatch(tok.string)):
            continue
        if tok.type == tokenize.NUMBER and re.fullmatch(r"\d{1,15}(\.\d{1,20})?", tok.string):
            continue
        if tok.type == tokenize.STRING and re.fullmatch(r"'[a-z]\d{1,9}'|\"[a-z]\d{1,9}\"", tok.string):
            continue
        if tok.type == tokenize.OP and tok.string in _EXPR_OPS:
            continue
        raise _Unsafe(f"the shape expression {expr[:60]!r} contains {tok.string[:20]!r}, which sympy would evaluate")


def _check_treespec(spec) -> None:
    try:
        protocol, schema = loads_json(spec, "the archive", "a pytree spec", max_depth=40)
    except (TypeError, ValueError, CheckpointError):
        raise _Unsafe("a pytree spec is not valid JSON of at most 40 levels") from None

    def visit(node, depth=0):
        if depth > 32 or not isinstance(node, dict) or node.get("type") not in _PYTREE_TYPES:
            raise _Unsafe(f"a pytree spec names {str(node.get('type') if isinstance(node, dict) else node)[:60]!r}")
        context = node.get("context")
        if context is not None:
            try:
                ok = isinstance(context, str) and "__enum__" not in context and isinstance(
                    loads_json(context, "the archive", "a pytree context", max_depth=40), (list, type(None))
                )
            except (ValueError, CheckpointError):
                ok = False
            if not ok:
                raise _Unsafe("a pytree spec carries an object context")
        for child in node.get("children_spec") or []:
            visit(child, depth + 1)

    visit(schema)
