"""A job's module holds that job only (#55 item 5): the parts render, compare, timeline and the explorer share
(rollouts, episode selection, videos, a PettingZoo run's episodes) live in the job skeleton's stage modules
(rlviz/jobs/rollouts.py, videos.py, agents_episodes.py, stages.py, skeleton.py), and no module imports a helper
from another job's module: only the job's entry point, its outputs and its config type."""

from __future__ import annotations

import ast
from pathlib import Path

import rlviz

PKG = Path(rlviz.__file__).parent
#: The jobs' own modules -> the job they belong to.
JOB_MODULES = {"rlviz.jobs.render": "render", "rlviz.jobs.render_agents": "render",
               "rlviz.jobs.compare": "compare", "rlviz.jobs.compare_agents": "compare"}
#: What another module may import from a job's module: the entry function, its outputs, its config.
ENTRY_NAMES = {"render", "compare", "RenderOutputs", "CompareOutputs", "RenderConfig", "CompareConfig"}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> list[tuple[str, str, int]]:
    """(module imported from, name, line) of every import in ``path`` (relative ones resolved; inside functions
    too: a lazy import is a dependency as well)."""
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found += [(source, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "*module*", node.lineno) for a in node.names]
    return found


def job_helper_imports(root: Path) -> list[str]:
    """Imports of anything but a job's entry names from another job's module, under the package at ``root``."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        me = _module_name(path, root)
        for source, name, line in _imports(path, root):
            job = JOB_MODULES.get(source)
            if job is None and f"{source}.{name}" in JOB_MODULES and name not in ENTRY_NAMES:
                # `from rlviz.jobs import render_agents`: the module whole (`from rlviz.jobs import render` is the
                # package's attribute, the function)
                job, name = JOB_MODULES[f"{source}.{name}"], "*module*"
            elif name == "*module*" and source in JOB_MODULES:  # `import rlviz.jobs.compare_agents`
                job = JOB_MODULES[source]
            if job is None or JOB_MODULES.get(me) == job:
                continue
            if name not in ENTRY_NAMES:
                bad.append(f"{me}:{line} imports {name} from {source} (the {job} job's module)")
    return bad


def test_no_module_imports_a_helper_from_another_jobs_module():
    assert job_helper_imports(PKG) == []


def test_render_exports_only_the_render_job():
    """jobs/render.py exports nothing that compare, timeline or training import: its ``__all__`` is the job."""
    import importlib

    render_module = importlib.import_module("rlviz.jobs.render")
    assert set(render_module.__all__) <= ENTRY_NAMES | {"heatmap_note"}
    users = [p for d in ("jobs", "training", "explore", "disagree") for p in (PKG / d).rglob("*.py")]
    imported = {name for p in users if _module_name(p, PKG) not in JOB_MODULES
                for source, name, _ in _imports(p, PKG) if source == "rlviz.jobs.render"}
    assert imported <= ENTRY_NAMES


def test_the_check_finds_a_helper_imported_from_a_job_module(tmp_path):
    """The checker itself: the old layout (compare importing render's helpers; training's relative import; a
    lazy import in a function; the module imported whole) is found; the job's own modules and entry names pass."""
    root = tmp_path / "rlviz"
    for name, text in {
        "__init__.py": "from .jobs import render\n",
        "jobs/__init__.py": "from .compare import compare\nfrom .render import render\n",
        "jobs/render.py": "from .render_agents import render_agents_into\n",
        "jobs/render_agents.py": "",
        "jobs/compare.py": "from .render import record_videos, run_rollouts, select_episodes\n",
        "jobs/compare_agents.py": "from .render_agents import _video\n",
        "training/__init__.py": "",
        "training/evaluate.py": "from ..jobs.render import import_now\nfrom ..jobs.compare import compare\n",
        "explore/replay.py": "def f():\n    from rlviz.jobs import render_agents\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    bad = job_helper_imports(root)
    assert [b.split(" imports ")[0] for b in bad] == ["rlviz.explore.replay:2", "rlviz.jobs.compare:1",
                                                      "rlviz.jobs.compare:1", "rlviz.jobs.compare:1",
                                                      "rlviz.jobs.compare_agents:1", "rlviz.training.evaluate:1"]
