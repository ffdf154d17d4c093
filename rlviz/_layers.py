"""The package's stages in dependency order, declared once, and the import graph they are checked against.

A module may import modules of its own stage or of a stage before it in :data:`LAYERS`; never one after it (an
upward import), and no chain of imports may lead back to where it started (a cycle). Each stage names whole
packages (or, for "base", top-level modules): a module belongs to the stage of the package that holds it (the
longest prefix in :data:`LAYERS` that names it), so a folder is one stage. Checked by ``tests/test_layers.py``; ``scripts/import_graph.py`` prints the counts
for any checkout. Imports inside functions count too (a lazy import is still a dependency); those under
``if TYPE_CHECKING:`` do not (they never run).

Nothing here imports rlviz: it reads the source files with :mod:`ast`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LAYERS", "EXCEPTIONS", "Edge", "layer_of", "module_graph", "upward_imports", "cycles", "private_imports"]

#: (stage, module prefixes), from the bottom up: a stage imports only stages above it in this list.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # what every stage may use: errors, the names users choose from, job options, progress bars, Ctrl-C
    ("base", ("rlviz.errors", "rlviz._version", "rlviz.choices", "rlviz.config", "rlviz.options", "rlviz.progress",
              "rlviz.interrupts", "rlviz.gc_pause", "rlviz._deprecated", "rlviz._layers", "rlviz._lazy")),
    ("media", ("rlviz.media",)),              # H.264 in and out, atomic files
    ("episode", ("rlviz.episode",)),          # what the stages pass about one episode
    ("agent", ("rlviz.agent",)),              # the Policy contract
    ("envs", ("rlviz.envs",)),                # env recipes and wrappers
    ("sources", ("rlviz.sources",)),          # agents from files, objects and the Hub
    ("explain", ("rlviz.explain",)),          # saliency
    ("attention", ("rlviz.attention",)),      # attribution per object, the rollout's per-step hook
    ("evaluate", ("rlviz.evaluate",)),        # rollouts, heatmaps, statistics, diagnostics
    ("analysis", ("rlviz.analysis",)),        # attention over a rollout's episodes
    ("jax", ("rlviz.jax",)),                  # the JAX engine: flax agents, JAX envs, one lax.scan -> RolloutResult
    ("draw", ("rlviz.draw",)),                # the video frame
    ("sinks", ("rlviz.sinks",)),              # where results go
    ("record", ("rlviz.record",)),            # RecordEpisode and the recorded episode's video
    ("report", ("rlviz.report",)),            # the page
    ("disagree", ("rlviz.disagree",)),        # compare --disagreements
    ("jobs", ("rlviz.jobs",)),                # render, compare
    ("jax_loop", ("rlviz.jax_loop",)),        # videos from a JAX training loop's batch (the render job's writer)
    ("training", ("rlviz.training",)),        # the training timeline (a job built on render's)
    ("integrations", ("rlviz.integrations",)),  # training-time hooks (write a timeline while training)
    ("explore", ("rlviz.explore",)),          # rlviz explore: the local web app on a run folder
    ("cli", ("rlviz.cli", "rlviz.__main__")),
    ("root", ("rlviz",)),                     # the package root: lazy names for users
)

#: (importer, imported) -> why an upward import is allowed. Each one is a debt with its reason.
EXCEPTIONS: dict[tuple[str, str], str] = {}


class Edge:
    """One import of ``target`` by ``source``: ``lazy`` (inside a function) or at module level, at ``line``."""

    __slots__ = ("source", "target", "lazy", "line")

    def __init__(self, source: str, target: str, lazy: bool, line: int):
        self.source, self.target, self.lazy, self.line = source, target, lazy, line

    def __repr__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}{' (lazy)' if self.lazy else ''}"


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s stage (its longest matching prefix); -1 for none."""
    best, index = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, index = len(p), i
    return index


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST) -> Iterable[tuple[ast.AST, bool]]:
    """Every import node of ``tree`` with whether it sits inside a function; ``if TYPE_CHECKING:`` bodies skipped."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, lazy = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
            continue
        inside = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.If) and _is_type_checking(node) and child in node.body:
                continue
            stack.append((child, inside))


def _targets(node: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The rlviz modules one import statement loads (``from . import x`` loads module x; ``from .m import f``: m)."""
    found: set[str] = set()
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        subs = {f"{target}.{a.name}" for a in node.names} & modules
        found = subs if subs else {target}
    elif isinstance(node, ast.Import):
        found = {a.name for a in node.names}
    # the nearest module that exists (an import of a name from a package is an import of that package)
    out = set()
    for t in found:
        while t and t not in modules:
            t = t.rpartition(".")[0]
        if t:
            out.add(t)
    return out


