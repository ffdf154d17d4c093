"""Box, MultiDiscrete and MultiBinary actions: Gaussian, tanh-squashed and deterministic actors recorded on
Pendulum (panel pixels read back from the decoded MP4), multi-part discrete actions, numpy callables with
perturbation saliency, rollouts and ``rlviz render`` on a Box-action checkpoint."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlviz import CallablePolicy, RecordEpisode, TorchPolicy, UsageError, attribute, rollout, run_episode
from rlviz.agent.actions import squash_to_bounds
from rlviz.cli import main
from rlviz.draw.compose import COLORS, Compositor
from rlviz.episode import EpisodeTrace
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.rollouts.rollout import replay_episode
from rlviz.media import probe_video, read_video
from rlviz.record import RecordOptions

STEPS = 12


class GaussianActor(nn.Module):
    """Pendulum obs (cos, sin, thetadot) -> mean = 1.5 cos, std = 0.2 + 0.1 (sin + 1), value = thetadot."""

    def forward(self, x):
        return {"mean": 1.5 * x[:, :1], "std": 0.2 + 0.1 * (x[:, 1:2] + 1.0), "value": x[:, 2]}


def expected_mean_std(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = observations.astype(np.float64)
    return 1.5 * o[:, :1], 0.2 + 0.1 * (o[:, 1:2] + 1.0)


def play(env, steps: int, rng: np.random.Generator, policy=None, seed: int = 3):
    """Our own loop: actions from ``policy.act`` (or random), observations kept. Returns (obs [T+1], actions [T])."""
    obs, _ = env.reset(seed=seed)
    observations, actions = [obs], []
    for _ in range(steps):
        a = policy.act(obs[None], rng)[0][0] if policy is not None else env.action_space.sample()
        obs, *_ = env.step(a)
        observations.append(obs)
        actions.append(a)
    env.finish_episode()
    return np.array(observations), np.array(actions)


def _shape_only(data, frames_hw, names) -> EpisodeTrace:
    n = len(data["rewards"])
    return EpisodeTrace(np.zeros((n + 1, *frames_hw, 3), np.uint8), np.zeros((n + 1, 3), np.float32),
                        data["actions"], data["rewards"], None, False, True, tuple(names), 0, None, 30.0, "p")


def _row(frame, layout, d=0, where="middle"):
    """A line of pixels through row d ("top": the band and mean line; "bottom": where the action mark is), the
    whole canvas wide (indices are canvas columns); only the track is kept, the rest set to black."""
    dy = {"top": 3, "middle": layout.bar_h // 2, "bottom": layout.bar_h - 3}[where]
    row = frame[layout.bar_rows[d] + dy].astype(np.int16)
    keep = np.zeros(len(row), bool)
    keep[layout.bar_x0 : layout.bar_x0 + layout.bar_len] = True
    return np.where(keep[:, None], row, 0)


def _near(row, color, tol):
    return np.flatnonzero(np.abs(row - np.array(color, np.int16)).max(-1) < tol)


def test_pendulum_gaussian_panel_band_mean_and_action_at_their_pixels(tmp_path):
    env = RecordEpisode(gym.make("Pendulum-v1", render_mode="rgb_array"), tmp_path, GaussianActor())
    policy = env.policy
    assert policy.action_spec.kind == "box" and policy.kind == "actor_critic"
    observations, actions = play(env, STEPS, np.random.default_rng(0), policy)
    data = np.load(env.last_video_path.with_suffix(".npz"))
    mean, std = expected_mean_std(observations)
    np.testing.assert_allclose(data["mean"], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["std"], std, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["actions"], actions, rtol=1e-5, atol=1e-6)
    assert data["actions"].shape == (STEPS, 1) and str(data["dist"]) == "gaussian"
    # entropy is the Gaussian's, in nats
    np.testing.assert_allclose(data["entropy"], 0.5 * np.log(2 * np.pi * np.e * std[:, 0] ** 2), rtol=1e-5, atol=1e-5)

    internals = env.last_internals
    comp = Compositor(_shape_only(data, (500, 500), env.action_names), internals)
    panel, L = comp.action_panel, comp.layout
    assert (panel.lo[0], panel.hi[0]) == (-2.0, 2.0)  # Pendulum's bounds
    info = probe_video(env.last_video_path)
    assert info.num_frames == STEPS + 1 and (info.width, info.height) == comp.size
    for t, frame in enumerate(read_video(env.last_video_path)):
        row, low_row = _row(frame, L, where="top"), _row(frame, L, where="bottom")
        band = _near(row, COLORS["bar"], 40)
        lo_x, hi_x = panel.x_of(0, mean[t, 0] - std[t, 0]), panel.x_of(0, mean[t, 0] + std[t, 0])
        markers = [panel.x_of(0, mean[t, 0])]
        assert lo_x - 2 <= band.min() and band.max() <= hi_x + 2, (t, band.min(), band.max(), lo_x, hi_x)
        for edge, got in ((lo_x, band.min()), (hi_x, band.max())):  # an edge under a marker is hidden by it
            assert abs(got - edge) <= 2 or min(abs(edge - m) for m in markers) <= 5, (t, got, edge)
        bright = np.flatnonzero(row.min(-1) > 200)  # the white mean line (orange is not > 200 in blue)
        assert bright.size and abs(np.median(bright) - panel.x_of(0, mean[t, 0])) <= 2, t
        if t < STEPS:
            chosen = _near(low_row, COLORS["chosen"], 70)
            assert chosen.size and abs(np.median(chosen) - panel.x_of(0, actions[t, 0])) <= 2, t


class SquashedActor(nn.Module):
    """SAC-like: pre-tanh mean 0.8 + cos, log_std -1 (as [B, 2D] = (mean, log_std))."""

    def forward(self, x):
        return torch.cat([0.8 + x[:, :1], torch.full_like(x[:, :1], -1.0)], dim=1)


def test_tanh_squashed_actor_samples_and_draws_in_action_units(tmp_path):
    env = RecordEpisode(gym.make("Pendulum-v1", render_mode="rgb_array"), tmp_path, SquashedActor(),
                        options=RecordOptions(squash=True))
    policy = env.policy
    observations, actions = play(env, STEPS, np.random.default_rng(1), policy)
    assert policy.squash and policy.kind == "logits"  # no value head
    # the one sampler: low + (tanh(mean + std * eps) + 1) / 2 * (high - low), eps from the rng
    eps = np.random.default_rng(1)
    u = [(0.8 + o[0]) + np.exp(-1.0) * eps.standard_normal((1, 1))[0, 0] for o in observations[:-1]]
    np.testing.assert_allclose(actions[:, 0], 2.0 * np.tanh(u), atol=1e-5)
    data = np.load(env.last_video_path.with_suffix(".npz"))
    assert bool(data["squash"]) and np.all(np.abs(data["actions"]) <= 2.0)
    comp = Compositor(_shape_only(data, (500, 500), env.action_names), env.last_internals)
    shown = squash_to_bounds(0.8 + observations[0, :1], [-2.0], [2.0])[0]  # the mean in action units
    frame = next(iter(read_video(env.last_video_path)))
    bright = np.flatnonzero(_row(frame, comp.layout, where="top").min(-1) > 200)
    assert abs(np.median(bright) - comp.action_panel.x_of(0, shown)) <= 2
    assert "tanh-Gaussian" in comp.action_panel.title


def test_tanh_squashed_checkpoint_keeps_its_squash(tmp_path):
    from rlviz import load_checkpoint, save_checkpoint

    space = gym.make("Pendulum-v1").action_space
    path = save_checkpoint(tmp_path / "sac.pt2", TorchPolicy(SquashedActor(), action_space=space, squash=True),
                           env="Pendulum-v1", kind="logits")
    agent = load_checkpoint(path)
    assert agent.policy.squash and agent.policy.action_spec.kind == "box"
    obs = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], np.float32)
    actions, out = agent.policy.act(obs, greedy=True)
    np.testing.assert_allclose(actions[:, 0], 2.0 * np.tanh([1.8, -0.2]), atol=1e-5)
    np.testing.assert_allclose(out.std, np.exp(-1.0), atol=1e-6)


def test_deterministic_actor_shows_the_action_only(tmp_path):
    actor = nn.Linear(3, 1)
    env = RecordEpisode(gym.make("Pendulum-v1", render_mode="rgb_array"), tmp_path, actor)
    observations, actions = play(env, 5, np.random.default_rng(2), env.policy)
    with torch.no_grad():
        expected = np.clip(actor(torch.as_tensor(observations[:-1])).numpy(), -2, 2)
    np.testing.assert_allclose(actions, expected, atol=1e-6)  # deterministic: no noise even with an rng
    data = np.load(env.last_video_path.with_suffix(".npz"))
    assert str(data["dist"]) == "deterministic" and "std" not in data and np.isnan(data["entropy"]).all()
    comp = Compositor(_shape_only(data, (500, 500), env.action_names), env.last_internals)
    frame = next(iter(read_video(env.last_video_path)))
    row = _row(frame, comp.layout, where="top")
    assert _near(row, COLORS["bar"], 30).size == 0 and np.flatnonzero(row.min(-1) > 200).size == 0  # no band/mean
    chosen = _near(_row(frame, comp.layout, where="bottom"), COLORS["chosen"], 70)
    assert abs(np.median(chosen) - comp.action_panel.x_of(0, actions[0, 0])) <= 2


class PartsEnv(gym.Env):
    """MultiDiscrete([3, 2]) (or MultiBinary(3)) actions; obs = (t,); reward = sum of the action's parts."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode="rgb_array", binary: bool = False):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
        self.action_space = gym.spaces.MultiBinary(3) if binary else gym.spaces.MultiDiscrete([3, 2])
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        self.t += 1
        return np.array([self.t], np.float32), float(np.sum(action)), self.t >= 6, False, {}

    def render(self):
        return np.full((32, 32, 3), 40 * self.t % 255, np.uint8)


