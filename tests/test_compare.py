"""`rlviz compare A B`: paired episodes on the same seeds, known differences read back exactly, the heatmap
difference, side-by-side videos, and the same agent against itself giving identical episodes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from _envs import TIME_LIMIT, ProbeEnv

from rlviz import CompareConfig, RenderConfig, compare
from rlviz.cli import main
from rlviz.config import COMPARE_ONLY, COMPARE_PER_AGENT, COMPARE_SHARED, cli_options
from rlviz.draw.side_by_side import GAP, HEADER, side_by_side
from rlviz.draw.video import video_timing
from rlviz.errors import UsageError
from rlviz.evaluate.rollouts.rollout import episode_seed_for
from rlviz.jobs.videos import MIN_VIDEO_SECONDS
from rlviz.media.video import VideoWriter, probe_video, read_video
from rlviz.sources.checkpoint import save_checkpoint

STEER = "rlviz-probe/Steer-v0"
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


class SteerEnv(ProbeEnv):
    """The probe (reward = action, length and fate drawn at reset) with the object at (t, x), x = the number of
    1-actions so far: an always-0 agent fails with the object at (L - 1, 0), an always-1 agent at (L - 1, L - 1)."""

    def reset(self, *, seed=None, options=None):
        self.x = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.x += int(action)
        return super().step(action)

    def render(self):
        f = np.zeros((16, 16, 3), dtype=np.uint8)
        f[self.t % 16, self.x % 16] = (255, 0, 0)
        return f


if STEER not in gym.registry:
    gym.register(STEER, entry_point=SteerEnv, max_episode_steps=TIME_LIMIT)


class Constant(torch.nn.Module):
    """Always (nearly surely: logits +-30) the same action; value = t."""

    def __init__(self, action: int):
        super().__init__()
        self.register_buffer("logits", torch.tensor([30.0, -30.0] if action == 0 else [-30.0, 30.0]))

    def forward(self, x):
        return x[:, :1] * 0 + self.logits, x[:, 0]


class Linear(torch.nn.Module):
    """A sampling policy (both actions likely) for the determinism check."""

    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


@pytest.fixture(scope="module")
def probe_agents(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe_agents")
    return {name: save_checkpoint(folder / f"{name}.pt2", module, env=STEER, gamma=0.9)
            for name, module in (("zeros", Constant(0)), ("ones", Constant(1)), ("linear", Linear()))}


def probe_episodes(n: int, seed: int) -> list[tuple[int, bool]]:
    """(length, lost) of each episode of a rollout seeded ``seed``, from the env's own reset."""
    out = []
    for k in range(n):
        env = SteerEnv()
        env.reset(seed=episode_seed_for(seed, k))
        out.append((env.L if env.lose else TIME_LIMIT, env.lose))
    return out


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open()))


