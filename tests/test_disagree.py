"""`rlviz compare A B --disagreements K`: the states where two agents choose differently, and both played out from
the saved state. Probe agents whose disagreement is known by construction (identical agents; agents that differ
only on "trap" states, where one of them takes the losing action), read back from disagreements.json/.csv, the
videos decoded; results independent of --num-envs and --workers."""

from __future__ import annotations

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlviz import compare
from rlviz.disagree.run import BRANCH_LOOK
from rlviz.disagree.select import MIN_TV
from rlviz.draw.side_by_side import GAP, HEADER
from rlviz.media.video import probe_video, read_video
from rlviz.sources.checkpoint import save_checkpoint

TRAP = "rlviz-probe/Trap-v0"
LIMIT = 12
K = BRANCH_LOOK.display_height // 16  # the branch videos' scale of the env's 16x16 frames


def is_trap(t: int) -> bool:
    return t % 3 == 2


class TrapEnv(gym.Env):
    """obs float32 [2] = (t, trap); trap states are t = 2, 5, 8, 11. Action 0 earns 0.1; action 1 on a trap state
    loses (reward -1, terminated), elsewhere earns 0.1. 12 steps at most. The frame: a 16x16 image with the
    object at row t, column 8 on a trap state (else column 0)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1.0, 100.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def _obs(self):
        return np.array([self.t, float(is_trap(self.t))], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        lose = int(action) == 1 and is_trap(self.t)
        self.t += 1
        return self._obs(), -1.0 if lose else 0.1, lose, False, {}

    def render(self):
        f = np.zeros((16, 16, 3), np.uint8)
        f[self.t % 16, 8 if is_trap(self.t) else 0] = (255, 0, 0)
        return f


if TRAP not in gym.registry:
    gym.register(TRAP, entry_point=TrapEnv, max_episode_steps=LIMIT)


class Careful(torch.nn.Module):
    """Action 0 everywhere (logits +-30); value = 1 - t / 12."""

    def forward(self, x):
        return torch.stack([x[:, 0] * 0 + 30.0, x[:, 0] * 0 - 30.0], dim=1), 1 - x[:, 0] / LIMIT


class Reckless(torch.nn.Module):
    """Action 0 except on trap states, where it takes the losing action 1; value = t."""

    def forward(self, x):
        trap = x[:, 1]
        return torch.stack([30.0 - 60.0 * trap, -30.0 + 60.0 * trap], dim=1), x[:, 0]


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trap_agents")
    return {name: save_checkpoint(folder / f"{name}.pt2", module, env=TRAP, gamma=0.9)
            for name, module in (("careful", Careful()), ("careful2", Careful()), ("reckless", Reckless()))}


def _read(out):
    data = json.loads((out / "disagreements.json").read_text())
    with open(out / "disagreements.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return data, rows


def _games(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two branches' game frames in a side-by-side video's first frame (each half is a branch's Compositor
    frame, the game at the left of its panel, centred vertically: a black square on the canvas' colour): the
    16x16 frame drawn x``K``."""
    size = 16 * K
    top = HEADER + int(np.flatnonzero(first[HEADER:, 0].max(axis=1) < 8)[0])
    game = first[top:top + size, :size].astype(int)
    cells = game[K // 2::K, K // 2::K]  # the right half's game starts where its cells look most like the left's
    diffs = [np.abs(first[top + K // 2:top + size:K, x + K // 2:x + size:K].astype(int) - cells).mean()
             for x in range(size + GAP, first.shape[1] - size + 1)]
    x = size + GAP + int(np.argmin(diffs))
    return game, first[top:top + size, x:x + size].astype(int)


def test_identical_agents_have_no_disagreement_and_no_branches(agents, tmp_path):
    out = compare(a=agents["careful"], b=agents["careful2"], episodes=4, disagreements=5, videos="none",
                  out=tmp_path / "same", seed=1)
    data, rows = _read(out.out_dir)
    both = data["summary"]["all"]
    assert both["states"] == 2 * 4 * LIMIT  # every state of both agents' episodes, asked once
    assert both["greedy_differ_share"] == 0.0 and both["tv_mean"] == 0.0 and both["disagree_share"] == 0.0
    assert data["states"] == [] and rows == []
    assert out.comparison["disagreements"]["branches"]["states"] == 0


def test_top_states_lie_where_the_agents_differ_and_the_losing_branches_lose(agents, tmp_path):
    tb = pytest.importorskip("tensorboard") and tmp_path / "tb"
    out = compare(a=agents["careful"], b=agents["reckless"], episodes=3, disagreements=6, disagreement_horizon=2,
                  out=tmp_path / "trap", seed=2, heatmap=True, objects="_envs:probe_objects", tensorboard=tb)
    data, rows = _read(out.out_dir)
    from conftest import tb_accumulator  # the disagreements go to the sinks in compare's one RunLog

    tags = tb_accumulator(tb).Tags()
    assert "rlviz/compare/disagreement_heatmap" in tags["images"]
    assert sum(t.startswith("rlviz/compare/disagreement-") for t in tags["images"]) == len(data["states"])
    assert any(t.startswith("rlviz/compare/disagreements") for t in tags["tensors"])
    # A (careful) plays 12 steps, 4 of them traps; B (reckless) loses on its first trap (t = 2): 3 steps
    assert data["summary"]["on_a_states"]["states"] == 3 * LIMIT
    assert data["summary"]["on_b_states"]["states"] == 3 * 3
    assert data["summary"]["on_a_states"]["greedy_differ_share"] == pytest.approx(4 / 12)
    assert data["summary"]["on_b_states"]["greedy_differ_share"] == pytest.approx(1 / 3)
    # every state is the same in every episode (the env has no randomness): each distinct trap state once
    assert len(rows) == 4 and len(data["states"]) == 4
    for s in data["states"]:
        assert is_trap(s["step"]) and s["greedy_differ"] and s["tv"] > 0.999
        assert s["value_a"] == pytest.approx(1 - s["step"] / LIMIT) and s["value_b"] == pytest.approx(s["step"])
        assert s["b_failed"] and s["b_terminated"] and s["b_return"] == -1.0 and s["b_steps"] == 1
        assert not s["a_failed"] and s["a_return"] == pytest.approx(0.1 * min(2, LIMIT - s["step"]))
        assert s["better"] == "a"
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4"] and all(r["better"] == "a" for r in rows)
    assert data["branches"]["better"] == {"a": 4, "b": 0, "tie": 0}
    # a video per state: the two branches side by side from the shared frame, held to last 2 s
    for s in data["states"]:
        path = out.out_dir / s["video"]
        info = probe_video(path)
        assert info.codec == "h264" and info.duration >= 1.9
        game, other = _games(next(iter(read_video(path))))
        assert np.abs(game - other).mean() < 2 and game.max() > 200  # the shared frame, the object on it
        assert np.abs(game[s["step"] * K + K // 2, 8 * K + K // 2] - (255, 0, 0)).max() < 40  # on the trap column
        for side in "ab":  # each branch's per-step numbers beside the video, one row per step played
            steps = np.load(out.out_dir / "videos" / "disagreements" / side / f"state-{s['rank']}.npz")
            assert len(steps["rewards"]) == s[f"{side}_steps"] and len(steps["probs"]) == s[f"{side}_steps"] + 1
            assert bool(steps["terminated"]) == s[f"{side}_terminated"]
    # where they disagree: the object sits at column 8 on trap states only
    heat = np.load(out.out_dir / "disagreement_heatmap.npz")
    counts = heat["counts"].sum(axis=0)
    assert counts[:, 8].sum() == int(heat["failures"]) == 3 * 4 + 3 * 1 and counts[:, 0].sum() == 0
    page = (out.out_dir / "report.html").read_text()
    assert "Where A and B disagree" in page and "videos/disagreements/state-1.mp4" in page


def test_window_keeps_one_state_per_moment(agents, tmp_path):
    out = compare(a=agents["careful"], b=agents["reckless"], episodes=2, disagreements=10, disagreement_horizon=4,
                  videos="none", out=tmp_path / "win", seed=3)
    data, _ = _read(out.out_dir)
    by_episode: dict = {}
    for s in data["states"]:
        by_episode.setdefault((s["states_of"], s["episode"]), []).append(s["step"])
    for steps in by_episode.values():
        steps.sort()
        assert all(b - a >= 4 for a, b in zip(steps, steps[1:]))
    # the 4 distinct trap states (the episodes are the same game): (2, 8) in A's first episode, then the ones the
    # window left out there (5, 11) from its second; B's states repeat A's (the same observations): not again
    assert by_episode == {("a", 0): [2, 8], ("a", 1): [5, 11]}
    assert all(s["tv"] >= MIN_TV for s in data["states"])


def test_results_do_not_depend_on_num_envs_or_workers(tmp_path):
    from pathlib import Path

    samples = Path(__file__).resolve().parents[1] / "samples"
    kw = {"a": samples / "minatar_breakout_ppo.pt2", "b": samples / "minatar_breakout_ppo_noent.pt2", "episodes": 5,
          "disagreements": 3, "disagreement_horizon": 10, "videos": "none", "seed": 4}
    runs = [compare(**kw, num_envs=1, out=tmp_path / "one"), compare(**kw, num_envs=5, out=tmp_path / "five"),
            compare(**kw, num_envs=2, workers=2, out=tmp_path / "workers")]
    texts = [(r.out_dir / "disagreements.json").read_text() for r in runs]
    assert texts[0] == texts[1] == texts[2]
    data = json.loads(texts[0])
    assert len(data["states"]) == 3 and data["summary"]["all"]["states"] > 0


def test_env_that_cannot_be_restored_gets_one_line_and_the_rest_goes_on(agents, tmp_path, monkeypatch):
    import rlviz.disagree.branches as branches

    monkeypatch.setattr(branches, "copies_faithfully", lambda *a, **k: False)
    out = compare(a=agents["careful"], b=agents["reckless"], episodes=2, disagreements=2, videos="none",
                  out=tmp_path / "norestore", seed=5)
    data, rows = _read(out.out_dir)
    assert data["note"].startswith("no branches: they need a restorable env")
    assert len(rows) == 2 and all(r["a_return"] == "" and r["better"] == "" for r in rows)
    assert (out.out_dir / "comparison.json").is_file()


def test_options_are_checked(agents, tmp_path):
    from rlviz.errors import UsageError

    with pytest.raises(UsageError, match="--disagreements"):
        compare(a=agents["careful"], b=agents["reckless"], disagreements=-1, out=tmp_path / "x")
    with pytest.raises(UsageError, match="--disagreement-horizon"):
        compare(a=agents["careful"], b=agents["reckless"], disagreements=1, disagreement_horizon=0, out=tmp_path / "y")


def test_timeline_pairs_find_where_the_collapsed_policy_chooses_differently(tmp_path_factory, tmp_path):
    from _timeline_runs import COLLAPSE_AT, trained_runs

    from rlviz.config import TimelineConfig
    from rlviz.training.disagreements import timeline_disagreements

    _, collapsed = trained_runs(tmp_path_factory)
    config = TimelineConfig(run=collapsed, env="CartPole-v1", episodes=3, videos="none", seed=0)
    outs = timeline_disagreements(config, tmp_path / "tl", 3, against=COLLAPSE_AT - 1024, horizon=100)
    assert [o.out_dir.name for o in outs] == ["2048-vs-1024", "2048-vs-3072", "2048-vs-4096"]
    data = json.loads((outs[1].out_dir / "disagreements.json").read_text())
    before = json.loads((outs[0].out_dir / "disagreements.json").read_text())
    # from 3072 on the policy always pushes left: wherever the 2048 one pushes right they disagree (between two
    # healthy checkpoints the greedy actions agree); the top states are the collapsed policy's, where its pole falls
    assert before["summary"]["all"]["greedy_differ_share"] < 0.05
    assert data["summary"]["all"]["greedy_differ_share"] > 0.5 and len(data["states"]) == 3
    for s in data["states"]:
        assert s["states_of"] == "b" and s["greedy_differ"] and s["tv"] > 0.5 and s["b_failed"]
    with pytest.raises(Exception, match="no checkpoint at that step"):
        timeline_disagreements(config, tmp_path / "x", 1, against=5)


def test_branch_videos_for_the_top_states_only(agents, tmp_path):
    out = compare(a=agents["careful"], b=agents["reckless"], episodes=1, disagreements=3, disagreement_videos=1,
                  disagreement_horizon=2, out=tmp_path / "one", seed=6)
    data, rows = _read(out.out_dir)
    assert [s["video"] for s in data["states"]] == ["videos/disagreements/state-1.mp4", None, None]
    assert all(s["better"] == "a" for s in data["states"])  # every state still played out both ways
    assert sorted(p.name for p in (out.out_dir / "videos" / "disagreements").glob("*.mp4")) == ["state-1.mp4"]


def test_timeline_cli_writes_each_pairs_analysis_into_its_out_and_links_it(tmp_path_factory, tmp_path, capsys):
    from _timeline_runs import COLLAPSE_AT, SAVE_FREQ, trained_runs

    from rlviz.cli import main

    _, collapsed = trained_runs(tmp_path_factory)
    before, after = COLLAPSE_AT - SAVE_FREQ, COLLAPSE_AT  # a healthy checkpoint, then the collapsed one
    files = [str(collapsed / f"rl_model_{s}_steps.zip") for s in (before, after)]
    out = tmp_path / "tl"
    common = [*files, "--env", "CartPole-v1", "--episodes", "3", "--videos", "none", "--seed", "0", "--out", str(out)]
    assert main(["timeline", *common, "--disagreements", "2", "--disagreement-horizon", "20"]) == 0
    pair = out / "disagreements" / f"{before}-vs-{after}"
    data = json.loads((pair / "disagreements.json").read_text())
    assert data["disagreements"] == 2 and data["horizon"] == 20 and len(data["states"]) == 2
    assert data["summary"]["all"]["greedy_differ_share"] > 0.5  # the collapsed policy always pushes left
    assert all(s["states_of"] == "b" and s["greedy_differ"] and s["b_steps"] <= 20 for s in data["states"])
    timeline = json.loads((out / "timeline.json").read_text())
    [row] = timeline["disagreements"]
    assert (row["a"], row["b"]) == (before, after) and (out / row["report"]).is_file()
    assert row["all"]["greedy_differ_share"] == data["summary"]["all"]["greedy_differ_share"]
    assert f"href='{row['report']}'" in (out / "report.html").read_text()
    capsys.readouterr()
    # --against without --disagreements: a usage error, one line, nothing written
    assert main(["timeline", *common[:-1], str(tmp_path / "none"), "--against", str(before)]) == 2
    assert "--against" in capsys.readouterr().err and not (tmp_path / "none").exists()
