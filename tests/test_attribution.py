"""Explanation methods as types: the Attribution classes (captum's shape: output like the input, nothing changed),
the registry of method names, one capabilities record per policy and the one rule on what a policy supports."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlviz import CallablePolicy, RecordEpisode, RecordOptions, TorchPolicy, UsageError, attribute
from rlviz.agent.capabilities import PolicyCapabilities, capabilities_of
from rlviz.agent.policy import Policy
from rlviz.agent.policy_output import PolicyOutput
from rlviz.agent.stepping import plain
from rlviz.attention.maps import AttributionProbe
from rlviz.choices import SALIENCY_METHODS
from rlviz.episode.trace import EpisodeInternals, PolicyFields
from rlviz.explain import (
    ATTRIBUTIONS,
    Attribution,
    Gradient,
    Perturbation,
    SmoothGrad,
    attribution_class,
)

OBS_SHAPE = (2, 3, 4)  # channels first: 2 channels, a 3 x 4 image


class Linear(nn.Module):
    """logits = W x + b, value = v . x (x flattened): d logit_a / d x = W[a], d value / d x = v, exactly."""

    def __init__(self, n_in: int = 24, n_actions: int = 3):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.pi = nn.Linear(n_in, n_actions)
        self.v = nn.Linear(n_in, 1)
        with torch.no_grad():
            self.pi.weight.copy_(torch.randn(n_actions, n_in, generator=g))
            self.v.weight.copy_(torch.randn(1, n_in, generator=g))

    def forward(self, x):
        flat = x.reshape(x.shape[0], -1)
        return self.pi(flat), self.v(flat)[:, 0]


def _linear_policy() -> tuple[TorchPolicy, np.ndarray, np.ndarray]:
    module = Linear()
    w = module.pi.weight.detach().numpy().reshape(3, *OBS_SHAPE)
    v = module.v.weight.detach().numpy().reshape(*OBS_SHAPE)
    return TorchPolicy(module, device="cpu"), w, v


def _obs(n: int = 5, shape=OBS_SHAPE, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)


def test_gradient_of_a_linear_policy_is_its_weights_shaped_like_the_input():
    policy, w, v = _linear_policy()
    obs = _obs()
    actions = np.array([0, 2, 1, 1, 0])
    method = Gradient(policy)
    att = method.attribute(obs, target="action", actions=actions)
    assert att.shape == obs.shape and att.dtype == np.float32
    np.testing.assert_allclose(att, np.abs(w[actions]), rtol=1e-6, atol=0)
    np.testing.assert_allclose(method.attribute(obs, target=2), np.abs(np.broadcast_to(w[2], obs.shape)), rtol=1e-6)
    np.testing.assert_allclose(method.attribute(obs, target="value"), np.abs(np.broadcast_to(v, obs.shape)),
                               rtol=1e-6)
    # maps: the max over the channel axis, as the videos draw it; the functional front is the same
    maps = method.maps(obs, target="action", actions=actions)
    np.testing.assert_allclose(maps, np.abs(w[actions]).max(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(attribute(policy, obs, method="gradient", actions=actions), maps)
    np.testing.assert_array_equal(attribute(policy, obs, method=Gradient, actions=actions), maps)


def test_gradient_times_input_is_attentions_attribution():
    policy, w, _ = _linear_policy()
    obs = _obs()
    att = Gradient(policy, times_input=True).attribute(obs, target=1)
    np.testing.assert_allclose(att, np.abs(w[1] * obs), rtol=1e-6)
    maps = Gradient(policy, times_input=True).maps(obs, target=1)
    np.testing.assert_allclose(maps, np.abs(w[1] * obs).sum(axis=1), rtol=1e-5)


def test_smoothgrad_of_a_linear_policy_is_the_gradient():
    policy, w, _ = _linear_policy()
    obs = _obs()
    att = SmoothGrad(policy, n_samples=4).attribute(obs, target=0)
    assert att.shape == obs.shape
    np.testing.assert_allclose(att, np.abs(np.broadcast_to(w[0], obs.shape)), rtol=1e-6)


def test_perturbation_gives_its_map_to_every_channel():
    policy = TorchPolicy(nn.Sequential(nn.Flatten(), nn.Linear(10 * 10 * 4, 3)), device="cpu", kind="logits")
    obs = (np.random.default_rng(1).random((3, 10, 10, 4)) > 0.8)  # MinAtar-like bool grids, channels last
    method = Perturbation(policy)
    att, maps = method.attribute(obs), method.maps(obs)
    assert att.shape == obs.shape and maps.shape == (3, 10, 10)
    assert maps.max() > 0
    for c in range(4):
        np.testing.assert_array_equal(att[..., c], maps)
    with pytest.raises(UsageError, match="blurs image regions"):
        Perturbation(policy).attribute(_obs(2, (4,)))


@pytest.mark.parametrize("name", SALIENCY_METHODS)
def test_nothing_the_caller_passed_is_changed(name):
    obs = _obs(4, (2, 10, 10))
    policy = TorchPolicy(nn.Sequential(nn.Flatten(), nn.Linear(200, 3)), device="cpu", kind="logits")
    module = policy.module
    module.train()
    before = obs.copy()
    x = torch.as_tensor(obs.copy())
    method = attribution_class(name)(policy)
    out_np, out_t = method.attribute(obs), method.attribute(x)
    assert out_np.shape == obs.shape
    np.testing.assert_array_equal(out_np, out_t)
    np.testing.assert_array_equal(obs, before)
    np.testing.assert_array_equal(x.numpy(), before)
    assert not x.requires_grad and x.grad is None
    assert all(p.grad is None for p in module.parameters())
    assert module.training  # the module's mode is left as it was


def test_the_registry_maps_every_cli_name_to_its_class():
    assert tuple(ATTRIBUTIONS) == SALIENCY_METHODS
    policy, _, _ = _linear_policy()
    for name in SALIENCY_METHODS:
        cls = attribution_class(name)
        assert cls.name == name and ATTRIBUTIONS[name] is cls and attribution_class(cls) is cls
        assert isinstance(cls(policy), Attribution)
    assert [n for n, c in ATTRIBUTIONS.items() if c.gradients] == ["gradient", "smoothgrad"]
    assert [n for n, c in ATTRIBUTIONS.items() if c.from_forward] == ["gradient"]
    with pytest.raises(UsageError, match="'occlusion' is not known; use one of 'gradient', 'smoothgrad'"):
        attribution_class("occlusion")
    with pytest.raises(UsageError, match="is not known"):
        attribute(policy, _obs(), method="occlusion")
    with pytest.raises(UsageError, match="'gradient' does not take n_samples; its options are reduce"):
        Gradient(policy, n_samples=4)  # refused when the method is built, before any input


def _message(call) -> str:
    with pytest.raises(UsageError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("name", ["gradient", "smoothgrad"])
def test_a_forward_only_policy_is_refused_by_one_rule_with_one_message(tmp_path, name):
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    policy = CallablePolicy(lambda o: np.zeros((o.shape[0], 2), np.float32), action_space=env.action_space)
    obs = np.zeros((1, 4), np.float32)
    by_attribute = _message(lambda: attribute(policy, obs, method=name))
    by_recorder = _message(lambda: RecordEpisode(env, tmp_path, policy=policy, options=RecordOptions(saliency=name)))
    by_attention = _message(lambda: AttributionProbe(policy, obs[0], method=name))
    assert by_attribute == by_recorder == by_attention
    assert f"saliency '{name}' takes gradients" in by_attribute
    assert "forward-only (CallablePolicy" in by_attribute and "perturbation" in by_attribute
    RecordEpisode(env, tmp_path, policy=policy, options=RecordOptions(saliency="perturbation")).close()  # needs forward passes only
    assert not capabilities_of(policy).differentiable


class _Recurrent(Policy):
    stateful = True
    num_actions = 2

    def forward(self, obs):
        return obs[:, :2] * 1.0, None


def test_a_recurrent_policy_is_refused_with_the_same_message(tmp_path):
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    policy = _Recurrent()
    obs = np.zeros((1, 4), np.float32)
    by_attribute = _message(lambda: attribute(policy, obs, method="perturbation"))
    by_recorder = _message(lambda: RecordEpisode(env, tmp_path, policy=policy, options=RecordOptions(saliency="perturbation")))
    assert by_attribute == by_recorder and "recurrent (_Recurrent" in by_attribute
    env.close()


class _Bare(Policy):
    """A user's own Policy that declares nothing."""

    def forward(self, obs):
        return obs, None


