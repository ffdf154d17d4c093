"""RecordEpisode: alignment of frames/observations/actions, panel numbers, videos, errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlviz import TorchPolicy
from rlviz.errors import EnvError, UsageError
from rlviz.media.video import probe_video, read_video
from rlviz.record import RecordEpisode, RecordOptions, run_episode

N_STEPS = 12
INTENSITY = 16  # frame t is a flat image of value INTENSITY * t (capped)


class CounterEnv(gym.Env):
    """Deterministic: obs_t = (t, 1); frame_t is flat grey INTENSITY*t; reward = action; ends at N_STEPS."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode="rgb_array", n_steps=N_STEPS, truncate=False, frame_hw=(32, 48)):
        self.render_mode = render_mode
        self.n_steps, self.truncate, self.frame_hw = n_steps, truncate, frame_hw
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0

    def _obs(self):
        return np.array([self.t, 1.0], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.n_steps
        return self._obs(), float(action), done and not self.truncate, done and self.truncate, {}

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        return np.full(self.frame_hw + (3,), min(255, INTENSITY * self.t), dtype=np.uint8)


W = torch.tensor([[0.0, 0.0], [0.1, 0.0], [-0.2, 0.5]])
V = torch.tensor([0.5, 1.0])


class Linear(torch.nn.Module):
    def forward(self, x):
        return x @ W.T, x @ V


def expected_probs(t: int) -> np.ndarray:
    return torch.softmax(torch.tensor([t, 1.0]) @ W.T, -1).numpy()


def make(tmp_path, **kw):
    env = CounterEnv(**{k: kw.pop(k) for k in list(kw) if k in ("truncate", "n_steps", "frame_hw")})
    options = RecordOptions(**{k: kw.pop(k) for k in list(kw) if k in RecordOptions.__dataclass_fields__})
    return RecordEpisode(env, tmp_path, TorchPolicy(Linear(), device="cpu"), options=options, **kw)


def test_frames_observations_actions_are_aligned(tmp_path):
    env = make(tmp_path, gamma=0.5)
    env.reset(seed=3)
    actions = [t % 3 for t in range(N_STEPS)]
    for a in actions:  # the user's own loop picks the actions
        env.step(a)
    path = env.last_video_path
    assert path == tmp_path / "rl-video-episode-0.mp4" and path.exists()

    info = probe_video(path)
    assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
    assert info.num_frames == N_STEPS + 1
    assert info.width % 16 == 0 and info.height % 16 == 0
    assert info.fps == pytest.approx(10)

    internals = env.last_internals
    # frame t is the frame on which action t was chosen: internals[t] come from obs_t = (t, 1)
    for t in range(N_STEPS + 1):
        np.testing.assert_allclose(internals.probs[t], expected_probs(t), rtol=1e-5, atol=1e-6)
        assert internals.value[t] == pytest.approx(0.5 * t + 1.0)
    rewards = np.array(actions, dtype=np.float64)
    rtg = [sum(rewards[k] * 0.5 ** (k - t) for k in range(t, N_STEPS)) for t in range(N_STEPS + 1)]
    np.testing.assert_allclose(internals.returns_to_go, rtg, rtol=1e-5)
    h = -(expected_probs(4) * np.log(expected_probs(4))).sum() / np.log(3)
    assert internals.entropy[4] == pytest.approx(h, rel=1e-5)

    # the decoded video's game area at frame t has intensity INTENSITY * t (top-left corner pixel block)
    for t, frame in enumerate(read_video(path)):
        assert abs(float(frame[4:12, 4:12].mean()) - INTENSITY * t) < 4, t

    data = np.load(path.with_suffix(".npz"))
    np.testing.assert_array_equal(data["actions"], actions)
    np.testing.assert_allclose(data["probs"], internals.probs)
    assert env.last_result.episode_return == sum(actions) and env.last_result.length == N_STEPS


def test_run_episode_with_the_wrappers_policy_and_seeded_rng(tmp_path):
    env = make(tmp_path, name_prefix="eval")
    r1 = run_episode(env, seed=0, rng=7)
    r2 = run_episode(env, seed=0, rng=7)
    assert r1.length == N_STEPS and r1.terminated and not r1.truncated
    assert r1.episode_return == r2.episode_return  # same rng seed -> same actions
    a1 = np.load(tmp_path / "eval-episode-0.npz")["actions"]
    a2 = np.load(tmp_path / "eval-episode-1.npz")["actions"]
    np.testing.assert_array_equal(a1, a2)
    greedy = run_episode(env, greedy=True)
    a3 = np.load(tmp_path / "eval-episode-2.npz")["actions"]
    np.testing.assert_array_equal(a3, [int(np.argmax(expected_probs(t))) for t in range(N_STEPS)])
    assert greedy.video_path == tmp_path / "eval-episode-2.mp4"


def test_truncated_episode_bootstraps_return_to_go_with_last_value(tmp_path):
    env = make(tmp_path, truncate=True, gamma=0.9)
    env.reset()
    for _ in range(N_STEPS):
        env.step(0)
    internals = env.last_internals
    assert env.last_result.truncated
    assert internals.returns_to_go[-1] == pytest.approx(0.5 * N_STEPS + 1.0)
    assert internals.returns_to_go[0] == pytest.approx(0.9**N_STEPS * (0.5 * N_STEPS + 1.0), rel=1e-5)


def test_episode_trigger_reset_midway_and_close(tmp_path):
    env = make(tmp_path, episode_trigger=lambda k: k % 2 == 1)
    run_episode(env, rng=0)  # episode 0: not recorded
    assert not (tmp_path / "rl-video-episode-0.mp4").exists()
    env.reset()  # episode 1: recorded, cut short by the next reset after 3 steps
    for _ in range(3):
        env.step(1)
    env.reset()  # episode 2: not recorded
    env.wait()  # panel videos are drawn on the recorder's thread: complete after wait() (or close(), last_*)
    assert probe_video(tmp_path / "rl-video-episode-1.mp4").num_frames == 4
    run_episode(env, rng=0)  # episode 3 recorded, finished
    env.reset()  # episode 4: not recorded
    env.close()
    assert sorted(p.name for p in tmp_path.glob("*.mp4")) == ["rl-video-episode-1.mp4", "rl-video-episode-3.mp4"]
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_close_mid_episode_writes_what_was_recorded(tmp_path):
    env = make(tmp_path)
    env.reset()
    for _ in range(5):
        env.step(2)
    env.close()
    assert probe_video(tmp_path / "rl-video-episode-0.mp4").num_frames == 6


def test_errors_say_how_to_fix(tmp_path):
    with pytest.raises(EnvError, match="render_mode='rgb_array'"):
        RecordEpisode(CounterEnv(render_mode=None), tmp_path, TorchPolicy(Linear()))
    with pytest.raises(UsageError, match="torch.nn.Module or a callable"):
        RecordEpisode(CounterEnv(), tmp_path, policy=42)
    with pytest.raises(UsageError, match="saliency"):
        make(tmp_path, saliency="gradcam")
    box_env = CounterEnv()
    box_env.action_space = gym.spaces.Box(-1, 1, (2,))
    with pytest.raises(UsageError, match="action_space=env.action_space"):
        RecordEpisode(box_env, tmp_path, TorchPolicy(Linear()))
    with pytest.raises(UsageError, match="episode_trigger=") as info:  # RecordVideo's third positional argument
        RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, lambda k: k % 10 == 0)
    assert "2 actions" in str(info.value)
    with pytest.raises(UsageError, match="one episode"):
        RecordEpisode(CounterEnv(), tmp_path, TorchPolicy(Linear()), video_length=10)
    with pytest.raises(UsageError, match="3 actions|Discrete\\(3\\)"):
        RecordEpisode(CounterEnv(), tmp_path, TorchPolicy(Linear(), num_actions=4))