PART_LOGITS = np.array([2.0, 0.0, -1.0, -0.5, 0.5], np.float32)


def test_multidiscrete_one_bar_group_per_part(tmp_path):
    policy = CallablePolicy(lambda obs: np.tile(PART_LOGITS, (len(obs), 1)), action_space=PartsEnv().action_space)
    env = RecordEpisode(PartsEnv(), tmp_path, policy)
    result = run_episode(env, rng=4)
    data = np.load(result.video_path.with_suffix(".npz"))
    p0 = np.exp(PART_LOGITS[:3]) / np.exp(PART_LOGITS[:3]).sum()
    p1 = np.exp(PART_LOGITS[3:]) / np.exp(PART_LOGITS[3:]).sum()
    np.testing.assert_allclose(data["probs"][0], np.concatenate([p0, p1]), atol=1e-6)
    assert data["actions"].shape == (6, 2) and list(data["nvec"]) == [3, 2]
    assert list(data["action_names"]) == ["0:0", "0:1", "0:2", "1:0", "1:1"]
    comp = Compositor(_shape_only(data, (32, 32), env.action_names), env.last_internals)
    L = comp.layout
    for t, frame in enumerate(read_video(result.video_path)):
        if t == 6:
            break
        lit = [int(_near(_row(frame, L, b), COLORS["chosen"], 48).size)
               for b in range(5)]
        a = data["actions"][t]
        chosen = {int(a[0]), 3 + int(a[1])}
        probs = np.concatenate([p0, p1])
        for b in range(5):
            if b in chosen:
                assert abs(lit[b] - probs[b] * L.bar_len) <= 3, (t, b, lit)
            else:
                assert lit[b] <= 2, (t, b, lit)
    # rollouts take multi-part actions too, and replay alone
    res = rollout("rlviz-test/Parts-v0", policy, RolloutPlan(4, num_envs=2, seed=0, progress=False))
    assert res.steps == 24
    again = replay_episode("rlviz-test/Parts-v0", policy, res.episodes[2])
    assert again.ret == res.episodes[2].ret