def module_graph(package_dir: str | Path) -> dict[str, list[Edge]]:
    """Every module of the package at ``package_dir`` (a folder holding ``__init__.py``) -> its imports of the
    package's own modules (a module's import of itself, and of its own package's ``__init__``, left out)."""
    pkg = Path(package_dir)
    root = pkg.parent
    files = {_module_name(p, root): p for p in sorted(pkg.rglob("*.py"))}
    modules = set(files)
    graph: dict[str, list[Edge]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[tuple[str, bool], Edge] = {}
        for node, lazy in _walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, package, modules):
                if target == name or (name.startswith(target + ".") and files[target].name == "__init__.py"
                                      and target != pkg.name):
                    continue  # itself, or the package it is in (whose __init__ runs first anyway)
                key = (target, lazy)
                if key not in edges and not (not lazy and (target, True) in edges):
                    edges[key] = Edge(name, target, lazy, getattr(node, "lineno", 0))
                if not lazy:
                    edges.pop((target, True), None)
        graph[name] = sorted(edges.values(), key=lambda e: (e.target, e.lazy))
    return graph


def upward_imports(graph: dict[str, list[Edge]], exceptions: dict | None = None) -> list[Edge]:
    """The imports of a later stage by an earlier one (:data:`LAYERS`), less the listed ``exceptions``."""
    allowed = EXCEPTIONS if exceptions is None else exceptions
    return [e for edges in graph.values() for e in edges
            if layer_of(e.target) > layer_of(e.source) and (e.source, e.target) not in allowed]


def cycles(graph: dict[str, list[Edge]], lazy: bool = True) -> list[list[str]]:
    """The strongly connected components of more than one module (each a set of modules importing one another in a
    circle), sorted; ``lazy`` False: module-level imports only. Tarjan's algorithm, iterative."""
    succ = {m: sorted({e.target for e in edges if lazy or not e.lazy}) for m, edges in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on.add(child)
                work.append((child, iter(succ.get(child, ()))))
            elif child in on:
                low[node] = min(low[node], index[child])
    return sorted(out)


def _subpackage(module: str) -> str:
    """``rlviz.evaluate.statistics.stats`` -> ``rlviz.evaluate``; a top-level module (``rlviz.errors``) is its own."""
    return ".".join(module.split(".")[:2])


def private_imports(package_dir: str | Path) -> list[str]:
    """Each ``from M import _name`` (at module level or in a function) whose M lies in another subpackage than the
    importing module: ``"importer:line <- M._name"``. A name another package needs is public in its module (in its
    ``__all__``); the top-level private modules (``rlviz._lazy``, ``rlviz._layers``, ...) are the package's own."""
    pkg = Path(package_dir)
    root = pkg.parent
    found = []
    for path in sorted(pkg.rglob("*.py")):
        name = _module_name(path, root)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, _ in _walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if (not target.startswith(pkg.name + ".") or _subpackage(target) == _subpackage(name)
                    or (target.count(".") == 1 and not (root / target.replace(".", "/")).is_dir())):
                continue  # outside, the same subpackage, or a top-level module (the package's own)
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name}:{node.lineno} <- {target}.{alias.name}")
    return sorted(found)
