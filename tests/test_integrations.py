"""Training-time hooks: log_episode for hand-written loops, RlvizCallback for Stable-Baselines3."""

from __future__ import annotations

import importlib
import io
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rlviz import TorchPolicy
from rlviz.errors import MissingDependencyError, UsageError
from rlviz.integrations import LogOptions, log_episode
from rlviz.media.video import probe_video
from rlviz.sinks import FolderSink

ENV_ID = "rlviz-test/DrawnCartPole-v1"
STEP = 300


class DrawnCartPole(CartPoleEnv):
    """CartPole whose rgb_array frame is drawn with numpy (gymnasium's renderer needs pygame):
    48x64, the cart a grey block at its position, the pole a red dot at its tip."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, render_mode=None):
        super().__init__(render_mode=None)
        self.render_mode = render_mode

    def render(self):
        f = np.full((48, 64, 3), 255, np.uint8)
        x, _, theta, _ = self.state
        cx = int(np.clip(32 + x / 2.4 * 28, 4, 59))
        f[36:42, cx - 4 : cx + 4] = 100
        tx, ty = int(np.clip(cx + 20 * np.sin(theta), 0, 63)), int(np.clip(36 - 20 * np.cos(theta), 0, 47))
        f[ty, tx] = (255, 0, 0)
        return f


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=DrawnCartPole, max_episode_steps=500)

# A poor linear actor-critic: pushes the way the pole falls, so episodes end in ~10 steps.
W = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, -1.0, -1.0]])
V = torch.tensor([0.5, 0.0, 2.0, 0.0])


class Linear(torch.nn.Module):
    def forward(self, x):
        return x @ W.T, x @ V


def greedy_episode(seed: int) -> tuple[float, int]:
    """The same episode played without rlviz: (return, length)."""
    env = gym.make(ENV_ID)
    obs, _ = env.reset(seed=seed)
    total, n, done = 0.0, 0, False
    while not done:
        action = int((torch.as_tensor(obs) @ W.T).argmax())
        obs, r, term, trunc, _ = env.step(action)
        total, n, done = total + float(r), n + 1, term or trunc
    env.close()
    return total, n


def _accumulator(log_dir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_log_episode_records_and_logs_to_every_sink(tmp_path):
    from PIL import Image

    from rlviz.sinks import TensorBoardSink

    expected_return, expected_len = greedy_episode(seed=3)
    assert 3 < expected_len < 40
    policy = TorchPolicy(Linear(), device="cpu")
    with FolderSink(tmp_path / "out") as folder, TensorBoardSink(tmp_path / "tb") as tb:
        result = log_episode(ENV_ID, policy, [folder, tb], STEP, seed=3, options=LogOptions(greedy=True))
    assert (result.episode_return, result.length, result.terminated) == (expected_return, expected_len, True)
    assert result.video_path is None  # recorded to a temporary folder, removed once the sinks had it

    video = tmp_path / "out" / "eval" / "episode-step300.mp4"
    info = probe_video(video)
    assert info.codec == "h264" and info.num_frames == expected_len + 1 and info.fps == 50
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["eval/episode/return"] == expected_return and summary["eval/episode/length"] == expected_len
    assert 0.0 <= summary["eval/episode/entropy_mean"] <= 1.0 and "eval/episode/value_mean" in summary
    media = json.loads((tmp_path / "out" / "media.jsonl").read_text().splitlines()[0])
    assert media["caption"] == f"step 300: return {expected_return:.6g} in {expected_len} steps"

    acc = _accumulator(tmp_path / "tb")
    (img,) = acc.Images("eval/episode")
    assert img.step == STEP and Image.open(io.BytesIO(img.encoded_image_string)).n_frames > 1
    assert [(s.step, s.value) for s in acc.Scalars("eval/episode/length")] == [(STEP, expected_len)]


def test_log_episode_keeps_the_video_and_leaves_a_user_env_open(tmp_path):
    env = gym.make(ENV_ID, render_mode="rgb_array")
    result = log_episode(env, TorchPolicy(Linear(), device="cpu"), None, 7, seed=3, video_folder=tmp_path / "videos",
                         options=LogOptions(greedy=True, name="eval/ep", max_steps=2))
    assert result.video_path == tmp_path / "videos" / "eval_ep-step7-episode-0.mp4"
    assert result.length == 2 and result.truncated and probe_video(result.video_path).num_frames == 3
    assert not hasattr(env, "last_video_path")  # the caller's env was not wrapped for good ...
    env.reset(seed=0)  # ... nor closed
    env.step(0)
    env.close()
    with pytest.raises(UsageError, match="no sinks and no video_folder"):
        log_episode(ENV_ID, TorchPolicy(Linear(), device="cpu"), None, 0)
    with pytest.raises(UsageError, match="non-negative integer"):
        log_episode(ENV_ID, TorchPolicy(Linear(), device="cpu"), None, -1, video_folder=tmp_path)


def test_sb3_callback_logs_videos_to_sb3s_tensorboard_run(tmp_path):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from rlviz.integrations.sb3 import RlvizCallback

    model = PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=128, n_epochs=1, seed=0, device="cpu",
                tensorboard_log=str(tmp_path / "runs"), policy_kwargs={"net_arch": [16]})
    callback = RlvizCallback(ENV_ID, every_steps=1024, video_folder=tmp_path / "videos", seed=1,
                             options=LogOptions(greedy=True))
    model.learn(2048, callback=callback, tb_log_name="ppo")

    assert [step for step, _ in callback.results] == [1024, 2048]
    for step, result in callback.results:
        assert result.video_path == tmp_path / "videos" / f"eval_episode-step{step}-episode-0.mp4"
        assert probe_video(result.video_path).num_frames == result.length + 1
    (run_dir,) = (tmp_path / "runs").iterdir()
    acc = _accumulator(run_dir)
    assert [img.step for img in acc.Images("eval/episode")] == [1024, 2048]
    assert [(s.step, s.value) for s in acc.Scalars("eval/episode/return")] == [
        (step, np.float32(r.episode_return)) for step, r in callback.results]
    assert "train/loss" in acc.Tags()["scalars"]  # the same event file SB3 writes its own scalars to

    # the callback's policy is the model's network (shared weights): same logits as SB3's distribution
    obs = np.array([[0.01, -0.2, 0.03, 0.1]], np.float32)
    out = callback._policy.evaluate(obs)
    with torch.no_grad():
        dist = model.policy.get_distribution(torch.as_tensor(obs))
    np.testing.assert_allclose(out.probs, dist.distribution.probs.numpy(), rtol=1e-5)


def test_sb3_callback_needs_somewhere_to_log(tmp_path):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from rlviz.integrations.sb3 import RlvizCallback

    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, device="cpu")
    with pytest.raises(UsageError, match="nowhere to log"):
        model.learn(64, callback=RlvizCallback(ENV_ID, every_steps=32))
    with pytest.raises(UsageError, match="every_steps"):
        RlvizCallback(ENV_ID, every_steps=0)


def test_sb3_callback_names_its_extra_when_sb3_is_missing(monkeypatch):
    for mod in ["stable_baselines3", *[m for m in sys.modules if m.startswith("stable_baselines3.")]]:
        monkeypatch.setitem(sys.modules, mod, None)  # as if not installed
    monkeypatch.delitem(sys.modules, "rlviz.integrations.sb3", raising=False)
    with pytest.raises(MissingDependencyError, match=r"rlviz\[sb3\]"):
        importlib.import_module("rlviz.integrations.sb3")
    with pytest.raises(MissingDependencyError, match=r"rlviz\[sb3\]"):
        importlib.import_module("rlviz.integrations").RlvizCallback  # noqa: B018