def test_multibinary_bernoulli_logits(tmp_path):
    space = PartsEnv(binary=True).action_space
    policy = TorchPolicy(lambda x: torch.tensor([[3.0, -3.0, 0.0]]).expand(len(x), 3), action_space=space,
                         kind="logits")
    env = RecordEpisode(PartsEnv(binary=True), tmp_path, policy)
    result = run_episode(env, rng=0)
    data = np.load(result.video_path.with_suffix(".npz"))
    sig = 1 / (1 + np.exp(-np.array([3.0, -3.0, 0.0])))
    np.testing.assert_allclose(data["probs"][0, 1::2], sig, atol=1e-6)
    np.testing.assert_allclose(data["probs"][0, 0::2], 1 - sig, atol=1e-6)
    assert data["actions"].shape == (6, 3) and set(np.unique(data["actions"])) <= {0, 1}


def _peak_fn(obs):
    """Logits from one pixel (2, 5) of an 8x8 image: forward only, plain numpy."""
    v = obs[:, 2, 5]
    return np.stack([3 * v, -3 * v], 1), v


def test_numpy_callable_gets_perturbation_saliency_and_gradient_says_why_not():
    policy = CallablePolicy(_peak_fn, action_space=gym.spaces.Discrete(2))
    obs = np.random.default_rng(0).random((2, 8, 8)).astype(np.float32)
    maps = attribute(policy, obs, method="perturbation", target="action")
    assert maps.shape == (2, 8, 8)
    for m in maps:
        assert np.unravel_index(m.argmax(), m.shape) == (2, 5)
    with pytest.raises(UsageError, match="forward-only.*perturbation"):
        attribute(policy, obs, method="gradient")
    out = policy.evaluate(obs)
    np.testing.assert_allclose(out.logits, _peak_fn(obs)[0], atol=1e-6)
    np.testing.assert_allclose(out.value, obs[:, 2, 5], atol=1e-6)


