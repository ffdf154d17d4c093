"""Saliency: hand-derived gradients, localisation, batching invariance, no side effects, one scale per episode."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.agent.models import MinAtarAgent
from rlviz.agent.policy import TorchPolicy
from rlviz.episode import Spool
from rlviz.errors import UsageError
from rlviz.explain.perturbation import gaussian_blur, mask_grid
from rlviz.explain.saliency import (
    AttributionOptions,
    attribute,
    detect_layout,
    episode_saliency,
    episode_scale,
    normalise_episode,
)

METHODS = ("gradient", "smoothgrad", "perturbation")


class LinearAC(nn.Module):
    """logits = W x + b, value = v . x on the flattened observation."""

    def __init__(self, obs_shape, num_actions=3, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        n = int(np.prod(obs_shape))
        self.W = nn.Parameter(torch.randn(num_actions, n, generator=g))
        self.b = nn.Parameter(torch.randn(num_actions, generator=g))
        self.v = nn.Parameter(torch.randn(n, generator=g))

    def forward(self, obs):
        x = obs.float().flatten(1)
        return x @ self.W.T + self.b, x @ self.v


class RegionNet(nn.Module):
    """A CNN on [B, 4, 84, 84] whose outputs depend only on obs[..., 10:20, 30:40]."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(4, 8, 3)
        self.head = nn.Linear(8 * 8 * 8, 4)
        self.critic = nn.Linear(8 * 8 * 8, 1)

    def forward(self, obs):
        h = torch.tanh(self.conv(obs[:, :, 10:20, 30:40].float() / 255.0)).flatten(1)
        return self.head(h) * 10, self.critic(h)[:, 0] * 10


