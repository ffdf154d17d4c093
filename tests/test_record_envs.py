"""RecordEpisode on real environments: CartPole and ALE Breakout with Atari preprocessing."""

from __future__ import annotations

import numpy as np
import torch

from rlviz import TorchPolicy
from rlviz.agent.models import NatureCNNAgent
from rlviz.envs import atari_recipe, make_env
from rlviz.media.video import probe_video
from rlviz.record import RecordEpisode, run_episode


def test_cartpole_logits_only_policy(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    env = RecordEpisode(make_env("CartPole-v1"), tmp_path, TorchPolicy(net, device="cpu"))
    result = run_episode(env, seed=0, rng=0)
    info = probe_video(result.video_path)
    assert (info.codec, info.pix_fmt, info.num_frames) == ("h264", "yuv420p", result.length + 1)
    assert info.width % 16 == 0 and info.height % 16 == 0 and info.height >= 400
    assert env.last_internals.kind == "logits" and env.last_internals.value is None
    assert env.fps == 50  # CartPole's render_fps


def test_breakout_atari_preprocessing_frame_stack_cnn(tmp_path):
    torch.manual_seed(0)
    env = make_env(atari_recipe("ALE/Breakout-v5"))
    policy = TorchPolicy(NatureCNNAgent(env.action_space.n), device="cpu")
    env = RecordEpisode(env, tmp_path, policy)
    result = run_episode(env, seed=1, rng=1, max_steps=60)
    assert result.length == 60
    info = probe_video(result.video_path)
    assert (info.codec, info.pix_fmt, info.num_frames) == ("h264", "yuv420p", 61)
    assert info.width % 16 == 0 and info.height % 16 == 0
    data = np.load(result.video_path.with_suffix(".npz"))
    assert list(data["action_names"]) == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    assert data["lives"][0] == 5 and data["probs"].shape == (61, 4)
    np.testing.assert_allclose(data["probs"].sum(-1), 1.0, rtol=1e-5)