def test_numpy_callable_policy_on_record_episode(tmp_path):
    def fn(obs):
        return {"logits": np.stack([obs[:, 2], -obs[:, 2]], 1), "value": obs[:, 0]}

    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, fn)
    assert isinstance(env.policy, CallablePolicy)
    env.reset(seed=0)
    observations = [env.unwrapped.state.copy()]
    for _ in range(5):
        obs, *_ = env.step(0)
        observations.append(obs)
    env.finish_episode()
    data = np.load(env.last_video_path.with_suffix(".npz"))
    o = np.array(observations, np.float32)
    np.testing.assert_allclose(data["logits"][:, 0], o[:, 2], atol=1e-6)
    np.testing.assert_allclose(data["value"], o[:, 0], atol=1e-6)


class PendulumActorCritic(nn.Module):
    """(mean, log_std) as [B, 2] and a value: exportable by save_checkpoint."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(3, 3)

    def forward(self, x):
        h = self.body(x)
        return torch.cat([h[:, :1], h[:, 1:2].clamp(-2, 0)], 1), h[:, 2]


@pytest.fixture
def pendulum_ckpt(tmp_path):
    from rlviz import save_checkpoint

    return save_checkpoint(tmp_path / "pendulum.pt2", PendulumActorCritic(), env="Pendulum-v1")


def test_render_box_action_checkpoint_100_episodes_worst_video(pendulum_ckpt, tmp_path):
    out = tmp_path / "out"
    assert main(["render", str(pendulum_ckpt), "--episodes", "100", "--videos", "worst:1", "--out", str(out),
                 "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 100 and summary["steps"] == 100 * 200  # Pendulum's 200-step time limit
    (video,) = (out / "videos").glob("worst-*.mp4")
    data = np.load(video.with_suffix(".npz"))
    assert data["mean"].shape == (201, 1) and data["actions"].shape == (200, 1) and str(data["dist"]) == "gaussian"
    assert probe_video(video).num_frames == 201
    returns = [float(line.split(",")[2]) for line in (out / "episodes.csv").read_text().splitlines()[1:]]
    worst = int(video.name.split("-")[1])
    assert len(returns) == 100 and returns[worst] == min(returns) == pytest.approx(summary["returns"]["min"])
    assert np.isclose(data["rewards"].sum(), returns[worst], rtol=1e-4)  # the replay is the rolled-out episode


gym.register("rlviz-test/Parts-v0", entry_point=PartsEnv)


class PixelEnv(gym.Env):
    """obs: an 8x8 float image of noise in [0.4, 0.6] (seeded) with pixel (2, 5) at 0 or 1 (so blurring it always
    changes it); frame: flat grey 32x32 (the obs x4); Discrete(2); 5 steps."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode="rgb_array"):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 1, (8, 8), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        img = 0.4 + 0.2 * self.np_random.random((8, 8)).astype(np.float32)
        img[2, 5] = float(self.np_random.integers(2))
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, self.t >= 5, False, {}

    def render(self):
        return np.full((32, 32, 3), 128, np.uint8)


def test_numpy_callable_perturbation_saliency_in_the_video(tmp_path):
    """The saliency of a forward-only policy that reads pixel (2, 5) tints that cell of the game, not others."""
    from rlviz.draw.overlay import ACTOR_COLOR

    env = RecordEpisode(PixelEnv(), tmp_path, _peak_fn, options=RecordOptions(saliency="perturbation"))
    run_episode(env, rng=0)
    with pytest.raises(UsageError, match="forward-only.*perturbation"):  # refused before any episode runs
        RecordEpisode(PixelEnv(), tmp_path / "g", _peak_fn, options=RecordOptions(saliency="gradient"))
    k = 480 // 32 * 4  # display scale x obs-to-frame scale: one obs cell in video pixels
    tint = np.array(ACTOR_COLOR, np.float64) - 128
    for frame in read_video(env.last_video_path):
        game = frame[(frame.shape[0] - 480) // 2 :]  # the 480x480 game, centred vertically on the canvas
        cell = game[2 * k : 3 * k, 5 * k : 6 * k].reshape(-1, 3).mean(0) - 128
        far = game[6 * k : 7 * k, 0:k].reshape(-1, 3).mean(0) - 128
        assert np.dot(cell, tint) / np.dot(tint, tint) > 0.3  # tinted towards the actor colour
        assert abs(np.dot(far, tint) / np.dot(tint, tint)) < 0.1
