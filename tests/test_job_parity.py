"""compare holds to render: every render option that applies to one agent is a compare option (for each agent where
it is per agent), and ``compare A A`` gives each agent what ``render A`` gives (summary, diagnoses, attention, the
attention map at failure), on real agents: an rl-zoo3 PPO CartPole run under VecNormalize and the MinAtar sample."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from rlviz import CompareConfig, RenderConfig, compare, render
from rlviz.cli import main
from rlviz.config import COMPARE_ONLY, COMPARE_PER_AGENT, COMPARE_SHARED, cli_options
from rlviz.sinks.base import load_image

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
MINATAR = SAMPLES / "minatar_breakout_ppo.pt2"

#: RenderConfig fields compare does not take, each with the reason. Empty: compare takes every render option (an
#: option added to RenderConfig must be added to compare, per agent or shared, or listed here with why).
EXCLUDED: dict[str, str] = {}
#: Summary keys that are not results of the agent (time).
NOT_RESULTS = ("wall_s",)


def _results(summary: dict) -> str:
    """A summary's results as JSON text (NaN written as NaN, so equal summaries compare equal)."""
    return json.dumps({k: v for k, v in summary.items() if k not in NOT_RESULTS}, sort_keys=True)


def test_every_render_option_is_a_compare_option():
    compare_fields = {f.name: f for f in fields(CompareConfig)}
    compare_flags = {o.name: o for o in cli_options(CompareConfig)}
    render_flags = {o.name: o for o in cli_options(RenderConfig)}
    for f in fields(RenderConfig):
        if f.name in EXCLUDED:
            assert f.name not in COMPARE_SHARED and f.name not in COMPARE_PER_AGENT
            continue
        if f.name in COMPARE_PER_AGENT:  # one option per agent: A's and B's
            names = COMPARE_PER_AGENT[f.name]
            assert len(names) == 2 and all(n in compare_fields for n in names), f.name
            assert all(compare_flags[n].kind == render_flags[f.name].kind for n in names), f.name
        else:
            assert f.name in COMPARE_SHARED and f.name in compare_fields, f"render's {f.name} is not compare's"
            assert compare_flags[f.name].flag == render_flags[f.name].flag, f.name
    assert not set(COMPARE_SHARED) & set(COMPARE_PER_AGENT)
    assert not set(COMPARE_ONLY) & {f.name for f in fields(RenderConfig)}
    # each agent's RenderConfig carries its own per-agent options and the shared ones
    c = CompareConfig("a.zip", "b.zip", vecnormalize_a="a.pkl", episodes=3, strict=True)
    ra, rb = c.render_config("a"), c.render_config("b")
    assert (ra.checkpoint, ra.vecnormalize, rb.checkpoint, rb.vecnormalize) == ("a.zip", "a.pkl", "b.zip", None)
    assert ra.episodes == rb.episodes == 3 and ra.strict and rb.strict


@pytest.fixture
def zoo_run_dir(zoo_run):
    """The rl-zoo3 run folder of conftest's ``zoo_run`` (as tests/test_zoo.py uses it)."""
    return zoo_run[1]


def test_compare_of_a_zoo_run_with_itself_diagnoses_each_agent_as_render(zoo_run_dir, tmp_path):
    """0.3's compare listed no diagnostics for either agent where render reported value_uninformative,
    value_biased and rewards_one_sign on this kind of run."""
    rendered = render(checkpoint=zoo_run_dir, episodes=6, videos="none", out=tmp_path / "render")
    compared = compare(a=zoo_run_dir, b=zoo_run_dir, episodes=6, videos="none", out=tmp_path / "compare")
    ids = {f["id"] for f in rendered.summary["diagnostics"]}
    assert "rewards_one_sign" in ids  # CartPole: +1 every step
    for side in "ab":
        assert _results(compared.comparison[side]) == _results(rendered.summary)
    assert json.loads((tmp_path / "compare" / "comparison.json").read_text())["a"]["diagnostics"] == \
        rendered.summary["diagnostics"]
    assert compared.warnings == [{**f, "agent": side} for side in "ab" for f in rendered.warnings]
    code = main(["compare", str(zoo_run_dir), str(zoo_run_dir), "--episodes", "6", "--videos", "none", "--strict",
                 "--no-progress", "--out", str(tmp_path / "strict")])
    assert code == (3 if rendered.warnings else 0)


