"""SB3 / sb3-contrib algorithms loaded from their zips (nothing unpickled): outputs equal SB3's own on the same
observations, and --greedy returns equal ``evaluate_policy(deterministic=True)`` on the same per-episode seeds."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlviz.agent.checkpoint import load_agent
from rlviz.cli import main

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
    np.testing.assert_allclose(out.logits, quantiles.mean(dim=1).numpy(), atol=1e-5)
    np.testing.assert_array_equal(out.logits.argmax(-1), model.predict(obs, deterministic=True)[0])
    with torch.no_grad():
        mine = agent.policy.module.quantiles(torch.as_tensor(obs))
    np.testing.assert_allclose(mine.numpy(), quantiles.numpy(), atol=1e-6)


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
    import io
    import json
    import zipfile

    from rlviz.errors import UnsafeCheckpointError

    _, path = qrdqn_zip
    src = zipfile.ZipFile(path)
    doc = json.loads(src.read("data"))
    doc["policy_class"]["__module__"] = "evil.module"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, json.dumps(doc) if name == "data" else src.read(name))
    bad = tmp_path / "bad.zip"
    bad.write_bytes(buf.getvalue())
    with pytest.raises(UnsafeCheckpointError, match="evil.module"):
        load_agent(bad, env="CartPole-v1")


@pytest.mark.parametrize("algo, policy", [("RecurrentPPO", "MlpLstmPolicy"), ("MaskablePPO", "MlpPolicy")])
def test_not_yet_supported_contrib_agents_say_so(algo, policy, tmp_path):
    from rlviz.errors import UsageError

    contrib = pytest.importorskip("sb3_contrib")
    path = tmp_path / f"{algo}.zip"
    getattr(contrib, algo)(policy, "CartPole-v1", n_steps=16, batch_size=16, device="cpu").save(path)
    with pytest.raises(UsageError, match=f"{algo}.*does not render yet"):
        load_agent(path, env="CartPole-v1")