class _Declared(Policy):
    capabilities = PolicyCapabilities(differentiable=False, obs_format="raw")  # type: ignore[assignment]

    def forward(self, obs):
        return obs, None


class _DuckTyped:
    """Not a Policy at all: only what it sets is read, the rest are the defaults."""

    needs_action_masks = True


def test_capabilities_derived_once_with_the_defaults():
    bare = _Bare()
    caps = capabilities_of(bare)
    assert caps == PolicyCapabilities() and bare.capabilities is caps and capabilities_of(bare) is caps
    assert caps.plain and caps.differentiable and caps.dist == "categorical" and not caps.continuous_actions
    assert capabilities_of(_Declared()) == PolicyCapabilities(differentiable=False, obs_format="raw")
    duck = capabilities_of(_DuckTyped())
    assert duck == PolicyCapabilities(action_masks=True) and not duck.plain and not plain(_DuckTyped())
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.differentiable = False  # type: ignore[misc]


def test_capabilities_of_each_sources_policy(tmp_path):
    from stable_baselines3 import PPO, SAC

    from rlviz import load_checkpoint, save_checkpoint
    from rlviz.agent.masking import MaskedTorchPolicy
    from rlviz.sources import to_policy

    assert capabilities_of(TorchPolicy(Linear(), device="cpu")) == PolicyCapabilities()
    assert capabilities_of(to_policy(Linear(), device="cpu")) == PolicyCapabilities()
    masked = MaskedTorchPolicy(Linear(), num_actions=3, device="cpu")
    assert capabilities_of(masked) == PolicyCapabilities(action_masks=True) and not plain(masked)
    ppo = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    ppo.learn(32)
    caps = capabilities_of(to_policy(ppo, device="cpu"))
    assert caps == PolicyCapabilities(obs_format="raw") and caps.differentiable and caps.plain
    sac = SAC("MlpPolicy", "Pendulum-v1", learning_starts=0, buffer_size=100, seed=0, device="cpu")
    sac.learn(8)
    caps = capabilities_of(to_policy(sac, device="cpu"))
    assert caps.squash and caps.continuous_actions and caps.actions == "box" and caps.dist == "gaussian"
    assert caps.obs_format == "raw" and caps.differentiable
    space = gym.make("Pendulum-v1").action_space
    path = save_checkpoint(tmp_path / "actor.pt2", TorchPolicy(nn.Linear(3, 2), action_space=space, squash=True),
                           env="Pendulum-v1", kind="logits")
    caps = capabilities_of(load_checkpoint(path).policy)
    assert caps.squash and caps.actions == "box" and caps.differentiable and caps.plain


def test_policy_fields_are_declared_once():
    names = [f.name for f in dataclasses.fields(PolicyFields)]
    assert [f.name for f in dataclasses.fields(PolicyOutput)] == names
    assert [f.name for f in dataclasses.fields(EpisodeInternals)][: len(names)] == names
    logits = np.zeros((3, 2), np.float32)
    out = PolicyOutput(logits, logits + 0.5, None, "logits")
    internals = EpisodeInternals(out.logits, out.probs, out.value, out.kind, entropy=out.entropy,
                                 returns_to_go=np.zeros(3, np.float32), gamma=0.9)
    assert internals.dist == out.dist == "categorical" and internals.kind == "logits"
    np.testing.assert_allclose(internals.entropy, 1.0)
    with pytest.raises(TypeError, match="entropy"):  # what is not a policy's output is given by keyword
        EpisodeInternals(out.logits, out.probs, out.value, out.entropy, np.zeros(3), 0.9, "logits")  # type: ignore[misc]
