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
    """``choices.ATTRIBUTION_METHODS`` is the one registry (name -> class) and the one place the names live: the
    CLI's names (``SALIENCY_METHODS``), the classes (``explain.attribution.ATTRIBUTIONS``) with their ``name``, the
    memory saliency classes (``explain.memory.MEMORY_ATTRIBUTIONS``) and attention's quantities are read from it and
    its methods; no module names a method's class by name or tests for one method's name."""
    from rlviz.attention.maps import ATTRIBUTION
    from rlviz.choices import ATTRIBUTION_METHODS, DEFAULT_SALIENCY_METHOD, SALIENCY_METHODS
    from rlviz.explain.attribution import ATTRIBUTIONS
    from rlviz.explain.memory import MEMORY_ATTRIBUTIONS, MemorySaliency, memory_method

    assert tuple(ATTRIBUTION_METHODS) == tuple(ATTRIBUTIONS) == SALIENCY_METHODS == tuple(MEMORY_ATTRIBUTIONS) \
        == tuple(ATTRIBUTION) == ("gradient", "smoothgrad", "perturbation")
    assert DEFAULT_SALIENCY_METHOD == "gradient"
    for name, cls in ATTRIBUTIONS.items():
        assert (f"{cls.__module__}:{cls.__qualname__}", cls.name) == (ATTRIBUTION_METHODS[name], name)
        assert "name" not in vars(cls) or name == vars(cls)["name"]
    assert {n: MEMORY_ATTRIBUTIONS[n].__name__ for n in ATTRIBUTIONS} == {n: c.memory for n, c in ATTRIBUTIONS.items()}
    assert {n: c.memory for n, c in ATTRIBUTIONS.items()} == {"gradient": "MemoryGradient", "smoothgrad": "MemoryGradient",
                                                             "perturbation": "MemoryPerturbation"}
    assert all(issubclass(memory_method(n), MemorySaliency) and memory_method(n) is MEMORY_ATTRIBUTIONS[n]
               for n in ATTRIBUTIONS)
    named = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        for name in ATTRIBUTION_METHODS:
            for form in (f'name = "{name}"', f'== "{name}"', f"== '{name}'", f'"{name}":', f'= "{name}"'):
                if form in text and path.name != "choices.py":
                    named.append(f"{path.relative_to(ROOT)}: {form}")
    assert named == []


class Doubled:
    """A saliency method of a test's own (made a SaliencyMethod on first use): twice the gradient's maps."""


def test_a_new_attribution_method_is_its_class_and_its_registry_line(monkeypatch):
    """Adding a method: its class (here in this module) and its line in the registry; attribute(), the recorder's
    check, the memory saliency and the one-line error of an unknown name find it from there."""
    import numpy as np
    import torch

    from rlviz.agent.policy import TorchPolicy
    from rlviz.choices import ATTRIBUTION_METHODS
    from rlviz.errors import UsageError
    from rlviz.explain import attribute
    from rlviz.explain.attribution import ATTRIBUTIONS, Gradient, attribution_class
    from rlviz.explain.memory import MemoryGradient, memory_method

    class _Doubled(Gradient):
        @classmethod
        def chunk_maps(cls, *args, **kwargs):
            return 2 * super().chunk_maps(*args, **kwargs)

    monkeypatch.setitem(ATTRIBUTION_METHODS, "doubled", f"{__name__}:Doubled")
    monkeypatch.setitem(globals(), "Doubled", _Doubled)
    torch.manual_seed(0)
    policy = TorchPolicy(torch.nn.Linear(4, 2), device="cpu")
    obs = np.random.default_rng(0).random((3, 4), dtype=np.float32)
    assert attribution_class("doubled") is _Doubled and ATTRIBUTIONS["doubled"].name == "doubled"
    assert list(ATTRIBUTIONS)[-1] == "doubled"
    np.testing.assert_array_equal(attribute(policy, obs, "doubled"), 2 * attribute(policy, obs, "gradient"))
    assert memory_method("doubled") is MemoryGradient
    monkeypatch.delitem(ATTRIBUTION_METHODS, "doubled")
    try:
        attribution_class("doubled")
        raise AssertionError("an unregistered name was found")
    except UsageError as exc:
        assert "'doubled' is not known; use one of 'gradient', 'smoothgrad', 'perturbation'" in str(exc)


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
    for path in ("jobs/rollouts.py", "jobs/shards.py", "disagree/run.py", "jobs/videos.py"):
        text = (PKG / path).read_text()
        assert "RolloutPlan.for_config(" in text and "RolloutPlan(" not in text.replace("RolloutPlan.for_config(", ""), path


def test_one_function_replays_one_episode_into_its_video():
    """``jobs.videos.record_episode``: render's and compare's videos (``record_videos``, a worker's ``VideoTask``)
    and explore's on-demand ones (given the episode's index: rolled out alone, then replayed) all call it; explore
    reaches no rollout, plan or recorder of its own."""
    import ast

    def calls(path: str) -> dict[str, set[str]]:
        """function name -> the names it calls"""
        tree = ast.parse((PKG / path).read_text())
        return {f.name: {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(f)
                         if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}
                for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}

    assert "record_episode" in calls("explore/replay.py")["render"]
    videos = calls("jobs/videos.py")
    assert "record_episode" in videos["record_videos"] and "record_episode" in videos["record_video_task"]
    assert "rollout_alone" in videos["record_episode"]
    explore = (PKG / "explore" / "replay.py").read_text()
    assert [w for w in ("RolloutPlan", "rollout(", "RecordEpisode", "evaluate.rollouts", "jobs.stages", "jax_rollouts")
            if w in explore] == []
