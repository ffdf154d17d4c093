"""Adapters: Stable-Baselines3 zips, CleanRL-style agents, plain modules -> exact rlviz policies."""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions.categorical import Categorical

from rlviz.agent.cleanrl import CleanRLComposed, CleanRLMethods
from rlviz.agent.policy import TorchPolicy
from rlviz.errors import CheckpointError, EnvError, UnsafeCheckpointError, UsageError
from rlviz.sources.adapters import build_model, cleanrl_policy, to_policy
from rlviz.sources.checkpoint import load_agent, load_checkpoint, save_checkpoint

torch.set_num_threads(1)


@pytest.fixture
def sb3():
    """Stable-Baselines3, for the tests that need it (the CleanRL tests in this file run without it)."""
    return pytest.importorskip("stable_baselines3")


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class CartPoleAgent(nn.Module):
    """CleanRL ppo.py's Agent (actor and critic on the raw observation)."""

    def __init__(self, envs):
        super().__init__()
        n_obs = int(np.array(envs.single_observation_space.shape).prod())
        self.critic = nn.Sequential(layer_init(nn.Linear(n_obs, 64)), nn.Tanh(), layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(n_obs, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


class AtariAgent(nn.Module):
    """CleanRL ppo_atari.py's Agent: shared ``network`` on x / 255, ``actor`` and ``critic`` heads."""

    def __init__(self, envs):
        super().__init__()
        c = envs.single_observation_space.shape[0]
        self.network = nn.Sequential(layer_init(nn.Conv2d(c, 8, 4, stride=2)), nn.ReLU(), nn.Flatten(),
                                     layer_init(nn.Linear(8 * 4 * 4, 32)), nn.ReLU())
        self.actor = layer_init(nn.Linear(32, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(32, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


class OddAgent(CartPoleAgent):
    """Preprocessing no composition reproduces (x * 3 - 1): rlviz must fall back to the agent's methods."""

    def get_value(self, x):
        return self.critic(x * 3 - 1)

    def get_action_and_value(self, x, action=None):
        return super().get_action_and_value(x * 3 - 1, action)


class QNetwork(nn.Module):
    """CleanRL dqn.py's QNetwork."""

    def __init__(self, env):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(int(np.prod(env.single_observation_space.shape)), 32), nn.ReLU(),
                                     nn.Linear(32, env.single_action_space.n))

    def forward(self, x):
        return self.network(x)


class Envs:
    def __init__(self, obs_space, act_space):
        self.single_observation_space, self.single_action_space = obs_space, act_space


CARTPOLE = gym.make("CartPole-v1")
PIXELS = gym.spaces.Box(0, 255, (2, 10, 10), np.uint8)


def _cartpole_obs(n=16, seed=0):
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(obs)
        obs, _, term, trunc, _ = env.step(int(rng.integers(2)))
        if term or trunc:
            obs, _ = env.reset()
    return np.stack(out).astype(np.float32)


# -- Stable-Baselines3 ----------------------------------------------------------------------------
def _sb3_reference(policy, obs):
    x = torch.as_tensor(obs)
    with torch.no_grad():
        return policy.get_distribution(x).distribution.logits, policy.predict_values(x)[:, 0]


def test_sb3_ppo_zip_matches_sb3(ppo_zip):
    model, path = ppo_zip
    agent = load_agent(path, env="CartPole-v1", device="cpu")
    assert agent.format == "sb3-zip" and agent.kind == "actor_critic" and agent.gamma == 0.99
    assert agent.metadata["algorithm"] == "PPO" and agent.metadata["num_timesteps"] == 2048
    assert agent.metadata["policy_class"] == "ActorCriticPolicy" and agent.action_names == ("0", "1")
    obs = _cartpole_obs()
    ref_logits, ref_values = _sb3_reference(model.policy, obs)
    with torch.no_grad():
        logits, values = agent.policy.forward(torch.as_tensor(obs))
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-6)
    assert (ref_logits[:, 0] - ref_logits[:, 1]).abs().max() > 1e-3  # the policy is not uniform: a real check
    # Saliency needs input gradients through SB3's preprocessing; they equal those of SB3's own path.
    x = torch.as_tensor(obs).requires_grad_(True)
    (g,) = torch.autograd.grad(agent.policy.forward(x)[1].sum(), x)
    x2 = torch.as_tensor(obs).requires_grad_(True)
    (g_ref,) = torch.autograd.grad(model.policy.predict_values(x2).sum(), x2)
    assert g.abs().max() > 0
    torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-6 * float(g_ref.abs().max()))


def test_sb3_zip_needs_the_right_env(ppo_zip):
    _, path = ppo_zip
    with pytest.raises(UsageError, match="does not record its environment; pass env="):
        load_agent(path)
    with pytest.raises(EnvError, match=r"trained on observations of shape \(4,\).*gives \(6,\)"):
        load_agent(path, env="Acrobot-v1")


def test_truncated_sb3_zip_is_a_checkpoint_error(ppo_zip, tmp_path):
    _, path = ppo_zip
    cut = tmp_path / "cut.zip"
    cut.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(CheckpointError, match=f"{cut} is a truncated or corrupt zip archive"):
        load_agent(cut, env="CartPole-v1")


def _rewrite_data(src, dst, edit):
    src_zip = zipfile.ZipFile(src)
    with zipfile.ZipFile(dst, "w") as out:
        for name in src_zip.namelist():
            blob = src_zip.read(name)
            if name == "data":
                doc = json.loads(blob)
                edit(doc)
                blob = json.dumps(doc).encode()
            out.writestr(name, blob)


class _Touch:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_sb3_zip_loads_without_unpickling(ppo_zip, tmp_path):
    """A cloudpickled field that would run code is never unpickled by default; trust=True runs SB3's loader."""
    model, path = ppo_zip
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil.zip"
    payload = base64.b64encode(__import__("pickle").dumps(_Touch(marker))).decode()

    def edit(doc):
        doc["lr_schedule"][":serialized:"] = payload

    _rewrite_data(path, evil, edit)
    agent = load_agent(evil, env="CartPole-v1")
    assert not marker.exists()
    obs = _cartpole_obs(4)
    torch.testing.assert_close(agent.policy.forward(torch.as_tensor(obs))[0], _sb3_reference(model.policy, obs)[0],
                               rtol=1e-5, atol=1e-6)
    load_agent(evil, env="CartPole-v1", trust=True)  # SB3's own loader cloudpickles every field
    assert marker.exists()


def test_sb3_zip_with_unknown_policy_class_needs_trust(ppo_zip, tmp_path):
    _, path = ppo_zip
    odd = tmp_path / "odd.zip"
    _rewrite_data(path, odd, lambda doc: doc["policy_class"].update({"__module__": "my_project.policies"}))
    with pytest.raises(UnsafeCheckpointError, match="my_project.policies.ActorCriticPolicy.*trust=True"):
        load_agent(odd, env="CartPole-v1")
    assert load_agent(odd, env="CartPole-v1", trust=True).kind == "actor_critic"


def test_sb3_dqn_and_a2c(sb3, tmp_path):
    dqn = sb3.DQN("MlpPolicy", "CartPole-v1", learning_starts=50, buffer_size=500, train_freq=4, seed=0,
                  device="cpu", policy_kwargs={"net_arch": [32]})
    dqn.learn(300)
    dqn.save(tmp_path / "dqn.zip")
    agent = load_agent(tmp_path / "dqn.zip", env="CartPole-v1", device="cpu")
    assert agent.kind == "q" and agent.metadata["algorithm"] == "DQN"
    obs = torch.as_tensor(_cartpole_obs())
    with torch.no_grad():
        q, v = agent.policy.forward(obs)
        torch.testing.assert_close(q, dqn.policy.q_net(obs), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v, q.max(-1).values)

    a2c = sb3.A2C("MlpPolicy", "CartPole-v1", n_steps=8, seed=0, device="cpu")  # RMSprop kwargs are pickled
    a2c.learn(160)
    a2c.save(tmp_path / "a2c.zip")
    agent = load_agent(tmp_path / "a2c.zip", env="CartPole-v1")
    assert agent.metadata["algorithm"] == "A2C"
    ref_logits, ref_values = _sb3_reference(a2c.policy, obs.numpy())
    with torch.no_grad():
        logits, values = agent.policy.forward(obs)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-6)


def test_sb3_box_actions_become_a_gaussian_policy(sb3):
    """(Box actions used to be refused; the outputs are checked against SB3's in test_sb3_continuous.py.)"""
    model = sb3.PPO("MlpPolicy", "Pendulum-v1", n_steps=64, device="cpu")
    policy = to_policy(model, device="cpu")
    assert (policy.action_spec.kind, policy.kind, policy.squash) == ("box", "actor_critic", False)
    obs = np.zeros((2, 3), np.float32)
    with torch.no_grad():
        mean = model.policy.get_distribution(torch.as_tensor(obs)).distribution.mean.numpy()
    np.testing.assert_allclose(policy.evaluate(obs).mean, mean, rtol=1e-5, atol=1e-6)


def test_sb3_policy_converts_to_an_rlviz_checkpoint(ppo_zip, tmp_path):
    model, path = ppo_zip
    policy = load_agent(path, env="CartPole-v1").policy
    out = save_checkpoint(tmp_path / "ppo.pt2", policy, env="CartPole-v1", metadata={"from": "sb3"})
    agent = load_checkpoint(out)
    obs = _cartpole_obs(5, seed=1)
    ref_logits, ref_values = _sb3_reference(model.policy, obs)
    with torch.no_grad():
        logits, values = agent.policy.forward(torch.as_tensor(obs))
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-6)


