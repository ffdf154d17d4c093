"""The package's stages (rlviz/_layers.py, declared once): no module imports a later stage than its own, at module
level or inside a function, and no chain of imports leads back to where it started."""

from __future__ import annotations

from pathlib import Path

import rlviz
from rlviz import _layers
from rlviz._layers import EXCEPTIONS, LAYERS, cycles, layer_of, module_graph, private_imports, upward_imports

PKG = Path(rlviz.__file__).parent


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "rlviz" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "rlviz"


def test_no_upward_import_at_module_level_or_in_a_function():
    graph = module_graph(PKG)
    up = upward_imports(graph)
    assert [e for e in up if not e.lazy] == [], "upward imports (move the helper down to the stage that needs it)"
    assert [e for e in up if e.lazy] == [], "upward imports inside functions (a lazy import is a dependency too)"
    # each listed exception is still needed (an import it excuses still exists), and says why
    edges = {(e.source, e.target) for v in graph.values() for e in v}
    assert all(pair in edges and reason for pair, reason in EXCEPTIONS.items()), EXCEPTIONS


def test_no_import_cycle_between_modules_or_stages():
    graph = module_graph(PKG)
    assert cycles(graph) == [], "import cycles (lazy imports included)"
    names = [name for name, _ in LAYERS]
    stages: dict[str, list] = {}
    for module, edges in graph.items():
        src = names[layer_of(module)]
        stages.setdefault(src, []).extend(
            _layers.Edge(src, names[layer_of(e.target)], e.lazy, 0) for e in edges if layer_of(e.target) != layer_of(module))
    assert cycles(stages) == []


def test_every_module_has_a_stage_and_every_stage_has_modules():
    modules = set(module_graph(PKG))
    assert {m for m in modules if layer_of(m) == len(LAYERS) - 1} == {"rlviz"}  # only the root is "root"
    for name, prefixes in LAYERS:
        for p in prefixes:
            assert any(m == p or m.startswith(p + ".") for m in modules), f"stage {name}: no module {p}"
    # every subpackage is named in LAYERS (a new folder gets its place in the order)
    packages = {f"rlviz.{p.name}" for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert packages <= {p for _, prefixes in LAYERS for p in prefixes}


def test_stages_name_whole_packages():
    """A folder is one stage: every prefix in LAYERS is a subpackage or a top-level module (base's, the CLI's), never
    a module inside a subpackage (0.5 put attention.summary and attention.plot above evaluate, the rest of attention
    below it)."""
    named = [p for _, prefixes in LAYERS for p in prefixes if p != "rlviz"]
    inside = [p for p in named if p.count(".") != 1]
    assert inside == []
    kinds = {p: (PKG / p.split(".")[1]).is_dir() or (PKG / (p.split(".")[1] + ".py")).is_file() for p in named}
    assert all(kinds.values()), kinds
    assert {p: layer_of(p + ".x") for p in named if (PKG / p.split(".")[1]).is_dir()} == {
        p: layer_of(p) for p in named if (PKG / p.split(".")[1]).is_dir()}  # its modules share its stage


def test_the_checker_finds_upward_imports_lazy_ones_and_cycles(tmp_path):
    pkg = _tree(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "media/__init__.py": "",
        "media/video.py": "from ..errors import X\n\ndef f():\n    from ..draw.compose import C\n",
        "draw/__init__.py": "",
        "draw/compose.py": "from typing import TYPE_CHECKING\nfrom ..media import video\n"
                           "if TYPE_CHECKING:\n    from ..jobs import render\n",
        "jobs/__init__.py": "from .render import render\n",
        "jobs/render.py": "import rlviz.draw.compose\nfrom ..media.video import f\n",
        "evaluate/__init__.py": "",
        "evaluate/rollout.py": "from ..analysis.attention import S\n",
        "analysis/__init__.py": "",
        "analysis/attention.py": "from ..evaluate.rollout import R\n",
        "attention/__init__.py": "",
        "attention/tracker.py": "",
    })
    graph = module_graph(pkg)
    up = {(e.source, e.target, e.lazy) for e in upward_imports(graph, exceptions={})}
    assert up == {("rlviz.media.video", "rlviz.draw.compose", True),  # lazy, and upward: media is below draw
                  ("rlviz.evaluate.rollout", "rlviz.analysis.attention", False)}  # analysis is above evaluate
    assert cycles(graph) == [["rlviz.analysis.attention", "rlviz.evaluate.rollout"],
                             ["rlviz.draw.compose", "rlviz.media.video"]]
    assert cycles(graph, lazy=False) == [["rlviz.analysis.attention", "rlviz.evaluate.rollout"]]
    # TYPE_CHECKING imports never run: no edge; `import rlviz.draw.compose` is one
    assert {e.target for e in graph["rlviz.draw.compose"]} == {"rlviz.media.video"}
    assert {e.target for e in graph["rlviz.jobs.render"]} == {"rlviz.draw.compose", "rlviz.media.video"}
    assert layer_of("rlviz.attention.tracker") < layer_of("rlviz.evaluate.rollout") < layer_of("rlviz.analysis.attention")


def test_no_private_name_is_imported_from_another_package():
    assert private_imports(PKG) == [], "make the name public in its module (and its __all__), or move it"


def test_the_private_import_checker_finds_them_lazy_ones_too(tmp_path):
    pkg = _tree(tmp_path, {
        "__init__.py": "",
        "_lazy.py": "",
        "errors.py": "from ._lazy import _f\n",  # (a top-level private module: the package's own)
        "evaluate/__init__.py": "",
        "evaluate/stats.py": "def _f(): pass\n",
        "evaluate/heatmap.py": "from .stats import _f\n",  # the same package: fine
        "jobs/__init__.py": "",
        "jobs/compare.py": "from ..evaluate.stats import _f, __all__\n\ndef g():\n    from rlviz.evaluate import _x\n",
    })
    assert private_imports(pkg) == ["rlviz.jobs.compare:1 <- rlviz.evaluate.stats._f",
                                    "rlviz.jobs.compare:4 <- rlviz.evaluate._x"]
