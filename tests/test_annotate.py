"""``RecordEpisode.annotate``: a loop that already computed its logits/value hands them to the recorder, and
the video shows exactly those numbers (bars read back from the decoded MP4, numbers from the npz)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlviz import RecordEpisode, TorchPolicy, UsageError
from rlviz.draw.compose import COLORS, Compositor
from rlviz.episode import EpisodeTrace
from rlviz.media import probe_video, read_video

STEPS = 10


def logits_at(t: int) -> np.ndarray:
    return np.array([0.3 * t - 1.0, 1.0 - 0.2 * t], np.float32)


def softmax(x):
    z = np.exp(x - x.max())
    return z / z.sum()


def annotated_loop(env, steps: int = STEPS, seed: int = 0):
    env.reset(seed=seed)
    actions = []
    for t in range(steps):
        lg = logits_at(t)
        env.annotate(logits=lg, value=0.5 * t, q_taken=2.0 * t)
        a = int(lg.argmax())
        actions.append(a)
        env.step(a)
    env.finish_episode()
    return actions


def test_annotated_loop_video_shows_exactly_the_annotated_numbers(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path)
    actions = annotated_loop(env)
    path = env.last_video_path
    assert path.name == "rl-video-episode-0.mp4"
    data = np.load(path.with_suffix(".npz"))
    expected = np.array([logits_at(t) for t in range(STEPS)] + [logits_at(STEPS - 1)])  # frame T repeats the last
    np.testing.assert_array_equal(data["logits"], expected)
    np.testing.assert_allclose(data["probs"], np.array([softmax(x) for x in expected]), atol=1e-6)
    np.testing.assert_array_equal(data["value"], [0.5 * t for t in range(STEPS)] + [0.5 * (STEPS - 1)])
    np.testing.assert_array_equal(data["extra_q_taken"], [2.0 * t for t in range(STEPS)] + [2.0 * (STEPS - 1)])
    np.testing.assert_array_equal(data["actions"], actions)
    assert probe_video(path).num_frames == STEPS + 1

    shape_only = EpisodeTrace(np.zeros((STEPS + 1, 400, 600, 3), np.uint8), np.zeros((STEPS + 1, 4), np.float32),
                              np.array(actions), data["rewards"], None, False, True, env.action_names, 0, None, 50.0,
                              "CartPole-v1")
    comp = Compositor(shape_only, env.last_internals)
    L = comp.layout
    assert L.extras_plot is not None  # the user's own curve has a plot
    for t, frame in enumerate(read_video(path)):
        probs = softmax(expected[t])
        for a in range(2):
            row = frame[L.bar_rows[a] + L.bar_h // 2, L.bar_x0 : L.bar_x0 + L.bar_len].astype(np.int16)
            color = COLORS["chosen"] if t < STEPS and a == actions[t] else COLORS["bar"]
            lit = int((np.abs(row - np.array(color, np.int16)).max(-1) < 48).sum())
            assert abs(lit - probs[a] * L.bar_len) <= 3, (t, a, lit, probs[a] * L.bar_len)


def test_unannotated_episodes_record_frames_only(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path,
                        episode_trigger=lambda k: True)
    annotated_loop(env, 4)
    env.reset(seed=1)
    for _ in range(3):
        env.step(0)
    env.close()
    first, second = tmp_path / "rl-video-episode-0.mp4", tmp_path / "rl-video-episode-1.mp4"
    assert first.with_suffix(".npz").exists() and not second.with_suffix(".npz").exists()
    assert probe_video(first).width > 608  # game + panel
    info = probe_video(second)
    assert (info.width, info.height, info.num_frames) == (608, 400, 4)  # the game only, padded to 16


def test_annotations_add_extra_curves_to_a_policy(tmp_path):
    policy = TorchPolicy(lambda x: x[:, :2] * 0 + 1.0, kind="logits")
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, policy)
    env.reset(seed=0)
    for t in range(3):
        env.annotate(intrinsic=0.25 * t)
        env.step(0)
    env.finish_episode()
    data = np.load(env.last_video_path.with_suffix(".npz"))
    np.testing.assert_allclose(data["probs"], 0.5)  # the policy's numbers
    np.testing.assert_array_equal(data["extra_intrinsic"], [0.0, 0.25, 0.5, 0.5])


def test_annotate_errors_say_what_to_pass(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path)
    env.reset(seed=0)
    with pytest.raises(UsageError, match="scalars"):
        env.annotate(logits=[0.0, 1.0], q=[1.0, 2.0])
    with pytest.raises(UsageError, match="received 3 numbers; expected 2 numbers \\(one per action\\)"):
        env.annotate(logits=[0.0, 1.0, 2.0])
    env.step(0)  # nothing was stored by the refused calls: frames only
    env.close()
    assert not list(tmp_path.glob("*.npz")) and len(list(tmp_path.glob("*.mp4"))) == 1
    not_recorded = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "n",
                                 episode_trigger=lambda k: False)
    not_recorded.reset(seed=0)
    not_recorded.annotate(logits=[0.0, 1.0, 2.0])  # a no-op when the episode is not recorded
    not_recorded.step(0)
    not_recorded.close()
    assert not list((tmp_path / "n").glob("*"))
