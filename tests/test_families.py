"""The env families' registry (:mod:`rlviz.envs.families`): one record per family, every id question a lookup.

Held here: no env-id prefix test outside the family records (an AST scan of the package for ``startswith`` /
``endswith`` / ``==`` on a family's prefix or name), the records' prefixes never overlap, the default recipes and
registrations the records give, and that a family added as one module (written in ``tmp_path``, on the package's
path) is found, registered, made and drawn by every lookup with nothing else touched."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import rlviz.envs.families as fam
from rlviz.envs.families import Family, families, family_named, family_of
from rlviz.envs.recipe import EnvRecipe, atari_recipe, register_envs, require_registered

PKG = Path(fam.__file__).resolve().parents[2]  # rlviz/

#: modules that may test an id against a family's prefix, and why
ALLOWED = {
    "rlviz/envs/families": "the records themselves",
    "rlviz/jax": "the JAX engine, a package of its own (docs/development.md): its family modules (gymnax's own "
                 "MinAtar games, -MinAtar) and its loader get ids the records already told apart (rlviz.envs.jax_ids)",
}


def _family_strings() -> set[str]:
    out = set()
    for f in families():
        out |= set(f.prefixes) | {p.rstrip("/:-") for p in f.prefixes}
    return out | {"-MinAtar"}


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple):
        return [s for e in node.elts for s in _strings(e)]
    return []


def _hit(node: ast.AST, words: set[str]) -> list[str]:
    """The family strings ``node`` tests an id against: ``x.startswith(...)``, ``x.endswith(...)``, ``x == ...``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith",
                                                                                                  "endswith"):
        return [s for a in node.args for s in _strings(a) if s in words]
    if isinstance(node, ast.Compare):
        return [s for c in node.comparators for s in _strings(c) if s in words]
    return []


def _prefix_tests(path: Path, words: set[str]) -> list[str]:
    return [f"{path.name}:{node.lineno} tests {h!r}" for node in ast.walk(ast.parse(path.read_text(), str(path)))
            for h in _hit(node, words)]


def test_no_prefix_test_outside_the_family_records():
    words = _family_strings()
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if any(rel == a or rel.startswith(a + "/") for a in ALLOWED):
            continue
        found += _prefix_tests(path, words)
    assert found == []


def test_the_scan_finds_a_prefix_test(tmp_path):
    """The scan above is not vacuous: each form it looks for, in a module of its own, is found."""
    mod = tmp_path / "m.py"
    mod.write_text('def f(i):\n    return i.startswith(("x", "ALE/")) or i.endswith("-MinAtar") or i == "MinAtar"\n')
    assert _prefix_tests(mod, _family_strings()) == ["m.py:2 tests 'ALE/'", "m.py:2 tests '-MinAtar'",
                                                     "m.py:2 tests 'MinAtar'"]


def test_records_are_frozen_named_once_and_prefixes_never_overlap():
    records = families()
    assert len({f.name for f in records}) == len(records)
    prefixes = [p for f in records for p in f.prefixes]
    assert len(prefixes) == len(set(prefixes))
    assert [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)] == []
    with pytest.raises(AttributeError):
        records[0].name = "x"  # type: ignore[misc]
    assert {f.name for f in records} >= {"ALE", "MinAtar", "MiniGrid", "dm_control", "MuJoCo", "PettingZoo", "gymnax",
                                         "craftax", "brax", "jumanji"}


@pytest.mark.parametrize(("env_id", "name"), [
    ("ALE/Pong-v5", "ALE"), ("MinAtar/Breakout-v1", "MinAtar"), ("MiniGrid-Empty-5x5-v0", "MiniGrid"),
    ("BabyAI-GoToLocal-v0", "MiniGrid"), ("dm_control/cheetah-run-v0", "dm_control"), ("procgen-coinrun-v0", "procgen"),
    ("procgen/coinrun", "procgen-gym"), ("gymnax:Breakout-MinAtar", "gymnax"), ("brax:ant", "brax"),
    ("pistonball_v6", "PettingZoo"), ("CartPole-v1", None), ("BreakoutNoFrameskip-v4", None)])
def test_family_of(env_id, name):
    found = family_of(env_id)
    assert (found.name if found is not None else None) == name