def _rng_obs(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.2
    return rng.integers(0, 256, shape).astype(dtype)


# -- exact gradients of a linear policy ---------------------------------------------------------


@pytest.mark.parametrize("obs_shape,spec", [((2, 12, 16), "chw"), ((10, 10, 3), "hwc"), ((9, 11), "hw")])
def test_linear_gradient_is_abs_weight_row_reduced(obs_shape, spec):
    module = LinearAC(obs_shape)
    policy = TorchPolicy(module, device="cpu")
    obs = _rng_obs((5,) + obs_shape, dtype=np.bool_ if spec == "hwc" else np.float32)
    actions = np.array([0, 1, 2, 1, 0])
    lay = detect_layout(obs_shape, obs.dtype)
    assert lay.spec == spec
    W = module.W.detach().numpy().reshape((3,) + obs_shape)
    v = module.v.detach().numpy().reshape(obs_shape)
    h_ax, w_ax = spec.index("h"), spec.index("w")
    other = tuple(i for i in range(len(spec)) if i not in (h_ax, w_ax))

    def reduce(a, how=np.max):
        a = np.moveaxis(np.abs(a), (h_ax, w_ax), (-2, -1))
        return how(a.reshape((-1,) + a.shape[-2:]), axis=0) if other else a

    got = attribute(policy, obs, "gradient", "action", actions)
    np.testing.assert_array_equal(got, np.stack([reduce(W[a]) for a in actions]))
    got_sum = attribute(policy, obs, "gradient", "action", actions, reduce="sum")
    np.testing.assert_allclose(got_sum, np.stack([reduce(W[a], np.sum) for a in actions]), rtol=1e-6)
    np.testing.assert_array_equal(attribute(policy, obs, "gradient", "value"), np.stack([reduce(v)] * 5))
    np.testing.assert_array_equal(attribute(policy, obs, "gradient", 2), np.stack([reduce(W[2])] * 5))
    # default actions = argmax of the logits
    greedy = policy.evaluate(obs).logits.argmax(-1)
    np.testing.assert_array_equal(attribute(policy, obs), np.stack([reduce(W[a]) for a in greedy]))
    # log-softmax: d log p_a / dx = W[a] - sum_j p_j W[j]
    probs = policy.evaluate(obs).probs.astype(np.float64)
    expect = [reduce(W[a] - np.tensordot(probs[i], W, axes=1)) for i, a in enumerate(actions)]
    np.testing.assert_allclose(attribute(policy, obs, "gradient", "logprob", actions), np.stack(expect), rtol=1e-4,
                               atol=1e-5)


def test_smoothgrad_of_linear_policy_is_the_gradient():
    # the gradient of a linear model does not depend on the input, so noise changes nothing
    module = LinearAC((2, 12, 16))
    policy = TorchPolicy(module, device="cpu")
    obs = _rng_obs((3, 2, 12, 16))
    actions = np.array([2, 0, 1])
    np.testing.assert_allclose(
        attribute(policy, obs, "smoothgrad", actions=actions, n_samples=5),
        attribute(policy, obs, "gradient", actions=actions),
        rtol=1e-6,
    )


# -- localisation -------------------------------------------------------------------------------


def test_region_network_maps_stay_in_the_region():
    policy = TorchPolicy(RegionNet(), device="cpu")
    obs = _rng_obs((2, 4, 84, 84), seed=3)
    grad = attribute(policy, obs, "gradient")
    outside = np.ones((84, 84), bool)
    outside[10:20, 30:40] = False
    assert grad[:, ~outside].max() > 0 and np.all(grad[:, outside] == 0)

    for target in ("action", "value"):
        pert = attribute(policy, obs, "perturbation", target)
        for m in pert:
            y, x = np.unravel_index(np.argmax(m), m.shape)
            assert 7 <= y <= 22 and 27 <= x <= 42, (target, y, x)  # region, +- under one stride
            assert m[50:, :].max() < 1e-6 * m.max() and m[:, 70:].max() < 1e-6 * m.max()


def test_masks_and_blur():
    grid = mask_grid(84, 84, 5.0, 5, "cpu")
    assert grid.masks.shape == (289, 84, 84) and grid.grid_shape == (17, 17)
    assert torch.allclose(grid.masks.amax(dim=(1, 2)), torch.ones(289))
    s = torch.rand(2, 17, 17)
    np.testing.assert_allclose(grid.upsample(torch.full((1, 17, 17), 3.0)).numpy(), 3.0, rtol=1e-6)
    up = mask_grid(81, 81, 5.0, 5, "cpu").upsample(s)  # centres at 0, 5, ..., 80: exact there, linear between
    np.testing.assert_allclose(up[:, ::5, ::5].numpy(), s.numpy(), rtol=1e-6)
    np.testing.assert_allclose(up[:, 2, 0].numpy(), (0.6 * s[:, 0, 0] + 0.4 * s[:, 1, 0]).numpy(), rtol=1e-5)
    cell = mask_grid(10, 10, 0.5, 1, "cpu")
    assert cell.masks.shape == (100, 10, 10) and float(cell.masks[0, 0, 0]) == 1.0
    assert abs(float(cell.masks[0, 0, 1]) - np.exp(-2)) < 1e-6
    np.testing.assert_array_equal(cell.upsample(s[:, :10, :10]).numpy(), s[:, :10, :10].numpy())
    x = torch.zeros(1, 1, 84, 84)
    x[0, 0, 40, 40] = 1
    b = gaussian_blur(x, 3.0)[0, 0]
    assert abs(float(b.sum()) - 1) < 1e-5 and float(b[40, 40]) == float(b.max())
    assert abs(float(b[40, 43] / b[40, 40]) - np.exp(-0.5)) < 1e-4  # sigma 3
    g = torch.rand(2, 4, 10, 10)
    assert torch.allclose(gaussian_blur(g, None), g.mean(dim=(2, 3), keepdim=True).expand_as(g))


# -- batching -----------------------------------------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.net = nn.Sequential(nn.Conv2d(4, 8, 8, stride=4), nn.ReLU(), nn.Conv2d(8, 8, 4, stride=2), nn.ReLU(),
                                 nn.Flatten(), nn.Linear(8 * 9 * 9, 32), nn.ReLU())
        self.actor, self.critic = nn.Linear(32, 4), nn.Linear(32, 1)

    def forward(self, obs):
        h = self.net(obs.float() / 255.0)
        return self.actor(h), self.critic(h)[:, 0]


