"""ARCHITECTURE.md and docs/development.md say what the code is: each claim that can be read off the code is
checked here (the stage table against rlviz/_layers.py, the packages with ``_EXPORTS``, every ``pkg/module.py``
path the map names, every package named in the development guide)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import rlviz
from rlviz._layers import LAYERS

PKG = Path(rlviz.__file__).parent
ROOT = PKG.parent
MAP = (ROOT / "ARCHITECTURE.md").read_text()
DEV = (ROOT / "docs" / "development.md").read_text()
PACKAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())


def _stage_rows() -> list[list[str]]:
    section = MAP.split("## Stages", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| ")]
    return rows[1:]  # (the header)


def test_the_stage_table_is_layers_in_order():
    rows = _stage_rows()
    assert [r[0] for r in rows] == [name for name, _ in LAYERS if name != "root"]
    for row, (_, prefixes) in zip(rows, LAYERS):
        folders = re.findall(r"`([a-z_]+)/`", row[1])
        assert [f"rlviz.{f}" for f in folders] == [p for p in prefixes if (PKG / p.split(".")[1]).is_dir()], row[0]


def test_the_packages_with_exports_are_those_the_map_names():
    sentence = re.search(r"list them once in `_EXPORTS` \(`__all__` built from it\): (.*?) \(`tests/", MAP, re.S)
    assert sentence is not None
    named = set(re.findall(r"`([a-z_]+)`", sentence.group(1))) | ({"rlviz"} if "the root" in sentence.group(1) else set())
    having = {p for p in PACKAGES if "_EXPORTS" in vars(importlib.import_module(f"rlviz.{p}"))} | {"rlviz"}
    assert named == having
    for name in having:
        module = importlib.import_module(name if name == "rlviz" else f"rlviz.{name}")
        exports = module._EXPORTS
        assert set(exports) <= set(module.__all__), name
        for attr in exports:
            assert getattr(module, attr) is not None, (name, attr)


def test_every_path_the_map_names_exists():
    """Each ``pkg/module.py``, ``pkg/module.Name``, ``sub/`` or ``panels_*`` path of the map, from the repository, the
    package, or a subpackage it sits in (the evaluate row names ``rollouts/``)."""
    bases = [ROOT, PKG, *sorted(d for d in PKG.rglob("*") if d.is_dir() and (d / "__init__.py").exists())]
    missing = []
    for path in sorted(set(re.findall(r"`((?:[a-z_0-9]+/)+[a-z_0-9]*(?:\.py)?)", MAP))):
        stem = path.removesuffix(".py").rstrip("/")
        if not any(list(base.glob(stem + "*")) for base in bases):
            missing.append(path)
    assert missing == []


def test_the_development_guide_names_every_package_and_no_removed_path():
    first = DEV.split("\n- Stages", 1)[0]
    assert [p for p in PACKAGES if f"`{p}`" not in first] == []
    assert "until 0.4" not in DEV and "until 0.5" not in DEV


def test_one_registry_per_attribution_method_carrying_its_memory_variant():
    """``explain.attribution.ATTRIBUTIONS`` is the registry: the CLI's names (``choices.SALIENCY_METHODS``), the memory
    saliency classes (``explain.memory.MEMORY_ATTRIBUTIONS``) and attention's quantities are read from its methods."""
    from rlviz.attention.maps import ATTRIBUTION
    from rlviz.choices import SALIENCY_METHODS
    from rlviz.explain.attribution import ATTRIBUTIONS
    from rlviz.explain.memory import MEMORY_ATTRIBUTIONS, MemorySaliency, memory_method

    assert tuple(ATTRIBUTIONS) == SALIENCY_METHODS == tuple(MEMORY_ATTRIBUTIONS) == tuple(ATTRIBUTION)
    assert {n: MEMORY_ATTRIBUTIONS[n].__name__ for n in ATTRIBUTIONS} == {n: c.memory for n, c in ATTRIBUTIONS.items()}
    assert {n: c.memory for n, c in ATTRIBUTIONS.items()} == {"gradient": "MemoryGradient", "smoothgrad": "MemoryGradient",
                                                             "perturbation": "MemoryPerturbation"}
    assert all(issubclass(memory_method(n), MemorySaliency) for n in ATTRIBUTIONS)


def test_a_rollout_plan_is_made_from_a_config_in_one_place():
    """``RolloutPlan.for_config``: the fields render's rollout always passed, field for field; its shards, compare's
    disagreement rollouts and explore's one-episode replays override only what is theirs, and none of the four
    builds a plan from a config's fields itself."""
    from rlviz.config import RenderConfig
    from rlviz.evaluate.rollouts.plan import RolloutPlan

    config = RenderConfig(checkpoint="x.pt2", episodes=5, seed=3, num_envs=8, greedy=True, fail_on="termination",
                          heatmap=True, objects="pixels")
    assert RolloutPlan.for_config(config, 0.9) == RolloutPlan(5, seed=3, num_envs=5, greedy=True, fail_on="termination",
                                                             gamma=0.9, heatmap=True, objects="pixels",
                                                             progress=config.progress)
    assert RolloutPlan.for_config(RenderConfig(checkpoint="x.pt2", episodes=50, objects="pixels"), 0.99).objects is None
    one = RolloutPlan.for_config(config, 0.9, num_envs=1, indices=(4,), progress=False)
    assert (one.num_envs, one.indices, one.progress, one.episodes) == (1, (4,), False, 5)
    for path in ("jobs/rollouts.py", "jobs/shards.py", "disagree/run.py", "explore/replay.py"):
        text = (PKG / path).read_text()
        assert "RolloutPlan.for_config(" in text and "RolloutPlan(" not in text.replace("RolloutPlan.for_config(", ""), path