# -- CleanRL --------------------------------------------------------------------------------------
def _logprobs_and_values(agent, obs, n):
    x = torch.as_tensor(obs, dtype=torch.float32)
    with torch.no_grad():
        logp = torch.stack([agent.get_action_and_value(x, torch.full((len(x),), a))[1] for a in range(n)], -1)
        return logp, agent.get_value(x)[:, 0]


@pytest.mark.parametrize("cls, space, layout", [
    (CartPoleAgent, CARTPOLE.observation_space, (1.0, False)),
    (AtariAgent, PIXELS, (255.0, True)),
])
def test_cleanrl_agent_composes_its_parts_and_matches(cls, space, layout):
    torch.manual_seed(0)
    agent = cls(Envs(space, gym.spaces.Discrete(3)))
    policy = to_policy(agent, observation_space=space, action_space=gym.spaces.Discrete(3), device="cpu")
    assert isinstance(policy.module, CleanRLComposed)
    assert (policy.module.divisor, policy.module.use_network) == layout
    space.seed(7)
    obs = np.stack([space.sample() for _ in range(6)]).astype(np.float32)
    logp, values = _logprobs_and_values(agent, obs, 3)
    out = policy.evaluate(obs)
    np.testing.assert_allclose(out.probs, logp.exp().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.value, values.numpy(), rtol=1e-5, atol=1e-6)
    assert out.kind == "actor_critic"