@pytest.mark.parametrize(
    "method,target",
    [("gradient", "action"), ("gradient", "value"), ("gradient", "logprob"), ("smoothgrad", "action"),
     ("smoothgrad", "value"), ("perturbation", "action"), ("perturbation", "value"), ("perturbation", "logprob")],
)
def test_batched_equals_per_frame_and_chunking_does_not_matter(method, target):
    opts = {"stride": 12} if method == "perturbation" else {"n_samples": 3} if method == "smoothgrad" else {}
    # 0.5 * (log p - log p')^2 squares a difference of nearly equal float32 numbers: looser relative tolerance
    rtol = 2e-3 if target == "logprob" and method == "perturbation" else 1e-4
    for module, obs in (
        (SmallCNN(), _rng_obs((3, 4, 84, 84), seed=5)),
        (MinAtarAgent(3), _rng_obs((3, 10, 10, 4), seed=6, dtype=np.bool_)),
    ):
        policy = TorchPolicy(module, device="cpu")
        ref = attribute(policy, obs, method, target, **opts)
        assert ref.shape == ((3, 84, 84) if isinstance(module, SmallCNN) else (3, 10, 10))
        assert ref.dtype == np.float32 and ref.min() >= 0 and ref.max() > 0
        per_frame = np.concatenate([attribute(policy, obs[i : i + 1], method, target, **opts) for i in range(3)])
        tol = 1e-5 * ref.max()
        np.testing.assert_allclose(per_frame, ref, rtol=rtol, atol=tol)
        for bs in (2, 1000):
            np.testing.assert_allclose(attribute(policy, obs, method, target, options=AttributionOptions(batch_size=bs), **opts), ref,
                                       rtol=rtol, atol=tol)
        # tensors in, same maps out
        np.testing.assert_allclose(attribute(policy, torch.as_tensor(obs), method, target, **opts), ref, rtol=rtol,
                                   atol=tol)


# -- no side effects ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_no_side_effects(method):
    module = SmallCNN().train()
    policy = TorchPolicy(module, device="cpu")
    module.train()  # TorchPolicy puts modules in eval mode; saliency must leave whatever mode it finds
    obs = torch.rand(2, 4, 84, 84) * 255
    obs.requires_grad_(True)
    obs.grad = torch.full_like(obs, 7.0)
    plain = torch.rand(2, 4, 84, 84) * 255
    opts = {"stride": 20} if method == "perturbation" else {}
    with torch.no_grad():  # also works when called inside no_grad
        maps = attribute(policy, obs, method, **opts)
    attribute(policy, plain, method, "value", **opts)
    assert maps.max() > 0
    assert obs.requires_grad and torch.equal(obs.grad, torch.full_like(obs, 7.0))
    assert not plain.requires_grad and plain.grad is None
    assert all(p.grad is None for p in module.parameters())
    assert module.training and all(m.training for m in module.modules())
    module.eval()
    attribute(policy, plain, method, **opts)
    assert not any(m.training for m in module.modules())


def test_batchnorm_in_training_mode_is_refused():
    module = nn.Sequential(nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 82 * 82, 2))
    policy = TorchPolicy(module, device="cpu")
    module.train()
    with pytest.raises(UsageError, match="eval"):
        attribute(policy, np.zeros((2, 4, 84, 84), np.float32))
    module.eval()
    assert attribute(policy, np.ones((2, 4, 84, 84), np.float32)).shape == (2, 84, 84)


# -- errors -------------------------------------------------------------------------------------


def test_usage_errors():
    cart = TorchPolicy(nn.Linear(4, 2), device="cpu")
    assert attribute(cart, np.zeros((3, 4), np.float32)).shape == (3, 4)  # vectors: one number per feature
    with pytest.raises(UsageError, match="Use --saliency gradient"):
        attribute(cart, np.zeros((3, 4), np.float32), method="perturbation")
    logits_only = TorchPolicy(lambda x: x.flatten(1)[:, :3] * 2, kind="logits", device="cpu")
    with pytest.raises(UsageError, match="no value head"):
        attribute(logits_only, np.ones((1, 3, 8, 8), np.float32), target="value")
    policy = TorchPolicy(LinearAC((10, 10, 10)), device="cpu")
    with pytest.raises(UsageError, match="layout"):
        attribute(policy, np.ones((1, 10, 10, 10), np.float32))
    assert attribute(policy, np.ones((1, 10, 10, 10), bool)).shape == (1, 10, 10)  # MinAtar: bool = channels last
    assert detect_layout((10, 10, 10), np.float32, layout="chw").spec == "chw"
    ok = np.ones((2, 10, 10, 10), np.float32)
    for kwargs, match in (
        ({"method": "occlusion"}, "method"),
        ({"target": "q"}, "target"),
        ({"target": 3}, "3 actions"),
        ({"actions": np.array([0, 5])}, "0..2"),
        ({"actions": np.array([0.5, 1])}, "integers"),
        ({"method": "gradient", "n_samples": 3}, "n_samples"),
        ({"layout": "cxy"}, "layout"),
    ):
        with pytest.raises(UsageError, match=match):
            attribute(policy, ok, options=AttributionOptions(layout=kwargs.pop("layout", "hwc")), **kwargs)


# -- one scale per episode ----------------------------------------------------------------------


