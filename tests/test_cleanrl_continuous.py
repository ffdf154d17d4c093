"""CleanRL's ppo_continuous_action.py and sac_continuous_action.py agents load and render with no --model (and,
on Pendulum, no --env). The agents are written the way CleanRL's scripts write them (same attribute names and
layer shapes, our own code) and saved as CleanRL saves them: ``torch.save(agent.state_dict(), path)``."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlviz.cli import main
from rlviz.errors import EnvError, UsageError
from rlviz.sources.checkpoint import load_agent


class PPOContinuousAgent(nn.Module):  # ppo_continuous_action.py's Agent
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor_mean = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                        nn.Linear(64, act_dim))
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def reference(self, x):
        """mean, std, value as the script computes them (get_action_and_value)."""
        mean = self.actor_mean(x)
        return mean, torch.exp(self.actor_logstd.expand_as(mean)), self.critic(x)[:, 0]


class SACActor(nn.Module):  # sac_continuous_action.py's Actor
    def __init__(self, obs_dim, act_dim, low, high):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(obs_dim, 256), nn.Linear(256, 256)
        self.fc_mean, self.fc_logstd = nn.Linear(256, act_dim), nn.Linear(256, act_dim)
        self.register_buffer("action_scale", torch.tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0, dtype=torch.float32))

    def reference(self, x):
        """mean (before tanh), std, and the deterministic action, as the script's get_action computes them."""
        h = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        mean, log_std = self.fc_mean(h), torch.tanh(self.fc_logstd(h))
        log_std = -5 + 0.5 * (2 - (-5)) * (log_std + 1)
        return mean, log_std.exp(), torch.tanh(mean) * self.action_scale + self.action_bias


def _save(module, path):
    torch.manual_seed(0)
    for name, p in module.named_parameters():  # weights large enough that the outputs differ from state to state
        nn.init.normal_(p, 0, 0.5 if "logstd" in name else 0.3)
    torch.save(module.state_dict(), path)
    return path


def _pendulum_bounds():
    space = gym.make("Pendulum-v1").action_space
    return space.low.astype(np.float64), space.high.astype(np.float64)


def _replayed(seed: int, actions) -> torch.Tensor:
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, *_ = env.step(a)
        out.append(obs)
    return torch.as_tensor(np.stack(out))


def _render(path, out, *extra):
    assert main(["render", str(path), "--episodes", "2", "--videos", "first:1", "--out", str(out), "--no-progress",
                 *extra]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    seed = int(next(csv.DictReader((out / "episodes.csv").open()))["seed"])
    return np.load(video.with_suffix(".npz")), seed


def test_ppo_continuous_renders_with_no_model_or_env_and_its_own_gaussian(tmp_path):
    agent = PPOContinuousAgent(3, 1)
    path = _save(agent, tmp_path / "Pendulum-v1__ppo_continuous_action__1__1.cleanrl_model")
    with pytest.warns(UserWarning, match="NormalizeObservation"):
        loaded = load_agent(path)
    assert (loaded.recipe.env_id, loaded.kind, loaded.metadata["cleanrl_script"]) == (
        "Pendulum-v1", "actor_critic", "ppo_continuous_action.py")
    with pytest.warns(UserWarning, match="NormalizeObservation"):
        data, seed = _render(path, tmp_path / "out")
    x = _replayed(seed, data["actions"])
    with torch.no_grad():
        mean, std, value = agent.reference(x)
    assert np.ptp(data["mean"]) > 0.1  # the states are told apart
    np.testing.assert_allclose(data["mean"], mean.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["std"], std.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["value"], value.numpy(), rtol=1e-5, atol=1e-5)
    low, high = _pendulum_bounds()
    assert np.all((data["actions"] >= low) & (data["actions"] <= high))  # sampled, clipped as ClipAction does
    assert len(np.unique(data["actions"])) > len(data["actions"]) // 2


def test_sac_actor_renders_with_no_model_and_acts_as_its_get_action_mean(tmp_path):
    low, high = _pendulum_bounds()
    actor = SACActor(3, 1, low, high)
    path = _save(actor, tmp_path / "sac_actor.cleanrl_model")
    loaded = load_agent(path)
    assert (loaded.recipe.env_id, loaded.kind, loaded.policy.squash, loaded.metadata["cleanrl_script"]) == (
        "Pendulum-v1", "logits", True, "sac_continuous_action.py")
    data, seed = _render(path, tmp_path / "out", "--greedy")
    x = _replayed(seed, data["actions"])
    with torch.no_grad():
        mean, std, action = actor.reference(x)
    assert np.ptp(data["mean"]) > 0.1 and "value" not in data.files
    # pre-tanh means reach ~24 here: float32 agreement is relative (the batch shapes differ by a few ulps)
    np.testing.assert_allclose(data["mean"], mean.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["std"], std.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["actions"], action.numpy()[:-1], rtol=1e-5, atol=1e-5)


def test_sac_actor_of_an_unknown_env_asks_for_env_and_checks_the_bounds(tmp_path):
    path = _save(SACActor(17, 6, -np.ones(6), np.ones(6)), tmp_path / "cheetah.cleanrl_model")
    with pytest.raises(UsageError, match=r"sac_continuous_action.py.*6 action dimensions.*--env"):
        load_agent(path)
    wrong = _save(SACActor(3, 1, -np.ones(1), np.ones(1)), tmp_path / "wrong_bounds.cleanrl_model")
    with pytest.raises(EnvError, match=r"action_scale and action_bias say actions in \[\[-1.\], \[1.\]\]"):
        load_agent(wrong)
    with pytest.raises(EnvError, match="1-dimensional Box actions; the env's actions are Discrete"):
        load_agent(_save(PPOContinuousAgent(4, 1), tmp_path / "ppo.cleanrl_model"), env="CartPole-v1")
