"""``rlviz compare A B`` on a PettingZoo env id (rlviz.jobs.compare_agents): per-agent paired statistics.

A: the shared-parameter torch agent of tests/test_render_agents.py (trained for seconds on SuperSuit-vectorised
pistonball), B: the same network untrained. Compare's numbers are read back and checked against both agents' own
``rlviz render`` runs on the same seeds (their episodes.csv), and against the paired statistics recomputed from
those files; A against A gives zero differences.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")
pytest.importorskip("supersuit")
torch = pytest.importorskip("torch")

from test_render_agents import AGENTS, CYCLES, PISTONS, Agent, _recipe, _rows, _train_torch_agent  # noqa: E402

from rlviz.cli import main  # noqa: E402
from rlviz.evaluate.statistics.paired import paired_comparison  # noqa: E402
from rlviz.media import probe_video, read_video  # noqa: E402
from rlviz.sources.pt2.saving import save_checkpoint  # noqa: E402

EPISODES = 4  # (paired statistics over 4 seeds: every number is still checked against the renders' own)
FIELDS = ("return", "length", "terminated", "truncated", "failed")


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agents")
    a = save_checkpoint(folder / "trained.pt2", _train_torch_agent(), env=_recipe())
    torch.manual_seed(1)
    b = save_checkpoint(folder / "untrained.pt2", Agent(), env=_recipe())
    recipe = folder / "env-recipe.json"
    recipe.write_text(_recipe().to_json())
    return a, b, recipe


def test_compare_per_agent_equals_each_agents_own_render(two_agents, tmp_path, capsys):
    a, b, recipe = two_agents
    out = tmp_path / "cmp"
    code = main(["compare", str(a), str(b), "--env", str(recipe), "--episodes", str(EPISODES), "--heatmap",
                 "--videos", "first:1", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs = {}
    for side, ckpt in (("a", a), ("b", b)):
        assert main(["render", str(ckpt), "--env", str(recipe), "--episodes", str(EPISODES), "--videos", "first:0",
                     "--out", str(tmp_path / side)]) == 0
        runs[side] = _rows(tmp_path / side / "episodes.csv")
    capsys.readouterr()
    rows = _rows(out / "episodes.csv")
    c = json.loads((out / "comparison.json").read_text())
    assert len(rows) == EPISODES and c["episodes"] == EPISODES and c["agents_list"] == AGENTS == list(c["agents"])
    for k, row in enumerate(rows):  # every number of each side: its own render's, on the same seed
        for side in "ab":
            own = runs[side][k]
            assert row["seed"] == own["seed"] and row[f"{side}_steps"] == own["steps"]
            assert row[f"{side}_team_return"] == own["team_return"]
            for agent in AGENTS:
                for f in FIELDS:
                    assert row[f"{side}_{agent}_{f}"] == own[f"{agent}_{f}"], (k, side, agent, f)
        for agent in AGENTS:
            assert float(row[f"{agent}_return_diff"]) == float(runs["b"][k][f"{agent}_return"]) - float(
                runs["a"][k][f"{agent}_return"])
    # the paired statistics per agent and of the team: recomputed from the two renders' files
    for agent in AGENTS:
        ra, rb = ([float(r[f"{agent}_return"]) for r in runs[s]] for s in "ab")
        expected = json.loads(json.dumps(paired_comparison(ra, rb)))
        got = c["agents"][agent]
        assert {k: got[k] for k in expected} == expected
        fa, fb = (sum(int(r[f"{agent}_failed"]) for r in runs[s]) for s in "ab")
        assert got["failures"] == {"a": fa, "b": fb, "diff": fb - fa}
        la, lb = (np.array([int(r[f"{agent}_length"]) for r in runs[s]]) for s in "ab")
        assert got["length_diff"]["mean"] == pytest.approx((lb - la).mean(), abs=1e-12)
        assert c["a"]["agents"][agent] == json.loads((tmp_path / "a" / "summary.json").read_text())["agents"][agent]
    ta, tb = ([float(r["team_return"]) for r in runs[s]] for s in "ab")
    team = json.loads(json.dumps(paired_comparison(ta, tb)))
    assert {k: c[k] for k in team} == team
    assert any(c["agents"][agent]["return_diff"]["mean"] != 0 for agent in AGENTS)  # two different agents
    # the terminal table: one line per agent
    assert all(any(line.startswith(agent) for line in printed.out.splitlines()) for agent in AGENTS)
    # the heatmap difference: one panel per agent, each side's counts its own failures
    with np.load(out / "heatmap_diff.npz") as hm:
        assert list(hm["object_names"]) == AGENTS and hm["diff"].shape[0] == PISTONS
        for side in "ab":
            placed = c[side]["heatmap"]["failures"]
            assert int(hm[f"failures_{side}"]) == placed
            assert placed == sum(c[side]["agents"][agent]["failures_placed"] for agent in AGENTS)
    # the video pair: each side's episode 0 with a column per agent, then the two side by side
    steps = [int(rows[0][f"{side}_steps"]) for side in "ab"]
    singles = [probe_video(out / "videos" / side / "first-episode-0.mp4") for side in "ab"]
    assert [s.num_frames for s in singles] == [n + 1 for n in steps]
    pair = out / "videos" / "first-0.mp4"
    info = probe_video(pair)
    assert info.num_frames == max(steps) + 1 == sum(1 for _ in read_video(pair))
    assert info.width >= singles[0].width + singles[1].width and max(steps) <= CYCLES


def test_compare_of_an_agent_with_itself_gives_zero_differences(two_agents, tmp_path, capsys):
    a, _, recipe = two_agents
    out = tmp_path / "self"
    assert main(["compare", str(a), str(a), "--env", str(recipe), "--episodes", str(EPISODES), "--videos", "first:0",
                 "--out", str(out), "--tensorboard", str(tmp_path / "tb")]) == 0, capsys.readouterr().err
    c = json.loads((out / "comparison.json").read_text())
    from conftest import tb_accumulator  # the paired numbers went to TensorBoard, the team's and each agent's

    acc = tb_accumulator(tmp_path / "tb")
    assert [e.value for e in acc.Scalars("rlviz/compare/return_diff/mean")] == [0.0]
    assert all([e.value for e in acc.Scalars(f"rlviz/compare/agents/{x}/return_diff/mean")] == [0.0] for x in AGENTS)
    assert "rlviz/compare/a/diagnostics/text_summary" in acc.Tags()["tensors"]
    assert c["return_diff"] == {"mean": 0.0, "median": 0.0, "ci95": [0.0, 0.0]} and c["prob_improvement"] == 0.5
    for agent in AGENTS:
        d = c["agents"][agent]
        assert d["return_diff"] == {"mean": 0.0, "median": 0.0, "ci95": [0.0, 0.0]}
        assert d["length_diff"] == {"mean": 0.0, "ci95": [0.0, 0.0]} and d["failures"]["diff"] == 0
    rows = _rows(out / "episodes.csv")
    assert all(float(r["team_return_diff"]) == 0 and all(float(r[f"{x}_return_diff"]) == 0 for x in AGENTS)
               for r in rows)
    assert c["a"]["agents"] == c["b"]["agents"]


def test_compare_with_workers_gives_the_one_process_numbers(two_agents, tmp_path, capsys):
    """--workers 2: both rollouts run in the workers (seed-contiguous shards); episodes.csv and the per-agent paired
    statistics are the one-process run's."""
    a, b, recipe = two_agents
    outs = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert main(["compare", str(a), str(b), "--env", str(recipe), "--episodes", "4", "--videos", "first:0",
                     "--workers", workers, "--out", str(out)]) == 0, capsys.readouterr().err
        outs[workers] = out
    assert (outs["1"] / "episodes.csv").read_text() == (outs["2"] / "episodes.csv").read_text()
    one, two = (json.loads((outs[w] / "comparison.json").read_text()) for w in "12")
    assert one["agents"] == two["agents"] and one["return_diff"] == two["return_diff"]
    assert one["a"]["agents"] == two["a"]["agents"] and one["b"]["agents"] == two["b"]["agents"]