def test_normalise_episode_uses_one_scale():
    rng = np.random.default_rng(0)
    frame = rng.random((12, 12)).astype(np.float32)
    maps = np.stack([frame, 0.5 * frame, np.zeros_like(frame)])
    out = normalise_episode(maps, percentile=100)
    assert out.dtype == np.float32 and out.max() == 1.0
    np.testing.assert_allclose(out[1], 0.5 * out[0], rtol=1e-6)  # half the gradient stays half as bright
    assert np.all(out[2] == 0)
    clipped = normalise_episode(maps)  # default: the 99.5th percentile of the episode, brighter pixels clip at 1
    np.testing.assert_allclose(clipped, np.clip(maps / np.percentile(maps, 99.5), 0, 1), rtol=1e-6)
    assert clipped.max() == 1.0
    np.testing.assert_array_equal(normalise_episode(np.zeros((2, 3, 3))), np.zeros((2, 3, 3), np.float32))


@pytest.mark.parametrize("q", [0, 37.3, 99.5, 100])
def test_episode_scale_matches_numpy_percentile_in_chunks(q):
    rng = np.random.default_rng(1)
    maps = np.concatenate([rng.exponential(size=(40, 7, 9)), np.zeros((10, 7, 9))]).astype(np.float32)
    maps[3, 2, 2] = maps[5, 1, 1] = 1000.0  # outliers squeeze the histogram; ties at zero
    for chunk in (63, 1000, 1 << 22):
        assert np.isclose(episode_scale(maps, q, chunk_elems=chunk), np.percentile(maps, q), rtol=1e-6, atol=0)


# -- episodes from a real env -------------------------------------------------------------------


def _minatar_episode(tmp_path, steps=12):
    from rlviz.envs import make_env

    env = make_env("MinAtar/Breakout-v1")
    spool = Spool((10, 10, 4), np.bool_, dir=tmp_path, name="obs")
    obs, _ = env.reset(seed=0)
    spool.append(obs)
    actions = []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        a = int(rng.integers(3))
        obs, _r, term, trunc, _ = env.step(a)
        actions.append(a)
        spool.append(obs)
        if term or trunc:
            break
    env.close()
    return spool, np.array(actions, np.int64)


@pytest.mark.parametrize("method", METHODS)
def test_episode_saliency_on_a_minatar_episode(tmp_path, method):
    pytest.importorskip("minatar")
    spool, actions = _minatar_episode(tmp_path)
    observations = spool.view()  # disk-backed, read in chunks (a trace.SpoolArray or memmap)
    assert observations.shape[1:] == (10, 10, 4)
    policy = TorchPolicy(MinAtarAgent(3), device="cpu")
    opts = {"n_samples": 4} if method == "smoothgrad" else {}
    maps, label = episode_saliency(policy, observations, actions, method, "action",
                                   options=AttributionOptions(chunk=5), **opts)
    t1 = observations.shape[0]
    assert maps.shape == (t1, 10, 10) and maps.dtype == np.float32 and isinstance(maps, np.memmap)
    assert label == f"{method} · chosen action's logit" and 0 <= maps.min() and maps.max() == 1.0
    last = policy.evaluate(np.asarray(observations[-1:])).logits.argmax(-1)
    raw = attribute(policy, np.asarray(observations), method, actions=np.concatenate([actions, last]), **opts)
    np.testing.assert_allclose(maps, normalise_episode(raw), rtol=1e-5, atol=1e-6)
    same, _ = episode_saliency(policy, observations, actions, method,
                               options=AttributionOptions(chunk=1000), **opts)
    np.testing.assert_allclose(same, maps, rtol=1e-5, atol=1e-6)
    _, critic = episode_saliency(policy, observations, actions, method, "value", **opts)
    assert critic == f"{method} · value"
    with pytest.raises(UsageError, match="actions"):
        episode_saliency(policy, observations, actions[:-1], method)
    spool.close()


# -- CPU vs CUDA --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", METHODS)
def test_cpu_and_cuda_agree(method):
    from rlviz.agent.models import NatureCNNAgent

    torch.manual_seed(0)
    module = NatureCNNAgent(4)
    cpu = TorchPolicy(module, device="cpu")
    obs = _rng_obs((3, 4, 84, 84), seed=9, dtype=np.uint8)
    opts = {"n_samples": 4} if method == "smoothgrad" else {}
    a = attribute(cpu, obs, method, **opts)
    gpu = TorchPolicy(copy.deepcopy(module), device="cuda")
    b = attribute(gpu, obs, method, **opts)
    np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3 * a.max())
