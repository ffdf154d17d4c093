"""Envs with scalar, Tuple and Dict observations: checkpoints, the render job, RecordEpisode; flattening as SB3."""

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch
from _envs import PROBE_PIXEL, seeded_mlp  # noqa: F401  (PROBE_PIXEL: registers the probe envs)

from rlviz.agent.obs import FlatView, ObsAdapter, flat_size
from rlviz.agent.policy import TorchPolicy
from rlviz.cli import main
from rlviz.episode.trace import make_spool
from rlviz.errors import UsageError
from rlviz.media import probe_video, read_video
from rlviz.record import RecordEpisode, RecordOptions, run_episode
from rlviz.sources.checkpoint import load_agent, save_checkpoint

ENVS = ["FrozenLake-v1", "Taxi-v4", "Blackjack-v1", "rlviz-probe/Dict-v0"]


def _mlp_for(env_id):
    env = gym.make(env_id)
    try:
        return seeded_mlp(flat_size(env.observation_space), int(env.action_space.n))
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENVS)
def test_checkpoint_render_job_and_video(env_id, tmp_path):
    ckpt = save_checkpoint(tmp_path / "agent.pt2", _mlp_for(env_id), env=env_id)
    agent = load_agent(ckpt)
    assert agent.recipe.env_id == env_id
    out = tmp_path / "out"
    args = ["render", str(ckpt), "--episodes", "10", "--heatmap", "--videos", "first:1", "--out", str(out),
            "--no-progress"]
    if env_id == "rlviz-probe/Dict-v0":
        args += ["--objects", "_envs:probe_objects"]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert len(rows) == 10
    video = out / "videos" / "first-0-episode-0.mp4"
    info = probe_video(video)
    assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
    assert info.num_frames == int(rows[0]["length"]) + 1
    frames = list(read_video(video))
    assert len(frames) == info.num_frames and frames[0].std() > 0
    heat = np.load(out / "heatmap.npz")
    terminated = sum(r["terminated"] == "True" for r in rows)
    assert int(heat["failures"]) == terminated and int(heat["episodes"]) == 10
    if env_id == "rlviz-probe/Dict-v0":  # the agent is at (0, 4) on the frame before it passes 4
        counts = heat["counts"][list(heat["object_names"]).index("obj")]
        assert terminated > 0 and counts[0, 4] == terminated == counts.sum()


class Hand(torch.nn.Module):
    """logits [0, x . (1, 1, 1, 2, 0)], value x.sum(): on the Dict probe (goal one-hot, pos, 1) action 1 wins."""

    def forward(self, x):
        w = torch.tensor([1.0, 1.0, 1.0, 2.0, 0.0])
        return torch.stack([torch.zeros(x.shape[0]), x @ w], 1), x.sum(-1)