def test_cleanrl_agent_with_unusual_preprocessing_uses_its_methods():
    torch.manual_seed(0)
    agent = OddAgent(Envs(CARTPOLE.observation_space, CARTPOLE.action_space))
    policy = cleanrl_policy(agent, observation_space=CARTPOLE.observation_space, action_space=CARTPOLE.action_space)
    assert isinstance(policy.module, CleanRLMethods)
    obs = _cartpole_obs(5)
    logp, values = _logprobs_and_values(agent, obs, 2)
    with torch.no_grad():
        got_logp, got_v = policy.forward(torch.as_tensor(obs))
    torch.testing.assert_close(got_logp, logp, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_v, values, rtol=1e-5, atol=1e-6)


def test_cleanrl_state_dict_loads_through_a_file_spec(tmp_path):
    torch.manual_seed(1)
    agent = CartPoleAgent(Envs(CARTPOLE.observation_space, CARTPOLE.action_space))
    path = tmp_path / "ppo.cleanrl_model"
    torch.save(agent.state_dict(), path)
    loaded = load_agent(path, env="CartPole-v1", model=f"{__file__}:CartPoleAgent", device="cpu")
    assert loaded.format == "torch-state-dict" and loaded.kind == "actor_critic"
    obs = _cartpole_obs(8)
    logp, values = _logprobs_and_values(agent, obs, 2)
    with torch.no_grad():
        logits, v = loaded.policy.forward(torch.as_tensor(obs))
    torch.testing.assert_close(torch.log_softmax(logits, -1), logp, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v, values, rtol=1e-5, atol=1e-6)