def test_default_recipes_come_from_the_records():
    assert EnvRecipe.for_env_id("ALE/Pong-v5") == atari_recipe("ALE/Pong-v5")
    assert atari_recipe("ALE/Pong-v5").to_dict() == {
        "env_id": "ALE/Pong-v5", "env_kwargs": {"frameskip": 1, "repeat_action_probability": 0.25},
        "wrappers": [{"name": "atari", "kwargs": {"frame_skip": 4, "screen_size": 84, "noop_max": 30},
                      "training_only": False},
                     {"name": "clip_reward", "kwargs": {}, "training_only": True},
                     {"name": "frame_stack", "kwargs": {"stack_size": 4}, "training_only": False}],
        "saliency_mode": "linear"}
    assert EnvRecipe.for_env_id("MinAtar/Breakout-v1") == EnvRecipe("MinAtar/Breakout-v1", saliency_mode="nearest")
    assert EnvRecipe.for_env_id("gymnax:Breakout-MinAtar").saliency_mode == "nearest"
    assert EnvRecipe.for_env_id("gymnax:CartPole-v1") == EnvRecipe("gymnax:CartPole-v1")
    assert EnvRecipe.for_env_id("CartPole-v1") == EnvRecipe("CartPole-v1")


def test_the_jax_engine_reads_its_families_from_the_records():
    from rlviz.envs.jax_ids import JAX_FAMILIES, jax_family

    assert sorted(JAX_FAMILIES) == ["brax", "craftax", "gymnax", "jumanji"]
    assert jax_family("gymnax:CartPole-v1") == "gymnax" and jax_family("gymnax:") is None
    assert jax_family("minigrid:MiniGrid-Empty-5x5-v0") is None


_STUB = '''
"""A stub family: ``Stub/<name>`` ids, registered by rlviz (CartPole underneath), drawn as MiniGrid's agent cell."""

from __future__ import annotations

import gymnasium as gym

from rlviz.envs.families.family import Family

CALLS = []
INSTALLED = [True]


def _register():
    CALLS.append(1)
    if INSTALLED[0]:
        gym.register("Stub/Pole-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                     max_episode_steps=20)


FAMILY = Family("Stub", prefixes=("Stub/",), register=_register, pip="stub-world",
                recipe=lambda env_id: {"env_id": env_id, "saliency_mode": "nearest"},
                make_kwargs=(("disable_env_checker", True),), objects=lambda env_id: "grid")
'''


@pytest.fixture
def stub_family(tmp_path, monkeypatch):
    """A family module written in tmp_path and put on the families package's path: nothing else is touched."""
    import rlviz.envs.recipe as recipe

    folder = tmp_path / "families"
    folder.mkdir()
    (folder / "stubworld.py").write_text(textwrap.dedent(_STUB))
    monkeypatch.setattr(fam, "__path__", [*fam.__path__, str(folder)])
    fam.reload()
    yield sys.modules["rlviz.envs.families.stubworld"]
    monkeypatch.undo()
    sys.modules.pop("rlviz.envs.families.stubworld", None)
    gym.registry.pop("Stub/Pole-v0", None)
    recipe._REGISTERED.discard("Stub")
    fam.reload()


def test_a_family_added_as_one_module_is_found_registered_and_made(stub_family):
    from rlviz.envs import make_env
    from rlviz.envs.headless import uses_mujoco
    from rlviz.evaluate.failures.body_objects import GridAgentExtractor
    from rlviz.evaluate.failures.objects import extractor_for

    stub = family_named("Stub")
    assert isinstance(stub, Family) and family_of("Stub/Pole-v0") is stub
    assert EnvRecipe.for_env_id("Stub/Pole-v0") == EnvRecipe("Stub/Pole-v0", saliency_mode="nearest")
    register_envs("Stub/Pole-v0")
    register_envs("Stub/Pole-v0")
    assert stub_family.CALLS == [1] and "Stub/Pole-v0" in gym.registry  # once per process
    require_registered("Stub/Pole-v0")
    env = make_env("Stub/Pole-v0", render_mode=None)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,) and env.spec.disable_env_checker is True  # the record's make_kwargs
    env.close()
    assert isinstance(extractor_for("Stub/Pole-v0"), GridAgentExtractor)
    assert uses_mujoco("Stub/Pole-v0") is False


def test_a_missing_family_package_is_named(stub_family):
    """An id of a family rlviz registers itself, none of whose ids got registered (its package missing): the
    record's pip name in the one-line error."""
    from rlviz.errors import EnvError

    stub_family.INSTALLED[0] = False
    with pytest.raises(EnvError, match=r"Unknown env id 'Stub/Pole-v0'.* Stub envs need: pip install stub-world\. "):
        require_registered("Stub/Pole-v0")
    assert stub_family.CALLS == [1]