def test_record_episode_dict_observations_probabilities_by_hand(tmp_path):
    env = RecordEpisode(gym.make("rlviz-probe/Dict-v0", render_mode="rgb_array"), tmp_path, TorchPolicy(Hand()))
    result = run_episode(env, seed=3, greedy=True)
    env.close()
    assert result.terminated and result.length == 5
    t = np.arange(6, dtype=np.float64)  # pos on the 6 recorded frames
    expected = np.stack([np.zeros(6), 1.0 + 2.0 * t], 1)
    expected = np.exp(expected - expected.max(1, keepdims=True))
    np.testing.assert_allclose(env.last_internals.probs, expected / expected.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(env.last_internals.value, 1.0 + t + 1.0, rtol=1e-6)
    info = probe_video(result.video_path)
    assert info.num_frames == 6
    data = np.load(result.video_path.with_suffix(".npz"))
    assert list(data["actions"]) == [1] * 5


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Taxi-v4", "Blackjack-v1"])
def test_record_episode_scalar_and_tuple_observations(env_id, tmp_path):
    env = RecordEpisode(gym.make(env_id, render_mode="rgb_array"), tmp_path, TorchPolicy(_mlp_for(env_id)))
    result = run_episode(env, seed=0, max_steps=30)
    env.close()
    assert probe_video(result.video_path).num_frames == result.length + 1
    assert np.load(result.video_path.with_suffix(".npz"))["probs"].shape == (result.length + 1, env.action_space.n)


def test_saliency_on_structured_observations_is_one_number_per_flattened_entry(tmp_path):
    # Blackjack's Tuple (32, 11, 2) reaches the policy one-hot flattened (45 entries): since 0.5 (#46, Dict
    # observations everywhere) gradient saliency gives each entry |d logit[action] / d entry| (scaled), not a refusal
    net = seeded_mlp(45, 2)
    env = RecordEpisode(gym.make("Blackjack-v1", render_mode="rgb_array"), tmp_path, TorchPolicy(net),
                        options=RecordOptions(saliency="gradient"))
    result = run_episode(env, seed=0, max_steps=30)
    env.close()
    data = np.load(result.video_path.with_suffix(".npz"))
    assert data["saliency"].shape == (result.length + 1, 45)
    plain = gym.make("Blackjack-v1")
    obs, _ = plain.reset(seed=0)
    x = torch.tensor(ObsAdapter(plain.observation_space).batch([obs]), dtype=torch.float32, requires_grad=True)
    out = net(x)
    (grad,) = torch.autograd.grad((out[0] if isinstance(out, tuple) else out)[0, int(data["actions"][0])], x)
    by_hand = grad.abs()[0].numpy()
    np.testing.assert_allclose(data["saliency"][0] / data["saliency"][0].max(), by_hand / by_hand.max(), atol=1e-5)


def test_saliency_on_observations_a_policy_takes_raw_is_refused_in_one_line(tmp_path):
    policy = TorchPolicy(seeded_mlp(45, 2))
    policy.obs_format = "raw"  # the policy preprocesses the Tuple itself (as SB3's do): no map of its input exists
    with pytest.raises(UsageError, match="saliency='gradient' maps array observations.*--saliency none"):
        RecordEpisode(gym.make("Blackjack-v1", render_mode="rgb_array"), tmp_path, policy,
                      options=RecordOptions(saliency="gradient"))


def test_flattening_by_hand_and_as_sb3_does():
    from gymnasium import spaces

    tup = spaces.Tuple((spaces.Discrete(3), spaces.Discrete(2, start=1)))
    np.testing.assert_array_equal(ObsAdapter(tup).batch([(2, 1), (0, 2)]), [[0, 0, 1, 1, 0], [1, 0, 0, 0, 1]])
    assert ObsAdapter(spaces.Box(0, 1, ())).batch([np.float32(0.5)]).tolist() == [[0.5]]
    md = spaces.MultiDiscrete([2, 3])
    assert ObsAdapter(md).batch([np.array([1, 2])]).tolist() == [[0, 1, 0, 0, 1]]
    box = spaces.Box(0, 1, (2, 3))
    assert not ObsAdapter(box).flat and ObsAdapter(box).batch([np.zeros((2, 3))]).shape == (1, 2, 3)

    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.preprocessing import preprocess_obs

    space = spaces.Dict({"z": spaces.Box(-1, 1, (2, 2)), "a": spaces.Discrete(4), "m": spaces.MultiBinary(3)})
    space.seed(1)
    samples = [space.sample() for _ in range(5)]
    ours = ObsAdapter(space).batch(samples)
    assert ours.shape == (5, 4 + 3 + 4) and sb3 is not None
    tensors = {k: torch.as_tensor(np.stack([s[k] for s in samples])) for k in space.spaces}
    pre = preprocess_obs(tensors, space)
    theirs = torch.cat([pre[k].float().reshape(5, -1) for k in space.spaces], 1).numpy()  # CombinedExtractor
    np.testing.assert_allclose(ours, theirs)


def test_dict_observations_spool_whole_and_read_flat_in_chunks():
    space = gym.make("rlviz-probe/Dict-v0").observation_space
    spool = make_spool({"goal": 1, "pos": np.zeros(2, np.float32)})
    for i in range(5):
        spool.append({"goal": i % 3, "pos": np.array([i, 1.0], np.float32)})
    view = spool.view()
    assert set(view) == {"goal", "pos"} and view["pos"].shape == (5, 2) and list(view["goal"][:]) == [0, 1, 2, 0, 1]
    flat = FlatView(ObsAdapter(space), view)
    assert flat.shape == (5, 5)
    np.testing.assert_array_equal(flat[3:5], [[1, 0, 0, 3, 1], [0, 1, 0, 4, 1]])
    spool.close()


# -- one adapter path for CleanRL agents; saliency of a policy without input gradients -------------------------
class CleanAgent(torch.nn.Module):
    """CleanRL ppo.py's layout: actor and critic on the raw observation, no forward."""

    def __init__(self, envs):
        super().__init__()
        n_in = int(np.prod(envs.single_observation_space.shape))
        self.critic = torch.nn.Sequential(torch.nn.Linear(n_in, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.actor = torch.nn.Sequential(torch.nn.Linear(n_in, 16), torch.nn.Tanh(),
                                         torch.nn.Linear(16, envs.single_action_space.n))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        dist = torch.distributions.Categorical(logits=self.actor(x))
        action = dist.sample() if action is None else action
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def test_torch_policy_of_a_cleanrl_agent_is_the_cli_path(tmp_path):
    from rlviz.agent.cleanrl import CleanRLComposed
    from rlviz.sources.adapters import SpaceInfo

    env = gym.make("CartPole-v1")
    torch.manual_seed(0)
    agent = CleanAgent(SpaceInfo(env.observation_space, env.action_space))
    torch.save(agent.state_dict(), tmp_path / "ppo.cleanrl_model")
    cli = load_agent(tmp_path / "ppo.cleanrl_model", env="CartPole-v1", model=f"{__file__}:CleanAgent").policy
    lib = TorchPolicy(agent, device="cpu")
    env.observation_space.seed(3)
    obs = np.stack([env.observation_space.sample() for _ in range(7)])
    ours, theirs = lib.evaluate(obs), cli.evaluate(obs)
    assert isinstance(lib.module, CleanRLComposed) and type(cli.module) is type(lib.module)
    np.testing.assert_allclose(ours.probs, theirs.probs, rtol=1e-6)
    np.testing.assert_allclose(ours.value, theirs.value, rtol=1e-6)
    with torch.no_grad():  # and both are the agent's own distribution
        _, logp, _, value = agent.get_action_and_value(torch.as_tensor(obs), torch.zeros(7, dtype=torch.long))
    np.testing.assert_allclose(ours.probs[:, 0], logp.exp().numpy(), rtol=1e-5)


class Rounded(torch.nn.Module):
    """A policy whose forward goes through round(): its input gradient is exactly 0 everywhere."""

    def forward(self, x):
        h = x.round().flatten(1).sum(-1)
        return h[:, None] * torch.tensor([0.1, -0.1, 0.0]), h


def test_gradient_saliency_of_a_non_differentiable_policy_warns_and_still_writes_the_video(tmp_path):
    import warnings

    pytest.importorskip("minatar")
    from rlviz.envs import make_env
    from rlviz.explain.saliency import ZeroSaliencyWarning

    env = RecordEpisode(make_env("MinAtar/Breakout-v1"), tmp_path, TorchPolicy(Rounded()),
                        options=RecordOptions(saliency="gradient"))
    with pytest.warns(ZeroSaliencyWarning, match="not differentiable w.r.t. its input.*--saliency perturbation"):
        result = run_episode(env, seed=0, max_steps=12)
    env.close()
    assert probe_video(result.video_path).num_frames == result.length + 1
    env = RecordEpisode(make_env("MinAtar/Breakout-v1"), tmp_path / "p", TorchPolicy(Rounded()),
                        options=RecordOptions(saliency="perturbation"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroSaliencyWarning)
        run_episode(env, seed=0, max_steps=12)
    env.close()
