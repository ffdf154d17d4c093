"""CleanRL's standard scripts' .cleanrl_model files load and render with no --model.

The agents here are written the way CleanRL's scripts write them (same attribute names and layer shapes, our
own code), saved as CleanRL saves them: ``torch.save(agent.state_dict(), path)``.
"""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlviz.cli import main
from rlviz.draw.video import video_timing
from rlviz.errors import UsageError
from rlviz.jobs.videos import MIN_VIDEO_SECONDS
from rlviz.media.video import probe_video
from rlviz.sources.checkpoint import load_agent


def _torso():
    return [nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU()]


class PPOAgent(nn.Module):  # ppo.py
    def __init__(self, obs_dim, n):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n))


class PPOAtariAgent(nn.Module):  # ppo_atari.py
    def __init__(self, n):
        super().__init__()
        self.network = nn.Sequential(*_torso())
        self.actor, self.critic = nn.Linear(512, n), nn.Linear(512, 1)


class QNetwork(nn.Module):  # dqn.py
    def __init__(self, obs_dim, n):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                     nn.Linear(84, n))


class QNetworkAtari(nn.Module):  # dqn_atari.py
    def __init__(self, n):
        super().__init__()
        self.network = nn.Sequential(*_torso(), nn.Linear(512, n))


def _save(module, path):
    torch.manual_seed(0)
    for p in module.parameters():  # weights large enough that the outputs differ from state to state
        nn.init.normal_(p, 0, 0.3)
    torch.save(module.state_dict(), path)
    return path


def test_ppo_script_renders_with_env_inferred_and_its_own_probabilities(tmp_path):
    agent = PPOAgent(4, 2)
    path = _save(agent, tmp_path / "CartPole-v1__ppo__1__1.cleanrl_model")
    out = tmp_path / "out"
    assert main(["render", str(path), "--episodes", "2", "--videos", "first:1", "--out", str(out),
                 "--no-progress"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    n = len(data["actions"]) + 1
    _, held = video_timing(n, 50.0, MIN_VIDEO_SECONDS)  # CartPole renders at 50 fps; short episodes hold their end
    assert probe_video(video).num_frames == n + held
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=int(next(csv.DictReader((out / "episodes.csv").open()))["seed"]))
    observations = [obs]
    for a in data["actions"]:
        obs, *_ = env.step(int(a))
        observations.append(obs)
    x = torch.as_tensor(np.stack(observations))
    with torch.no_grad():
        probs = torch.distributions.Categorical(logits=agent.actor(x)).probs.numpy()
        value = agent.critic(x)[:, 0].numpy()
    np.testing.assert_allclose(data["probs"], probs, atol=1e-5)
    np.testing.assert_allclose(data["value"], value, rtol=1e-5, atol=1e-5)


def test_dqn_script_is_a_q_network(tmp_path):
    net = QNetwork(6, 3)
    loaded = load_agent(_save(net, tmp_path / "dqn.cleanrl_model"))
    assert (loaded.recipe.env_id, loaded.kind, loaded.metadata["cleanrl_script"]) == ("Acrobot-v1", "q", "dqn.py")
    x = np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(loaded.policy.evaluate(x).logits, net.network(torch.as_tensor(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_ambiguous_env_asks_for_env(tmp_path):
    path = _save(PPOAgent(8, 4), tmp_path / "ppo.cleanrl_model")
    with pytest.raises(UsageError, match="ppo.py.*--env"):
        load_agent(path)


def _cleanrl_atari_env(env_id):
    """CleanRL ppo_atari.py's make_env at evaluation (no life loss, no reward clipping)."""
    from stable_baselines3.common.atari_wrappers import FireResetEnv, MaxAndSkipEnv, NoopResetEnv

    env = gym.make(env_id)
    env = MaxAndSkipEnv(NoopResetEnv(env, noop_max=30), skip=4)
    env = FireResetEnv(env)
    env = gym.wrappers.ResizeObservation(env, (84, 84))
    env = gym.wrappers.GrayscaleObservation(env)
    return gym.wrappers.FrameStackObservation(env, 4)


def test_ppo_atari_state_dict_loads_with_no_model_on_cleanrls_env(tmp_path):
    pytest.importorskip("stable_baselines3")
    agent = PPOAtariAgent(4)
    path = _save(agent, tmp_path / "BreakoutNoFrameskip-v4__ppo_atari__1__1.cleanrl_model")
    with pytest.raises(UsageError, match="ppo_atari.py.*--env"):
        load_agent(path)
    loaded = load_agent(path, env="BreakoutNoFrameskip-v4")
    assert (loaded.kind, loaded.metadata["cleanrl_script"]) == ("actor_critic", "ppo_atari.py")
    # the env is CleanRL's: same observations for the same seed and actions
    from rlviz.envs.recipe import make_env

    mine, ref = make_env(loaded.recipe, render_mode=None), _cleanrl_atari_env("BreakoutNoFrameskip-v4")
    obs, expected = mine.reset(seed=5)[0], ref.reset(seed=5)[0]
    rng, batch = np.random.default_rng(1), [obs]
    for _ in range(100):
        np.testing.assert_array_equal(obs, expected)
        a = int(rng.integers(4))
        obs, _, te, tr, _ = mine.step(a)
        expected, _, te2, tr2, _ = ref.step(a)
        assert (te or tr) == (te2 or tr2)
        if te or tr:
            obs, expected = mine.reset()[0], ref.reset()[0]
        batch.append(obs)
    x = np.stack(batch[:32])
    with torch.no_grad():
        h = agent.network(torch.as_tensor(x, dtype=torch.float32) / 255.0)
        logits, value = agent.actor(h), agent.critic(h)[:, 0]
    got = loaded.policy.evaluate(x)
    np.testing.assert_allclose(got.probs, torch.softmax(logits, -1).numpy(), atol=1e-5)
    np.testing.assert_allclose(got.value, value.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_ppo_atari_state_dict_renders_with_no_model(tmp_path):
    agent = PPOAtariAgent(4)
    _save(agent, tmp_path / "x")
    nn.init.zeros_(agent.actor.weight)  # plays near uniformly at random, so presses FIRE: a short episode
    path = tmp_path / "BreakoutNoFrameskip-v4__ppo_atari__1__1.cleanrl_model"
    torch.save(agent.state_dict(), path)
    out = tmp_path / "out"
    assert main(["render", str(path), "--env", "BreakoutNoFrameskip-v4", "--episodes", "1", "--num-envs", "1",
                 "--videos", "first:1", "--out", str(out), "--no-progress"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    assert probe_video(video).num_frames == len(np.load(video.with_suffix(".npz"))["actions"]) + 1


def test_dqn_atari_recognised_and_near_misses_are_not(tmp_path):
    from rlviz.sources.cleanrl.scripts import recognise_cleanrl

    layout = recognise_cleanrl(QNetworkAtari(6).state_dict())
    assert (layout.script, layout.kind, layout.num_actions, layout.atari) == ("dqn_atari.py", "q", 6, True)
    state = PPOAgent(4, 2).state_dict()
    state["actor.2.weight"] = torch.zeros(32, 64)  # another hidden size: not ppo.py's network
    assert recognise_cleanrl(state) is None
    assert recognise_cleanrl({"extra": torch.zeros(1), **QNetwork(4, 2).state_dict()}) is None