def test_odd_frame_sizes_give_browser_playable_video(tmp_path):
    env = make(tmp_path, frame_hw=(37, 21))
    run_episode(env, rng=1)
    info = probe_video(env.last_video_path)
    assert info.pix_fmt == "yuv420p" and info.width % 16 == 0 and info.height % 16 == 0


def test_decoded_video_shows_the_chosen_actions_probability_at_its_frame(tmp_path):
    """End to end: in the decoded MP4, frame t's highlighted bar is action t's, as long as p(action t | obs t)."""
    from rlviz.draw.compose import COLORS, Compositor
    from rlviz.episode import EpisodeTrace

    env = make(tmp_path)
    env.reset()
    actions = [(t * 2) % 3 for t in range(N_STEPS)]
    for a in actions:
        env.step(a)
    internals = env.last_internals
    shape_only = EpisodeTrace(np.zeros((N_STEPS + 1, 32, 48, 3), np.uint8), np.zeros((N_STEPS + 1, 2), np.float32),
                              np.array(actions), np.zeros(N_STEPS, np.float32), None, True, False,
                              env.action_names, 0, None, 10.0, "counter")
    L = Compositor(shape_only, internals).layout
    chosen = np.array(COLORS["chosen"], np.int16)
    for t, frame in enumerate(read_video(env.last_video_path)):
        if t == N_STEPS:
            break
        for a in range(3):
            row = frame[L.bar_rows[a] + L.bar_h // 2, L.bar_x0 : L.bar_x0 + L.bar_len].astype(np.int16)
            lit = np.abs(row - chosen).max(-1) < 48  # the highlight colour, through lossy H.264
            if a == actions[t]:
                expected = expected_probs(t)[a] * L.bar_len
                assert abs(int(lit.sum()) - expected) <= 3, (t, a, int(lit.sum()), expected)
            else:
                assert lit.sum() <= 2, (t, a)


def test_no_policy_records_every_frame_as_rendered(tmp_path, no_moviepy):
    """The RecordVideo drop-in on CartPole: steps + 1 frames (the reset frame, then one per step), each the
    env's render (padded 600x400 -> 608x400), decoded back; no per-step data without internals."""
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path)
    env.reset(seed=5)
    rendered = [env.unwrapped.render()]
    steps = 0
    for _ in range(15):
        _, _, term, trunc, _ = env.step(steps % 2)
        rendered.append(env.unwrapped.render())
        steps += 1
        if term or trunc:
            break
    assert env.recording
    env.close()
    path = tmp_path / "rl-video-episode-0.mp4"
    info = probe_video(path)
    assert (info.codec, info.pix_fmt, info.width, info.height) == ("h264", "yuv420p", 608, 400)
    assert info.num_frames == steps + 1 and env.last_video_path == path
    for got, want in zip(read_video(path), rendered):
        assert np.abs(got[:, :600].astype(np.int16) - want).mean() < 2.0  # lossy H.264, same picture
        assert got[:, 600:].max() < 24  # black padding
    assert not list(tmp_path.glob("*.npz")) and not list(tmp_path.glob(".*"))


def test_no_policy_strip_prints_under_the_game(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, options=RecordOptions(strip=True))
    env.reset(seed=0)
    for _ in range(3):
        env.step(0)
    env.close()
    (frame, *_) = read_video(tmp_path / "rl-video-episode-0.mp4")
    assert frame.shape == (432, 608, 3)  # 400 + a 20-pixel strip, padded to 16
    assert frame[400:420, :200].max() > 150  # text on the strip