def test_cleanrl_q_network_is_kind_q(tmp_path):
    torch.manual_seed(2)
    qnet = QNetwork(Envs(CARTPOLE.observation_space, CARTPOLE.action_space))
    torch.save(qnet.state_dict(), tmp_path / "dqn.cleanrl_model")
    loaded = load_agent(tmp_path / "dqn.cleanrl_model", env="CartPole-v1", model=f"{__file__}:QNetwork")
    assert loaded.kind == "q"
    obs = torch.as_tensor(_cartpole_obs(4))
    with torch.no_grad():
        torch.testing.assert_close(loaded.policy.forward(obs)[0], qnet(obs), rtol=0, atol=0)


# -- plain modules and model specs ----------------------------------------------------------------
def test_plain_module_kinds():
    lin = nn.Linear(4, 2)
    assert isinstance(to_policy(lin), TorchPolicy)
    p = to_policy(lin, device="cpu")
    p.forward(torch.zeros(1, 4))
    assert p.kind == "logits"
    with pytest.raises(UsageError, match="cannot use a str as a policy"):
        to_policy("not a model")


def test_build_model_specs():
    m = build_model("rlviz.agent.models:MinAtarAgent(hidden=32)", observation_space=None, action_space=gym.spaces.Discrete(5))
    assert m.actor.out_features == 5 and m.actor.in_features == 32
    with pytest.raises(UsageError, match=r"no value for \['width'\].*Class\(width=\.\.\.\)"):
        build_model(lambda width: nn.Linear(width, 2))
    with pytest.raises(UsageError, match="expected 'pkg.module:Class'"):
        build_model("rlviz.models.NatureCNNAgent")
    with pytest.raises(UsageError, match="Cannot import 'no_such_pkg'"):
        build_model("no_such_pkg:Net")
    with pytest.raises(UsageError, match="name=literal"):
        build_model("rlviz.agent.models:MinAtarAgent(hidden=__import__('os'))")


def test_checkpoint_error_when_weights_are_not_weights(tmp_path):
    path = tmp_path / "junk.pt"
    torch.save({"config": {"lr": 0.1}, "notes": "hello"}, path)
    with pytest.raises(CheckpointError, match="without a state_dict \\(keys: 'config', 'notes'\\)"):
        load_agent(path, env="CartPole-v1", model="rlviz.agent.models:NatureCNNAgent")
    buf = io.BytesIO()
    torch.save([1, 2, 3], buf)
    (tmp_path / "list.pt").write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError, match="holds a list"):
        load_agent(tmp_path / "list.pt", env="CartPole-v1")


class GaussianActor(nn.Module):
    """A user's Box-action actor-critic, built from (obs_shape, action_dim) as rlviz's --model fills them."""

    def __init__(self, obs_shape, action_dim):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_shape[0], 16), nn.Tanh())
        self.mu, self.v = nn.Linear(16, action_dim), nn.Linear(16, 1)
        self.log_std = nn.Parameter(torch.full((action_dim,), -0.3))

    def forward(self, x):
        h = self.body(x)
        return {"mean": self.mu(h), "log_std": self.log_std.expand(x.shape[0], -1), "value": self.v(h)}


def test_box_action_state_dict_loads_through_a_file_spec(tmp_path):
    torch.manual_seed(3)
    actor = GaussianActor((3,), 1)
    torch.save(actor.state_dict(), tmp_path / "actor.pt")
    loaded = load_agent(tmp_path / "actor.pt", env="Pendulum-v1", model=f"{__file__}:GaussianActor", device="cpu")
    assert loaded.policy.action_spec.kind == "box" and loaded.kind == "actor_critic"
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    out = loaded.policy.evaluate(obs)
    with torch.no_grad():
        want = actor(torch.as_tensor(obs))
    np.testing.assert_allclose(out.mean, want["mean"].numpy(), rtol=1e-5, atol=1e-6)  # rlviz forwards 16 rows
    np.testing.assert_allclose(out.std, np.exp(-0.3) * np.ones((5, 1)), rtol=1e-6)
    np.testing.assert_allclose(out.value, want["value"][:, 0].numpy(), rtol=1e-5, atol=1e-6)
