"""What a killed process leaves behind (#60 item 9): a SIGKILLed ``rlviz render`` leaves its staging folder beside
``--out``; the next run into that ``--out`` removes it (its process is gone) and leaves a live run's alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlviz.cli import main
from rlviz.sources.pt2.saving import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def _agent(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "agent.pt2"
    save_checkpoint(path, torch.nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    return path


def test_a_killed_renders_staging_folder_is_removed_by_the_next_run_and_a_live_ones_is_kept(tmp_path):
    agent, out = _agent(tmp_path), tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "rlviz", "render", str(agent), "--episodes", "100000",
                             "--videos", "none", "--out", str(out), "--no-progress"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    staging = tmp_path / f".out.{proc.pid}.partial"
    deadline = time.monotonic() + 120
    while not staging.is_dir():
        assert time.monotonic() < deadline and proc.poll() is None, "the render never made its staging folder"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert staging.is_dir()  # what a SIGKILL leaves
    live = tmp_path / f".out.{os.getppid()}.partial"  # a live process's (this test's parent: never removed)
    live.mkdir()
    assert main(["render", str(agent), "--episodes", "2", "--videos", "none", "--out", str(out),
                 "--no-progress"]) == 0
    assert not staging.exists() and live.is_dir()
    assert (out / "episodes.csv").is_file() and (out / "rlviz-run.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")) == [live.name]


def test_a_single_envs_annotated_state_of_several_rows_is_refused_as_the_vector_recorder_refuses_it(tmp_path):
    import gymnasium as gym
    import pytest

    from rlviz import RecordEpisode
    from rlviz.errors import UsageError

    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True)
    env.reset(seed=0)
    try:
        for bad in (torch.zeros(3, 64), torch.zeros(1, 2, 64), (torch.zeros(2, 8), torch.zeros(2, 8))):
            with pytest.raises(UsageError, match=r"for one env; expected one row: \[H\], \[1, H\]"):
                env.annotate(logits=[0.0, 0.0], value=0.0, state=bad)
        for good in (torch.zeros(64), torch.zeros(1, 64), torch.zeros(2, 1, 64)):  # (layers, 1, H): nn.LSTM's
            env.annotate(logits=[0.0, 0.0], value=0.0, state=good)
    finally:
        env.close()


_LOOP = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
from _marl_envs import Tag
from rlviz.record.agents.pettingzoo import RecordParallelEpisode


def policy(obs):  # every agent's numbers: logits from its pixels
    x = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1).mean(axis=1) / 255
    return np.stack([x, 1 - x, 0 * x], axis=1), x


env = RecordParallelEpisode(Tag(n=2, leave=None, length=10**6), {out!r}, episode_trigger=lambda k: True,
                            policies=policy)
obs, _ = env.reset(seed=0)
for t in range({steps}):
    obs, *_ = env.step({{a: t % 3 for a in obs}})
    if t == 5:
        print("spooling", flush=True)
{end}
"""


def test_a_killed_multi_agent_loops_spools_are_removed_by_the_next_multi_agent_recorder(tmp_path):
    """A SIGKILLed RecordParallelEpisode loop leaves its episode's spools in TMPDIR; the next PettingZoo recorder
    (in another process) removes those of the dead process, as the single-agent recorders do, and keeps a live
    process's."""
    spools = tmp_path / "tmp"
    spools.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(spools)}
    tests = str(ROOT / "tests")
    loop = _LOOP.format(tests=tests, out=str(tmp_path / "a"), steps=10**6, end="")
    proc = subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout.readline().strip() == "spooling", proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    left = sorted(p.name for p in spools.iterdir())
    assert left and all(name.startswith(f"rlviz-rec-{proc.pid}-") for name in left), left  # named for their process
    live = spools / f"rlviz-rec-{os.getpid()}-keep"  # this (live) process's
    live.mkdir()
    done = subprocess.run([sys.executable, "-c", _LOOP.format(tests=tests, out=str(tmp_path / "b"), steps=3,
                                                               end="env.close()")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in spools.iterdir()) == [live.name]


def test_a_wide_memory_is_projected_without_a_units_sized_float64_copy_and_its_components_are_bounded():
    """#60 item 10: a 100,000-unit state made a 46 MB .npz and 1.6 GB RSS (the SVD's D x T float64 and the 256 x D
    components). The projection comes from the T x T Gram matrix; the components are kept up to
    MAX_SAVED_COMPONENTS numbers. Checked exactly: with T <= 256 the projection loses nothing, so coordinates times
    components give the centred memory back."""
    import dataclasses

    import numpy as np

    from rlviz.episode.trace import EpisodeInternals
    from rlviz.record.memory import MAX_SAVED_COMPONENTS, memory_arrays

    empty = EpisodeInternals(**{f.name: None for f in dataclasses.fields(EpisodeInternals)})
    rng = np.random.default_rng(0)
    m = rng.standard_normal((40, 3000)).astype(np.float32)
    out = memory_arrays(dataclasses.replace(empty, memory=m, memory_kind="gru"))
    assert str(out["memory_projection"]) == "pca" and out["memory"].shape == (40, 40)
    back = out["memory"].astype(np.float64) @ out["memory_components"].astype(np.float64)
    centred = m - m.mean(axis=0)
    assert np.abs(back - centred).max() < 0.02 * np.abs(centred).max()  # (float16 storage)
    wide = rng.standard_normal((300, MAX_SAVED_COMPONENTS // 256 + 1)).astype(np.float32)
    out = memory_arrays(dataclasses.replace(empty, memory=wide, memory_kind="gru"))
    assert out["memory"].shape == (300, 256) and "memory_components" not in out
    assert sum(v.nbytes for v in out.values()) < 1 << 20


def _c4_checkpoint(path):
    import torch

    class C4(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(84, 16), torch.nn.Tanh())
            self.actor, self.critic = torch.nn.Linear(16, 7), torch.nn.Linear(16, 1)

        def forward(self, obs):
            h = self.body(obs)
            return self.actor(h), self.critic(h).squeeze(-1)

    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    return save_checkpoint(path, C4(), env="connect_four_v3")


def test_a_connect_four_pt2_makes_a_video_and_records_with_record_aec_episode(tmp_path):
    pytest.importorskip("pettingzoo.classic")
    from rlviz.jobs.render import render
    from rlviz.media import read_video
    from rlviz.sources import load_agent

    ckpt = _c4_checkpoint(tmp_path / "c4.pt2")
    out = tmp_path / "run"
    render(checkpoint=str(ckpt), episodes=2, videos="first:1", out=str(out))
    videos = sorted(out.rglob("*.mp4"))
    assert videos and sum(1 for _ in read_video(videos[0])) > 1  # decodes

    from pettingzoo.classic import connect_four_v3

    from rlviz.record import RecordOptions
    from rlviz.record.agents.pettingzoo import RecordAECEpisode

    policy = load_agent(ckpt).policy
    env = RecordAECEpisode(connect_four_v3.env(render_mode="rgb_array"), tmp_path / "aec",
                           episode_trigger=lambda k: True, policies=policy,
                           options=RecordOptions(background=False))
    env.reset(seed=0)
    for _agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else int(np.flatnonzero(obs["action_mask"])[0]))
    env.close()
    made = sorted((tmp_path / "aec").glob("*.mp4"))
    assert made and sum(1 for _ in read_video(made[0])) > 1
