"""`rlviz render`: the whole job end to end, its outputs read back, and its errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlviz.cli import main
from rlviz.config import parse_video_spec
from rlviz.draw.video import video_timing
from rlviz.jobs.videos import MIN_VIDEO_SECONDS, select_episodes
from rlviz.media.video import probe_video


def test_render_minatar_writes_every_output(minatar_ckpt, tmp_path, capsys):
    out = tmp_path / "out"
    code = main([
        "render", str(minatar_ckpt), "--episodes", "12", "--num-envs", "4", "--heatmap",
        "--videos", "first:1,worst:1", "--out", str(out), "--no-progress", "--saliency", "gradient",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "return" in printed.lower() and str(out) in printed

    summary = json.loads((out / "summary.json").read_text())
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert len(rows) == 12
    returns = np.array([float(r["return"]) for r in rows])
    assert summary["returns"]["mean"] == pytest.approx(returns.mean())
    assert summary["returns"]["min"] == pytest.approx(returns.min())

    # MinAtar Breakout ends at the first missed ball: one failure per terminated episode, each a ball position
    heat = np.load(out / "heatmap.npz")
    failures = sum(int(r["failures"]) for r in rows)
    assert failures == sum(r["terminated"] == "True" for r in rows) > 0
    assert int(heat["failures"]) == failures and int(heat["episodes"]) == 12
    assert (out / "heatmap.png").stat().st_size > 1000

    videos = sorted((out / "videos").glob("*.mp4"))
    worst = int(np.argmin(returns))
    expected = {"first-0-episode-0.mp4"} | ({f"worst-{worst}-episode-0.mp4"} if worst != 0 else set())
    assert {v.name for v in videos} == expected
    for v in videos:
        idx = int(v.name.split("-")[1])
        info = probe_video(v)
        assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
        T = int(rows[idx]["length"])  # the replay is the rolled-out episode; short ones last 2 s (MinAtar: 30 fps)
        rate, held = video_timing(T + 1, 30.0, MIN_VIDEO_SECONDS)
        assert info.num_frames == T + 1 + held and info.fps == pytest.approx(rate, rel=1e-3)
        assert float(np.load(v.with_suffix(".npz"))["fps"]) == pytest.approx(rate)
        assert list(np.load(v.with_suffix(".npz"))["action_names"]) == ["NOOP", "LEFT", "RIGHT"]
    assert not [p for p in out.rglob("*") if ".partial" in p.name]


def test_video_spec_parsing_and_selection():
    assert parse_video_spec("first:1, worst:2,best") == [("first", 1), ("worst", 2), ("best", 1)]
    assert parse_video_spec("none") == []
    returns = np.array([3.0, 1.0, 5.0, 2.0, 4.0])
    chosen = select_episodes(returns, [("worst", 2), ("best", 1), ("median", 1), ("first", 2)])
    # median is index 0 (return 3); first:2 adds nothing new: episodes 0 and 1 are already listed
    assert chosen == [("worst", 1), ("worst", 3), ("best", 2), ("median", 0)]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["render"], 2, "checkpoint"),
        (["render", "x.pt2", "--episodes", "0"], 2, "positive whole number"),
        (["render", "x.pt2", "--videos", "loudest:1"], 2, "not a selection"),
        (["render", "MISSING.pt2"], 1, "MISSING.pt2"),
    ],
)
def test_usage_and_failure_exit_codes(tmp_path, monkeypatch, capsys, args, code, message):
    monkeypatch.chdir(tmp_path)
    try:
        got = main(args)
    except SystemExit as exc:  # argparse's own usage errors
        got = exc.code
    err = capsys.readouterr().err
    assert got == code, err
    assert message in err
    assert "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1


def test_python_dash_m_runs_the_cli(tmp_path):
    """The one subprocess test: ``python -m rlviz`` is wired to the same main()."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlviz", "render", "MISSING.pt2"], cwd=tmp_path, capture_output=True, text=True,
        env=env, timeout=120,
    )
    assert proc.returncode == 1 and "MISSING.pt2" in proc.stderr and "Traceback" not in proc.stderr
    version = subprocess.run([sys.executable, "-m", "rlviz", "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("rlviz ")


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", b"\x89PNG\r\n\x1a\n" + b"\0" * 64])
def test_bad_checkpoint_files_exit_1_with_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(content)
    assert main(["render", str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bad.pt2" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "o" / "summary.json").exists()


def test_truncated_checkpoint_exits_1(minatar_ckpt, tmp_path):
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(minatar_ckpt.read_bytes()[: minatar_ckpt.stat().st_size // 2])
    assert main(["render", str(cut), "--out", str(tmp_path / "o")]) == 1


def test_render_an_sb3_zip_records_its_probabilities_and_values(ppo_zip, tmp_path):
    model, path = ppo_zip
    out = tmp_path / "out"
    assert main(["render", str(path), "--env", "CartPole-v1", "--episodes", "3", "--num-envs", "3",
                 "--videos", "first:1", "--out", str(out), "--no-progress"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    info = probe_video(video)
    held = video_timing(len(data["actions"]) + 1, 50.0, MIN_VIDEO_SECONDS)[1]  # CartPole: 50 fps
    assert (info.codec, info.num_frames) == ("h264", len(data["actions"]) + 1 + held)
    # the recorded panel numbers are SB3's own: replay the observations through model.policy
    import gymnasium as gym
    import torch

    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=int(list(csv.DictReader((out / "episodes.csv").open()))[0]["seed"]))
    observations = [obs]
    for a in data["actions"]:
        obs, *_ = env.step(int(a))
        observations.append(obs)
    x = torch.as_tensor(np.stack(observations))
    with torch.no_grad():
        probs = model.policy.get_distribution(x).distribution.probs.numpy()
        values = model.policy.predict_values(x)[:, 0].numpy()
    np.testing.assert_allclose(data["probs"], probs, atol=1e-5)
    np.testing.assert_allclose(data["value"], values, rtol=1e-5, atol=1e-5)