def test_known_return_difference_is_exact(probe_agents, tmp_path, capsys):
    """A always plays 0 (return 0), B always 1 (return = length): B - A is each episode's length."""
    out = tmp_path / "out"
    code = main(["compare", str(probe_agents["zeros"]), str(probe_agents["ones"]), "--episodes", "20",
                 "--num-envs", "3", "--seed", "5", "--out", str(out), "--videos", "worst:1", "--no-progress",
                 "--heatmap", "--objects", "_envs:probe_objects"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "P(B > A)" in printed and "95% CI" in printed
    episodes = probe_episodes(20, seed=5)
    lengths = np.array([length for length, _ in episodes], dtype=float)
    c = json.loads((out / "comparison.json").read_text())
    assert c["episodes"] == 20
    assert c["return_diff"]["mean"] == pytest.approx(lengths.mean(), abs=1e-12)
    assert c["return_diff"]["median"] == np.median(lengths)
    lo, hi = c["return_diff"]["ci95"]
    assert lengths.min() <= lo < lengths.mean() < hi <= lengths.max()
    assert c["prob_improvement"] == 1.0
    assert c["a"]["returns"]["mean"] == 0.0 and c["b"]["returns"]["mean"] == pytest.approx(lengths.mean())
    assert c["diagnostics_diff"]["returns/mean"] == pytest.approx(lengths.mean())
    assert c["diagnostics_diff"]["lengths/mean"] == 0.0  # same seeds, same episodes: lengths do not depend on actions
    assert "wall_s" not in c["diagnostics_diff"]
    rows = read_csv(out / "episodes.csv")
    assert [int(r["seed"]) for r in rows] == [episode_seed_for(5, k) for k in range(20)]
    assert [float(r["return_diff"]) for r in rows] == list(lengths)
    assert [float(r["b_return"]) for r in rows] == list(lengths) and {r["a_return"] for r in rows} == {"0.0"}
    assert [r["a_length"] for r in rows] == [r["b_length"] for r in rows]
    # worst:1 is the episode where B - A is lowest: the shortest (first of them)
    worst = int(np.argmin(lengths))
    videos = sorted(p.name for p in (out / "videos").glob("*.mp4"))
    assert videos == [f"worst-{worst}.mp4"]
    info = probe_video(out / "videos" / videos[0])
    rate, held = video_timing(int(lengths[worst]) + 1, 10.0, MIN_VIDEO_SECONDS)  # short episodes hold their end
    assert info.num_frames == int(lengths[worst]) + 1 + held and info.fps == pytest.approx(rate, rel=1e-3)
    assert info.num_frames / info.fps >= MIN_VIDEO_SECONDS - 1e-6


def test_heatmap_difference_exact_on_probe(probe_agents, tmp_path):
    """A's failures find the object at (L - 1, 0), B's at (L - 1, L - 1): the difference is exact."""
    result = compare(a=probe_agents["zeros"], b=probe_agents["ones"], episodes=24, num_envs=4, seed=2,
                     heatmap=True, objects="_envs:probe_objects", videos="none", out=tmp_path, progress=False)
    lost = [length for length, lose in probe_episodes(24, seed=2) if lose]
    assert 0 < len(lost) < 24
    want_a, want_b = np.zeros((1, 16, 16), np.int64), np.zeros((1, 16, 16), np.int64)
    for length in lost:
        want_a[0, length - 1, 0] += 1
        want_b[0, length - 1, length - 1] += 1
    with np.load(result.heatmap_npz) as z:
        assert list(z["object_names"]) == ["obj"]
        assert np.array_equal(z["counts_a"], want_a) and np.array_equal(z["counts_b"], want_b)
        assert int(z["failures_a"]) == int(z["failures_b"]) == len(lost)
        assert np.array_equal(z["diff"], want_b / len(lost) - want_a / len(lost))
        assert z["diff"][0, 2, 2] > 0 and z["diff"][0, 2, 0] < 0  # length-3 losses: B at (2, 2), A at (2, 0)
    assert result.heatmap_png.stat().st_size > 1000
    assert result.videos == ()


def test_same_agent_against_itself_is_identical_on_probe(probe_agents, tmp_path):
    result = compare(a=probe_agents["linear"], b=probe_agents["linear"], episodes=30, num_envs=4, seed=1,
                     videos="first:1", out=tmp_path, progress=False)
    c = result.comparison
    assert c["return_diff"] == {"mean": 0.0, "median": 0.0, "ci95": [0.0, 0.0]}
    assert c["prob_improvement"] == 0.5
    assert set(c["diagnostics_diff"].values()) == {0.0}
    rows = read_csv(tmp_path / "episodes.csv")
    assert len({r["a_return"] for r in rows}) > 1  # a sampling agent: returns vary over episodes...
    for r in rows:  # ...and each is the same for A and B
        assert all(r[f"a_{k}"] == r[f"b_{k}"] for k in ("return", "length", "failures", "mean_entropy"))
    # the report page shows both agents, each with its own video and timeline
    page = (tmp_path / "report.html").read_text()
    assert page.count("A: ") >= 1 and page.count("B: ") >= 1
    assert "videos/a/first-0-episode-0.mp4" in page and "videos/b/first-0-episode-0.mp4" in page
    assert str(tmp_path) not in page  # paths relative to the page: the folder can be moved or zipped
    # the side-by-side video: both halves show the same episode, frame for frame
    (video,) = result.videos
    info = probe_video(video)
    single = probe_video(tmp_path / "videos" / "a" / "first-0-episode-0.mp4")
    n = int(rows[0]["a_length"]) + 1
    _, held = video_timing(n, 10.0, MIN_VIDEO_SECONDS)  # a short pair is held at its end so it lasts long enough
    assert single.num_frames == n and info.num_frames == n + held
    assert info.width >= 2 * single.width + GAP
    for frame in read_video(video):
        left = frame[HEADER : HEADER + single.height, : single.width].astype(int)
        right = frame[HEADER : HEADER + single.height, single.width + GAP : 2 * single.width + GAP].astype(int)
        assert np.abs(left - right).mean() < 1.5


def test_same_agent_against_itself_is_identical_on_minatar(tmp_path):
    agent = SAMPLES / "minatar_breakout_ppo.pt2"
    result = compare(a=agent, b=agent, episodes=6, num_envs=3, videos="none", out=tmp_path, progress=False)
    c = result.comparison
    assert c["return_diff"] == {"mean": 0.0, "median": 0.0, "ci95": [0.0, 0.0]}
    assert c["prob_improvement"] == 0.5 and c["iqm"]["diff"] == {"value": 0.0, "ci95": [0.0, 0.0]}
    assert c["a"]["returns"]["std"] > 0  # sampled actions: the episodes differ from each other
    assert set(c["diagnostics_diff"].values()) == {0.0}


def _solid_video(path: Path, colors) -> Path:
    with VideoWriter(path, 10, (32, 32)) as w:
        for c in colors:
            w.write(np.full((32, 32, 3), c, np.uint8))
    return path


def test_side_by_side_holds_the_shorter_episode_marked_ended(tmp_path):
    a = _solid_video(tmp_path / "a.mp4", [(200, 0, 0)] * 3)
    b = _solid_video(tmp_path / "b.mp4", [(0, 200, 0), (0, 0, 200), (0, 200, 0), (0, 0, 200), (0, 200, 0)])
    path, n = side_by_side(a, b, tmp_path / "ab.mp4", fps=10, labels=("A", "B"))
    assert n == 5 and probe_video(path).num_frames == 5
    frames = list(read_video(path))
    green, blue = np.array([0, 200, 0]), np.array([0, 0, 200])
    for t, frame in enumerate(frames):
        left = frame[HEADER + 2 : HEADER + 30, 2:30].reshape(-1, 3).astype(int)
        right = frame[HEADER + 2 : HEADER + 30, 32 + GAP + 2 : 64 + GAP - 2].reshape(-1, 3).astype(int)
        assert np.abs(np.median(right, 0) - (green if t % 2 == 0 else blue)).max() < 12  # B plays on
        red = np.median(left, 0)[0]
        assert (red > 185) if t < 3 else (60 < red < 100)  # A: held from frame 3 on, dimmed to 2/5
    held = frames[4][HEADER : HEADER + 32, :32].astype(int)
    assert (held.max(axis=2) > 150).sum() > 5  # the "ended" text over the held frame


def test_checkpoints_for_different_envs_are_a_usage_error(probe_agents, minatar_ckpt, tmp_path, capsys):
    code = main(["compare", str(probe_agents["zeros"]), str(minatar_ckpt), "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "'rlviz-probe/Steer-v0' and 'MinAtar/Breakout-v1'" in err and "--env" in err
    assert "Traceback" not in err and not (tmp_path / "comparison.json").exists()


def test_compare_config_shares_render_options():
    render = {o.name: o for o in cli_options(RenderConfig)}
    opts = {o.name: o for o in cli_options(CompareConfig)}
    assert [o.name for o in cli_options(CompareConfig)][:2] == ["a", "b"]
    per_agent = {name for pair in COMPARE_PER_AGENT.values() for name in pair}
    assert set(opts) == {*per_agent, *COMPARE_SHARED, *COMPARE_ONLY} and set(COMPARE_SHARED) <= set(render)
    for name in COMPARE_SHARED:
        same = ("flag", "kind", "choices", "metavar")
        assert [getattr(opts[name], k) for k in same] == [getattr(render[name], k) for k in same]
    assert opts["out"].default == "rlviz-compare"
    with pytest.raises(UsageError, match="--episodes"):
        CompareConfig("a.pt2", "b.pt2", episodes=0)
    c = CompareConfig("a.pt2", "b.pt2", saliency="none", gamma="0.5")
    assert c.saliency is None and c.gamma == 0.5 and c.render_config("b").checkpoint == "b.pt2"
    c = CompareConfig("a.zip", "b.zip", vecnormalize_b="b.pkl")
    assert c.render_config("a").vecnormalize is None and c.render_config("b").vecnormalize == "b.pkl"
    assert opts["vecnormalize_a"].flag == "--vecnormalize-a" and opts["vecnormalize_b"].flag == "--vecnormalize-b"