@pytest.mark.filterwarnings("ignore:.*trained under VecNormalize")  # the bare zip's, on purpose
def test_compare_vecnormalize_per_agent_equals_render(zoo_run_dir, tmp_path):
    """A plain SB3 zip has no statistics beside it: --vecnormalize-a gives A the run's, as render --vecnormalize."""
    plain = tmp_path / "plain.zip"
    plain.write_bytes((zoo_run_dir / "CartPole-v1.zip").read_bytes())
    stats = zoo_run_dir / "CartPole-v1" / "vecnormalize.pkl"
    rendered = render(checkpoint=plain, env="CartPole-v1", vecnormalize=stats, episodes=4, videos="none",
                      greedy=True, out=tmp_path / "render")
    bare = render(checkpoint=plain, env="CartPole-v1", episodes=4, videos="none", greedy=True, out=tmp_path / "bare")
    compared = compare(a=plain, b=plain, env="CartPole-v1", vecnormalize_a=stats, episodes=4, videos="none",
                       greedy=True, out=tmp_path / "compare")
    a, b = compared.comparison["a"], compared.comparison["b"]
    assert _results(a) == _results(rendered.summary)
    assert _results(b) == _results(bare.summary)
    assert rendered.summary["returns"] != bare.summary["returns"]  # the statistics change what the agent does


def test_compare_attention_and_strict_as_render_and_its_tensorboard_log(tmp_path, capsys):
    """With attention: each agent's attention shares and findings equal render's, and each gets render's attention
    map at failure (the same pixels); --strict exits 3 on compare's warnings as on render's. The same compare's one
    RunLog (rlviz.sinks.log_run, --tensorboard): its numbers, each agent's findings as text and each agent's
    attention map at failure beside the heatmap difference, read back from the event files (one compare run for
    both: they were two tests running the same job)."""
    logdir, tb = tmp_path / "tb", importlib.util.find_spec("tensorboard") is not None
    opts = ["--episodes", "3", "--heatmap", "--attention", "--videos", "none", "--no-progress", "--strict"]
    code_r = main(["render", str(MINATAR), "--out", str(tmp_path / "render"), *opts])
    code_c = main(["compare", str(MINATAR), str(MINATAR), "--out", str(tmp_path / "compare"), *opts,
                   *(["--tensorboard", str(logdir)] if tb else [])])
    summary = json.loads((tmp_path / "render" / "summary.json").read_text())
    comparison = json.loads((tmp_path / "compare" / "comparison.json").read_text())
    assert summary["attention"] is not None
    for side in "ab":
        assert _results(comparison[side]) == _results(summary)
    warned = any(f["severity"] == "warning" for f in summary["diagnostics"])
    assert (code_r, code_c) == ((3, 3) if warned else (0, 0))
    png = tmp_path / "render" / "attention_at_failure.png"
    for side in "ab":
        mine = tmp_path / "compare" / f"attention_at_failure_{side}.png"
        assert mine.is_file() == png.is_file()
        if png.is_file():
            np.testing.assert_array_equal(load_image(mine), load_image(png))
    if not tb:  # (as the log's test alone was skipped without it)
        pytest.skip("tensorboard is not installed: the TensorBoard half is not checked (pip install tensorboard)")
    from conftest import tb_accumulator  # the TensorBoard log of that compare

    acc = tb_accumulator(logdir)
    tags = acc.Tags()
    (diff,) = acc.Scalars("rlviz/compare/return_diff/mean")
    assert diff.step == 0 and diff.value == 0.0  # A against itself
    assert "rlviz/compare/heatmap_diff" in tags["images"]
    for side in "ab":
        assert (f"rlviz/compare/{side}/attention_at_failure" in tags["images"]) == \
            (tmp_path / "compare" / f"attention_at_failure_{side}.png").is_file()
        assert any(t.startswith(f"rlviz/compare/{side}/diagnostics") for t in tags["tensors"])


def test_compare_videos_are_recorded_in_the_workers(tmp_path, monkeypatch):
    """With --workers 2 each agent's videos come from the workers (this process records none) and equal the ones
    recorded here."""
    here = compare(a=MINATAR, b=MINATAR, episodes=2, videos="first:1", out=tmp_path / "here")
    videos_stage = importlib.import_module("rlviz.jobs.videos")  # (record_videos: render's and compare's)
    driver, record = os.getpid(), videos_stage.record_episode

    def refuse(*args, **kwargs):  # (forked workers inherit the patch: there it records)
        if os.getpid() == driver:
            raise AssertionError("a video recorded in the driver despite --workers 2")
        return record(*args, **kwargs)

    monkeypatch.setattr(videos_stage, "record_episode", refuse)
    workers = compare(a=MINATAR, b=MINATAR, episodes=2, videos="first:1", workers=2, out=tmp_path / "workers")
    assert [p.name for p in workers.videos] == [p.name for p in here.videos]
    for side in "ab":
        (mine,) = (tmp_path / "workers" / "videos" / side).glob("*.npz")
        theirs = tmp_path / "here" / "videos" / side / mine.name
        with np.load(mine) as x, np.load(theirs) as y:
            assert sorted(x.files) == sorted(y.files)
            for k in x.files:
                np.testing.assert_array_equal(x[k], y[k])
