"""SB3 / sb3-contrib algorithms loaded from their zips (nothing unpickled): outputs equal SB3's own on the same
observations, and --greedy returns equal ``evaluate_policy(deterministic=True)`` on the same per-episode seeds."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch
from _zips import rewrite_sb3_data

from rlviz.cli import main
from rlviz.sources.checkpoint import load_agent

sb3 = pytest.importorskip("stable_baselines3")


@pytest.fixture(scope="module")
def qrdqn_zip(tmp_path_factory):
    contrib = pytest.importorskip("sb3_contrib")
    model = contrib.QRDQN("MlpPolicy", "CartPole-v1", learning_starts=100, buffer_size=1000, seed=0, device="cpu",
                          policy_kwargs={"net_arch": [16], "n_quantiles": 7})
    model.learn(400)
    path = tmp_path_factory.mktemp("qrdqn") / "qrdqn.zip"
    model.save(path)
    return model, path


def _observations(n: int = 64) -> np.ndarray:
    env, out = gym.make("CartPole-v1"), []
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(n):
        out.append(obs)
        obs, _, te, tr, _ = env.step(int(rng.integers(2)))
        if te or tr:
            obs, _ = env.reset()
    return np.stack(out)


@pytest.mark.filterwarnings("error::UserWarning")  # no false "trained under VecNormalize" warning
def test_qrdqn_q_values_are_the_quantile_means_and_act_as_predict(qrdqn_zip):
    model, path = qrdqn_zip
    agent = load_agent(path, env="CartPole-v1")
    assert (agent.kind, agent.metadata["algorithm"]) == ("q", "QRDQN")
    obs = _observations()
    out = agent.policy.evaluate(obs)
    with torch.no_grad():
        quantiles = model.policy.quantile_net(torch.as_tensor(obs))
    assert quantiles.shape == (len(obs), 7, 2)
    np.testing.assert_allclose(out.logits, quantiles.mean(dim=1).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out.logits.argmax(-1), model.predict(obs, deterministic=True)[0])
    with torch.no_grad():
        mine = agent.policy.module.quantiles(torch.as_tensor(obs))
    np.testing.assert_allclose(mine.numpy(), quantiles.numpy(), rtol=1e-5, atol=1e-6)


def test_qrdqn_greedy_returns_equal_evaluate_policy(qrdqn_zip, tmp_path):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    model, path = qrdqn_zip
    out = tmp_path / "out"
    assert main(["render", str(path), "--env", "CartPole-v1", "--episodes", "3", "--greedy", "--videos", "none",
                 "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert len(rows) == 3
    for row in rows:
        venv = make_vec_env("CartPole-v1", n_envs=1)
        venv.seed(int(row["seed"]))
        returns, _ = evaluate_policy(model, venv, n_eval_episodes=1, deterministic=True, return_episode_rewards=True)
        assert float(row["return"]) == returns[0]


def test_unknown_contrib_policy_is_refused_before_unpickling(qrdqn_zip, tmp_path):
    """A zip naming a policy class outside the allowlist is refused with the unsafe-checkpoint error."""
    from rlviz.errors import UnsafeCheckpointError

    _, path = qrdqn_zip
    bad = rewrite_sb3_data(path, tmp_path / "bad.zip", lambda doc: doc["policy_class"].update(__module__="evil.module"))
    with pytest.raises(UnsafeCheckpointError, match="evil.module"):
        load_agent(bad, env="CartPole-v1")


def test_qrdqn_panel_draws_the_quantile_spread(qrdqn_zip, tmp_path):
    """The recorded episode stores QR-DQN's quantiles (equal to SB3's on the replayed observations) and the panel
    draws them: a whisker from the lowest to the highest quantile with a tick at each, over each action's bar."""
    from rlviz.draw.compose import ComposeOptions, Compositor
    from rlviz.draw.style import COLORS
    from rlviz.episode.trace import EpisodeInternals, EpisodeTrace
    from rlviz.media import probe_video

    model, path = qrdqn_zip
    out = tmp_path / "out"
    assert main(["render", str(path), "--env", "CartPole-v1", "--episodes", "1", "--videos", "first:1",
                 "--out", str(out), "--no-progress"]) == 0
    video = next((out / "videos").glob("*.mp4"))
    data = np.load(video.with_suffix(".npz"))
    quantiles, actions = data["quantiles"], data["actions"]
    n = len(actions)
    assert quantiles.shape == (n + 1, 7, 2) and probe_video(video).num_frames >= n + 1
    env = gym.make("CartPole-v1")
    obs = [env.reset(seed=int(list(csv.DictReader((out / "episodes.csv").open()))[0]["seed"]))[0]]
    obs += [env.step(int(a))[0] for a in actions]
    with torch.no_grad():
        np.testing.assert_allclose(quantiles, model.policy.quantile_net(torch.as_tensor(np.stack(obs))).numpy(),
                                   rtol=1e-5, atol=1e-5)
    trace = EpisodeTrace(np.zeros((n + 1, 400, 600, 3), np.uint8), np.stack(obs), actions, data["rewards"], None,
                         bool(data["terminated"]), bool(data["truncated"]), ("0", "1"), 0, None, 50.0, "CartPole-v1")
    internals = EpisodeInternals(data["logits"], data["probs"], data["value"], "q", entropy=data["entropy"],
                                 returns_to_go=data["returns_to_go"], gamma=0.99, quantiles=quantiles)
    comp = Compositor(trace, internals, ComposeOptions())
    plain = Compositor(trace, EpisodeInternals(**{**internals.__dict__, "quantiles": None}), ComposeOptions())
    L, quantile = comp.layout, np.array(COLORS["quantile"])
    for t in (0, n // 2, n):
        img, without = comp.render(t), plain.render(t)
        for a, y in enumerate(L.bar_rows):
            xs = [comp.action_panel.x_of(float(v)) for v in quantiles[t, :, a]]
            mid = y + L.bar_h // 2
            for x in (min(xs), max(xs), (min(xs) + max(xs)) // 2):  # the whisker's ends and middle
                assert (img[mid, x] == quantile).all() and not (without[mid, x] == quantile).all()
            for x in xs:  # a tick at each quantile
                assert (img[y + 1 : y + L.bar_h - 1, x] == quantile).all()
