"""A recurrent policy's recorded episode: the .npz keeps memory_saliency [T+1, W] (equal to MemoryGradient on the
episode) and the memory (float16 units, its norm, change and saturation), and the video, decoded back, shows the
memory saliency strip under the frame: at the decision step, the cue step's cell lit, the others dark; a feed-forward
policy's video has no strip (its layout unchanged)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _memory_probe import CUE_ID, K, TinyMemory, play

from rlviz.draw.compose import ComposeOptions, Compositor
from rlviz.draw.panels_memory import MEMORY_COLOR
from rlviz.draw.style import COLORS
from rlviz.explain import MemoryGradient
from rlviz.media import read_video
from rlviz.record import RecordEpisode, RecordOptions, run_episode

W = 16


def _record(tmp_path, policy, seed=3, window=W, saliency="gradient"):
    env = RecordEpisode(gym.make(CUE_ID, render_mode="rgb_array"), tmp_path, policy,
                        options=RecordOptions(saliency=saliency, memory_window=window, background=False,
                                              compose_options=ComposeOptions(display_height=160)))
    result = run_episode(env, seed=seed, greedy=True)
    env.close()
    return result, np.load(result.video_path.with_suffix(".npz"))


def test_the_npz_keeps_the_memory_and_its_saliency(tmp_path):
    policy = TinyMemory("cue")
    result, data = _record(tmp_path, policy)
    obs, actions, ret = play(policy, 3)
    assert result.ret == ret == 1.0
    np.testing.assert_array_equal(data["actions"], actions)
    want = MemoryGradient(policy, window=W).attribute(obs, actions=np.append(actions, 0))
    assert data["memory_saliency"].dtype == np.float32 and data["memory_saliency"].shape == (K + 2, W)
    np.testing.assert_allclose(data["memory_saliency"], want, atol=1e-6)
    assert data["memory_saliency"][K, K] == pytest.approx(1.0, abs=1e-6)
    # the memory after each step: h_t = tanh(A h_{t-1} + B x_t), kept as float16 units (D = 2 <= 256)
    h, memory = np.zeros(2), []
    for x in obs:
        h = np.tanh(np.diag([1.5, 0.5]) @ h + np.array([[2.0, 0.0], [0.0, 0.3]]) @ x)
        memory.append(h)
    assert data["memory"].dtype == np.float16 and str(data["memory_projection"]) == "units"
    np.testing.assert_allclose(data["memory"], np.asarray(memory), atol=1e-3)
    np.testing.assert_allclose(data["memory_norm"], np.linalg.norm(memory, axis=1), atol=1e-5)
    assert data["memory_change"][0] == 0.0
    np.testing.assert_allclose(data["memory_change"][1:], np.linalg.norm(np.diff(memory, axis=0), axis=1), atol=1e-5)
    np.testing.assert_array_equal(data["memory_saturation"], (np.abs(np.asarray(memory)) > 0.95).mean(1))
    assert str(data["memory_kind"]) == "gru"


def test_no_saliency_keeps_the_memory_without_its_saliency(tmp_path):
    _, data = _record(tmp_path, TinyMemory("cue"), saliency=None)
    assert "memory" in data.files and "memory_saliency" not in data.files
    _, data = _record(tmp_path / "w0", TinyMemory("cue"), window=0)
    assert "memory" in data.files and "memory_saliency" not in data.files


def test_the_video_shows_the_strip_lit_on_the_cue_step(tmp_path):
    policy = TinyMemory("cue")
    result, data = _record(tmp_path, policy)
    frames = list(read_video(result.video_path))
    # rebuild the layout the recorder drew with, to know where the cells are
    from rlviz.episode.trace import EpisodeInternals

    internals = EpisodeInternals(data["logits"], data["probs"], data["value"], "actor_critic", entropy=data["entropy"],
                                 returns_to_go=data["returns_to_go"], gamma=0.99,
                                 memory=data["memory"].astype(np.float32), memory_saliency=data["memory_saliency"],
                                 memory_kind="gru", saliency=data["saliency"])
    from rlviz.episode.trace import EpisodeTrace

    trace = EpisodeTrace(frames=np.zeros((K + 2, 16, 16, 3), np.uint8), observations=np.zeros((K + 2, 2), np.float32),
                         actions=data["actions"], rewards=data["rewards"], lives=None, terminated=True,
                         truncated=False, action_names=("0", "1"), episode_id=0, seed=3, fps=4.0, env_id=CUE_ID)
    comp = Compositor(trace, internals, ComposeOptions(display_height=160))
    strip = comp.memory_strip
    assert strip is not None and frames[0].shape[:2] == (comp.size[1], comp.size[0])
    frame = frames[K].astype(np.int32)  # the decision step (one video frame per step at this length)
    _, y, _, h = strip.box

    def cell_colour(i):
        x0, x1 = strip.cell(i)
        return frame[y + 3 : y + h - 3, x0 + 3 : x1 - 3].reshape(-1, 3).mean(0)

    lit = cell_colour(W - 1 - K)  # observation t - K: the cue
    assert np.abs(lit - MEMORY_COLOR).max() < 24
    for i in range(W):
        if i != W - 1 - K:
            assert np.abs(cell_colour(i) - COLORS["track"]).max() < 24, i


def test_feed_forward_layout_has_no_memory_parts():
    from rlviz.episode.trace import EpisodeInternals, EpisodeTrace

    n = 5
    internals = EpisodeInternals(np.zeros((n, 2), np.float32), np.full((n, 2), 0.5, np.float32), None, "logits",
                                 entropy=np.ones(n, np.float32), returns_to_go=np.zeros(n, np.float32), gamma=0.99)
    trace = EpisodeTrace(frames=np.zeros((n, 16, 16, 3), np.uint8), observations=np.zeros((n, 2), np.float32),
                         actions=np.zeros(n - 1, np.int64), rewards=np.zeros(n - 1, np.float32), lives=None,
                         terminated=True, truncated=False, action_names=("0", "1"), episode_id=0, seed=0,
                         fps=4.0, env_id="x")
    comp = Compositor(trace, internals)
    assert comp.memory_strip is None and comp.memory_plot is None
    assert comp.layout.memory_strip is None and comp.layout.game[1] == (comp.size[1] - comp.layout.game[3]) // 2
