"""The package's import graph against its declared stages (rlviz/_layers.py): upward imports and cycles.

    python scripts/import_graph.py                 # this checkout's rlviz/
    python scripts/import_graph.py OTHER/rlviz     # another tree (e.g. `git archive 04696dd rlviz | tar -x -C /tmp/t`)
    python scripts/import_graph.py --list ...      # and each upward import and cycle
    python scripts/import_graph.py --packages ...  # and the graph between packages: modules, lines, imports

Another tree's modules are named as this checkout names them (0.3's ``rlviz.timeline.*`` as ``rlviz.training.*``,
``rlviz.evaluate.attention`` as ``rlviz.analysis.attention``...: :data:`RENAMED`) before they are put in their stage,
so both trees are held to the same stages. Counts: modules, imports (lazy: inside a function), upward imports
(module level / lazy), cycles (strongly connected sets of modules; also with module-level imports only), and the
cycles between stages.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_layers", HERE / "rlviz" / "_layers.py")
assert _spec and _spec.loader
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)

#: old module path -> this checkout's (longest prefix first)
RENAMED = {
    "rlviz.evaluate.attention_pass": "rlviz.attention.tracker",
    "rlviz.evaluate.attention": "rlviz.analysis.attention",
    "rlviz.attention.summary": "rlviz.analysis.attention",
    "rlviz.attention.plot": "rlviz.analysis.attention_plot",
    "rlviz.explain.attention": "rlviz.attention.maps",
    "rlviz.timeline": "rlviz.training",
}


def renamed(module: str) -> str:
    for old in sorted(RENAMED, key=len, reverse=True):
        if module == old or module.startswith(old + "."):
            return RENAMED[old] + module[len(old):]
    return module


def analyse(package_dir: Path) -> dict:
    raw = layers.module_graph(package_dir)
    graph = {renamed(m): [layers.Edge(renamed(e.source), renamed(e.target), e.lazy, e.line) for e in edges]
             for m, edges in raw.items()}
    up = layers.upward_imports(graph, exceptions={})
    listed = [e for e in up if (e.source, e.target) in layers.EXCEPTIONS]
    stage_graph: dict[str, list] = {}
    names = [name for name, _ in layers.LAYERS]
    for m, edges in graph.items():
        src = names[layers.layer_of(m)]
        for e in edges:
            dst = names[layers.layer_of(e.target)]
            if dst != src:
                stage_graph.setdefault(src, []).append(layers.Edge(src, dst, e.lazy, 0))
    return {
        "modules": len(graph),
        "imports": sum(len(v) for v in graph.values()),
        "lazy": sum(e.lazy for v in graph.values() for e in v),
        "upward": up,
        "listed": listed,
        "cycles": layers.cycles(graph),
        "cycles_top": layers.cycles(graph, lazy=False),
        "stage_cycles": layers.cycles(stage_graph),
    }


def package_graph(package_dir: Path) -> list[str]:
    """One line per package (``rlviz.<name>``, top-level modules as ``rlviz``): its modules and lines, then the
    packages it imports with how many module-to-module imports each (``^`` marks an upward one)."""
    raw = layers.module_graph(package_dir)
    root = package_dir.parent
    def pkg(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2]) if (root.joinpath(*parts[:2])).is_dir() else "rlviz"
    lines: dict[str, int] = {}
    count: dict[str, int] = {}
    for f in package_dir.rglob("*.py"):
        m = layers._module_name(f, root)
        lines[pkg(m)] = lines.get(pkg(m), 0) + len(f.read_text().splitlines())
        count[pkg(m)] = count.get(pkg(m), 0) + 1
    edges: dict[str, dict[str, int]] = {}
    up: set[tuple[str, str]] = set()
    for m, es in raw.items():
        for e in es:
            a, b = pkg(renamed(m)), pkg(renamed(e.target))
            if a != b:
                edges.setdefault(a, {})[b] = edges.get(a, {}).get(b, 0) + 1
                if layers.layer_of(renamed(e.target)) > layers.layer_of(renamed(m)):
                    up.add((a, b))
    out = []
    for p_ in sorted(count, key=lambda p_: layers.layer_of(p_)):
        deps = ", ".join(f"{b.removeprefix('rlviz.')}{'^' if (p_, b) in up else ''} {n}"
                         for b, n in sorted(edges.get(p_, {}).items()))
        out.append(f"  {p_:24s} {count[p_]:3d} modules {lines[p_]:6d} lines -> {deps}")
    out.append(f"  {sum(len(v) for v in edges.values())} package-to-package dependencies, {len(up)} pointing back up")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="*", default=[str(HERE / "rlviz")], help="package folders (default: this rlviz/)")
    ap.add_argument("--list", action="store_true", help="list each upward import and cycle")
    ap.add_argument("--packages", action="store_true",
                    help="the graph between packages (rlviz.<name>): modules, lines, imports of other packages")
    args = ap.parse_args(argv)
    for tree in args.trees:
        r = analyse(Path(tree))
        if args.packages:
            print("\n".join(package_graph(Path(tree))))
        up = r["upward"]
        print(f"{tree}: {r['modules']} modules, {r['imports']} imports ({r['lazy']} lazy); upward imports: "
              f"{len(up)} ({sum(not e.lazy for e in up)} module-level, {sum(e.lazy for e in up)} lazy; "
              f"{len(r['listed'])} of them listed in _layers.EXCEPTIONS); cycles: {len(r['cycles'])} "
              f"({sum(len(c) for c in r['cycles'])} modules; module-level imports only: {len(r['cycles_top'])}); "
              f"cycles between stages: {len(r['stage_cycles'])}")
        if args.list:
            for e in up:
                print(f"  upward: {e.source} [{layers.LAYERS[layers.layer_of(e.source)][0]}] -> {e.target} "
                      f"[{layers.LAYERS[layers.layer_of(e.target)][0]}]{' (lazy)' if e.lazy else ''}")
            for c in r["cycles"]:
                print("  cycle: " + ", ".join(c))
            for c in r["stage_cycles"]:
                print("  stage cycle: " + ", ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
