"""Seed 003's story end to end, in its short setting (scripts/seed_story.py; docs/story.md): the seed-shaped JAX PPO
trained with the seed's bug (no entropy bonus in the differentiated loss) and fixed, each evaluated from inside its
jit-compiled loop into a timeline folder, then the two final agents compared on the same seeds. What the seed saw by
eye must be in rlviz's outputs: the buggy run's entropy collapses (a finding, with the step it first appeared) and
the fixed run's does not; the fixed agent returns more, by a paired 95% CI that excludes 0. What it saw and does not
come back here is also asserted: the buggy value is not flat within episodes (docs/story.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("gymnax")
pytest.importorskip("optax")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """The script run as users run it: a process of its own under the default XLA flags (tests/conftest.py's
    QUICK_XLA_FLAGS change numerics bit-wise, and this story's margins are thin); its story.json is what ``main``
    returns."""
    import os
    import subprocess
    import sys

    from conftest import default_xla_env

    spec = importlib.util.spec_from_file_location("seed_story", ROOT / "scripts" / "seed_story.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("story")
    env = default_xla_env(PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    assert "xla_backend_optimization_level" not in env.get("XLA_FLAGS", "")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "seed_story.py"), "--out", str(out), "--setting",
                           "short"], capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return mod, out, json.loads((out / "story.json").read_text())


def _timeline(out: Path, name: str) -> dict:
    return json.loads((out / name / "timeline.json").read_text())


def test_the_runs_are_evaluated_inside_the_loop_at_their_training_steps(story):
    mod, out, s = story
    setting = mod.SETTINGS["short"]
    per_update = s["config"]["num_envs"] * s["config"]["num_steps"]
    steps = [k * setting["every"] * per_update for k in range(1, setting["updates"] // setting["every"] + 1)]
    for name in ("buggy", "fixed"):
        data = _timeline(out, name)
        assert [r["step"] for r in data["checkpoints"]] == steps
        assert data["env_id"] == mod.ENV and all(r["episodes"] == setting["episodes"] for r in data["checkpoints"])
        assert all(r["policy_change"]["vs_step"] == steps[i] for i, r in enumerate(data["checkpoints"][1:]))
        videos = sorted((out / name / "videos").glob("step_*-worst-*-episode-0.mp4"))
        assert sorted({int(v.name.split("-")[0][5:]) for v in videos}) == steps
        assert (out / name / "timeline.png").is_file() and (out / name / "report.html").is_file()


def test_the_buggy_runs_entropy_collapses_and_the_fixed_runs_does_not(story):
    _, out, s = story
    buggy, fixed = _timeline(out, "buggy"), _timeline(out, "fixed")
    first = buggy["first_seen"]["entropy_collapsing"]
    row = next(r for r in buggy["checkpoints"] if r["step"] == first)
    assert row["mean_relative_entropy"] < 0.1
    assert buggy["diagnostics_over_training"]["entropy_collapsing"]["persisted"]
    assert "entropy_collapsing" not in fixed["first_seen"] and "policy_collapsed" not in fixed["first_seen"]
    assert min(r["mean_relative_entropy"] for r in fixed["checkpoints"]) > 0.3
    # the seed's flat value panel does not come back here: both value heads track the return (docs/story.md)
    for data in (buggy, fixed):
        assert not {"value_uninformative", "value_wrong_sign"} & set(data["first_seen"])


def test_the_buggy_value_moves_within_episodes_as_the_return_to_go_does(story):
    """Not the seed's stuck value: the buggy agent's episodes (about 75 steps) are shorter than the discount's horizon
    (1 / (1 - 0.99) = 100 steps), so what is left of the return falls to 0 over each one, and its value with it."""
    _, _, s = story
    for name in ("buggy", "fixed"):
        v = s[name]["value_within_episodes"]
        assert v["episodes"] == s["config"]["episodes"]
        assert v["v_within_std"] >= 0.5 * v["g_within_std"] > 0
    buggy = s["buggy"]["value_within_episodes"]
    assert buggy["v_within_rel"] > 0.25 and abs(buggy["v_within_std"] - buggy["g_within_std"]) < 0.1 * buggy["g_within_std"]


def test_the_fixed_agent_returns_more_on_paired_seeds(story):
    _, out, s = story
    c = s["compare"]
    assert c["return_diff"]["ci95"][0] > 0
    assert c["b"]["return_mean"] > c["a"]["return_mean"]
    assert "entropy_collapsing" not in c["a"]["warnings"]  # (a timeline finding: the render of one file has none)
    assert (out / "story.json").is_file() and (out / "compare").is_dir()
