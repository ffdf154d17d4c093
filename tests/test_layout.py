"""The tree reads like the pipeline: stage subpackages with no import cycles, no upward imports, each importable
alone, the 0.3 module paths still working (with a DeprecationWarning) until 0.5, and the 0.1 and 0.2 ones gone."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import rlviz
from rlviz._deprecated import MOVED_0_4, MOVED_0_5
from rlviz._layers import module_graph

PKG = Path(rlviz.__file__).parent
STAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())


def _graph() -> dict[str, set[str]]:
    """Every module -> the rlviz modules it imports, at module level or inside functions (rlviz/_layers.py reads them)."""
    return {m: {e.target for e in edges} for m, edges in module_graph(PKG).items() if m != "rlviz.__main__"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes, or None (iterative DFS)."""
    state: dict[str, int] = {}
    for root in graph:
        if state.get(root):
            continue
        stack = [(root, iter(sorted(graph.get(root, ()))))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def test_no_module_imports_the_package_root_or_forms_a_cycle():
    graph = _graph()
    upward = sorted(m for m, deps in graph.items() if "rlviz" in deps and m != "rlviz._deprecated")
    assert upward == [], f"modules importing the package root (import the defining module instead): {upward}"
    graph = {m: deps - {"rlviz"} for m, deps in graph.items() if m != "rlviz"}
    # a package's __init__ re-exports its own modules: that is not a cycle between stages
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


def test_stages_form_a_pipeline_without_cycles():
    # the stages as rlviz/_layers.py declares them (tests/test_layers.py: no upward import, no cycle)
    from rlviz._layers import LAYERS, layer_of

    def stage(module: str) -> str:
        return LAYERS[layer_of(module)][0]

    stage_graph: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        if module == "rlviz":
            continue
        stage_graph.setdefault(stage(module), set()).update(stage(d) for d in deps if stage(d) != stage(module))
    assert _cycle(stage_graph) is None, f"stage cycle: {' -> '.join(_cycle(stage_graph))}"
    leaves = {"base": set(), "media": {"base"}, "episode": {"base"}}
    for name, allowed in leaves.items():
        assert stage_graph.get(name, set()) <= allowed, f"{name} imports {stage_graph[name] - allowed}"
    # the policy contract comes first and knows no file format; the sources (checkpoint files, SB3, rl-zoo3,
    # CleanRL, the Hub) build that contract from what they read, and everything after them takes a Policy
    assert stage_graph["agent"] <= {"base", "episode"}, stage_graph["agent"]
    assert "agent" in stage_graph["sources"] and "envs" in stage_graph["sources"]
    assert not stage_graph["sources"] & {"record", "explain", "draw", "evaluate", "report", "sinks", "jobs"}
    # (explore finds a timeline run's checkpoints again by the timeline's own discovery, sources.run_folders)
    # (the JAX engine builds its LoadedAgent, sources' record of a loaded agent, for the jobs)
    assert {s for s, deps in stage_graph.items() if "sources" in deps} <= {"jobs", "integrations", "cli", "training",
                                                                          "explore", "jax"}


def test_the_sources_are_one_module_per_source_and_the_agent_has_no_loader():
    sources = {str(p.relative_to(PKG / "sources").with_suffix("")) for p in (PKG / "sources").rglob("*.py")}
    sources = {s.removesuffix("/__init__") for s in sources} - {"__init__"}
    assert {"pt2/exported", "pt2/safety", "pt2/saving", "files", "weights", "stable_baselines3/zips",
            "stable_baselines3/vecnormalize", "stable_baselines3/zoo", "cleanrl/scripts", "huggingface/hub",
            "checkpoint", "loaded"} <= sources
    # one package per source family, each holding only its own readers
    families = {p.name for p in (PKG / "sources").iterdir() if (p / "__init__.py").exists()}
    assert families == {"pt2", "stable_baselines3", "cleanrl", "huggingface"}, families
    modules = {p.stem for p in (PKG / "sources").rglob("*.py")} - {"__init__"}
    assert not {p.stem for p in (PKG / "agent").glob("*.py")} & modules
    # one dispatch: only checkpoint.py (load_agent) calls the per-format loaders' entry points
    callers = {p.stem for p in PKG.rglob("*.py") if "detect_format(" in p.read_text() and p.stem != "files"}
    assert callers == {"checkpoint", "run_folders"}, callers  # run_folders: a step read from the file


def test_each_stage_imports_alone_in_a_fresh_interpreter():
    code = "import importlib, sys; importlib.import_module(sys.argv[1]); print('torch' in sys.modules)"
    procs = {s: subprocess.Popen([sys.executable, "-c", code, f"rlviz.{s}"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for s in STAGES}
    results = {s: p.communicate(timeout=120) + (p.returncode,) for s, p in procs.items()}
    failed = {s: err.strip().splitlines()[-1:] for s, (out, err, rc) in results.items() if rc != 0}
    assert failed == {}
    # the media and episode stages (and the CLI's argument checks) do not pay for torch
    for light in ("media", "episode"):
        assert results[light][0].strip() == "False", f"rlviz.{light} imported torch"


def test_the_cli_parses_and_validates_without_importing_torch():
    code = ("import sys; from rlviz.cli import main\n"
            "try:\n    main(['render', 'x.pt2', '--episodes', '0'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("old", sorted(MOVED_0_4) + sorted(MOVED_0_5))
def test_release_0_4_and_0_5_module_paths_still_import_with_a_deprecation_warning(old):
    target = {**MOVED_0_4, **MOVED_0_5}[old]
    gone = "0.6" if old in MOVED_0_4 else "0.7"
    sys.modules.pop(old, None)
    parent, _, child = old.rpartition(".")
    before = getattr(sys.modules.get(parent), child, None)  # (a name of the package the old module shadows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert any(issubclass(w.category, DeprecationWarning) and target in str(w.message) and f"goes away in rlviz {gone}" in str(w.message)
               for w in caught)
    new = importlib.import_module(target)
    assert module.__all__ == list(getattr(new, "__all__", module.__all__))
    for name in getattr(new, "__all__", []):
        assert getattr(module, name) is getattr(new, name)
    sys.modules.pop(old, None)
    if getattr(sys.modules.get(parent), child, None) is module:  # unbound from its parent: what it was before
        if before is None or before is module:
            delattr(sys.modules[parent], child)  # (rlviz.timeline: the job function again, on first use)
        else:
            setattr(sys.modules[parent], child, before)  # (rlviz.evaluate.rollouts.rollout: the function)
    assert callable(module) or not callable(before)  # an old path that shadows a function stays callable as it


@pytest.mark.parametrize("old", ["rlviz.checkpoint", "rlviz.compose", "rlviz.render", "rlviz._atomic",
                                 "rlviz.agent.sb3", "rlviz.agent.zoo", "rlviz.agent.exported",
                                 # 0.3's, kept until 0.5 (removed in 0.6)
                                 "rlviz.timeline.plot", "rlviz.timeline.job", "rlviz.evaluate.attention",
                                 "rlviz.explain.attention"])
def test_release_0_1_to_0_3_module_paths_are_gone_as_the_changelogs_promised(old):
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert callable(rlviz.render)  # (rlviz.render, 0.1's module path, is the job function alone now)


def test_release_0_2_agent_names_are_gone():
    import rlviz.agent

    for name in ("load_agent", "load_checkpoint", "save_checkpoint", "LoadedAgent", "to_policy", "cleanrl_policy"):
        with pytest.raises(AttributeError, match=name):
            getattr(rlviz.agent, name)


def test_public_names_resolve():
    for name in rlviz.__all__:
        assert getattr(rlviz, name) is not None
    with pytest.raises(AttributeError):
        rlviz.no_such_name  # noqa: B018


def test_the_job_functions_are_never_shadowed_by_their_modules():
    """``rlviz.compare`` / ``rlviz.jobs.compare`` are the job functions even after ``rlviz.jobs.compare`` (the
    submodule of the same name) was imported: a lazily bound name would be replaced by the submodule. (0.1's
    ``rlviz.render`` module path is a callable alias module: callable is what users rely on.)"""
    import importlib

    import rlviz

    importlib.import_module("rlviz.jobs.compare")
    importlib.import_module("rlviz.jobs.render")
    from rlviz import compare, render
    from rlviz.jobs import compare as jobs_compare
    from rlviz.jobs import render as jobs_render

    for job in (compare, render, jobs_compare, jobs_render, rlviz.compare, rlviz.render):
        assert callable(job), job


@pytest.mark.parametrize("package", ["rlviz", "rlviz.agent", "rlviz.explain", "rlviz.sources", "rlviz.training"])
def test_each_public_surface_is_listed_once_and_the_type_checkers_view_matches_it(package):
    """``_EXPORTS`` (name -> defining module) is the one list: ``__all__`` is made from it, and the names a type
    checker sees (the ``if TYPE_CHECKING:`` imports, ``X as X``) are exactly those, from those modules."""
    import ast

    module = importlib.import_module(package)
    exports = module._EXPORTS
    assert module.__all__ == [*exports] + (["__version__"] if package == "rlviz" else [])
    for name in exports:
        assert getattr(module, name) is not None
    tree = ast.parse(Path(module.__file__).read_text())
    blocks = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    if package == "rlviz.training":  # (a package of a job, its four names resolved on use: no block)
        assert blocks == []
        return
    seen = {}
    for node in blocks[0].body:
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: re-export it as itself (X as X)"
            seen[alias.name] = "." * (node.level - 1) + (node.module or "")
    assert set(seen) == set(exports)
    for name, where in seen.items():
        assert exports[name].lstrip(".") == where.lstrip("."), (name, where, exports[name])



def test_every_recorder_is_importable_from_rlviz_record_and_record_files_are_grouped():
    """Every ``Record*`` class of rlviz/record/ (found in the source, not listed here) is a name of ``rlviz.record``,
    the same object; the multi-agent modules live in record/agents/, none at the top by an ``agents_`` prefix."""
    import ast

    import rlviz.record

    found = {}
    for path in sorted((PKG / "record").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Record") and node.name.endswith(("Episode", "Game")):
                found[node.name] = path.relative_to(PKG).with_suffix("").as_posix().replace("/", ".")
    assert set(found) == {"RecordEpisode", "RecordVectorEpisode", "RecordParallelEpisode", "RecordAECEpisode",
                          "RecordSuperSuitGame"}, found
    for name, module in found.items():
        assert name in rlviz.record.__all__
        assert getattr(rlviz.record, name) is getattr(importlib.import_module(f"rlviz.{module}"), name)
    assert sorted(p.name for p in (PKG / "record").glob("agents_*.py")) == []
    assert {p.stem for p in (PKG / "record" / "agents").glob("*.py")} >= {"pettingzoo", "supersuit", "recording",
                                                                         "video", "track", "draw", "draw_worker"}
