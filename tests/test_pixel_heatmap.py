"""Pixel heatmaps render only the frames before failures (replaying failing episodes), with the counts of
rendering every step."""

import importlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from _envs import PROBE_PIXEL, probe_objects

from rlviz.agent.policy import TorchPolicy
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.failures.objects import FunctionExtractor, MotionExtractor, breakout_extractor
from rlviz.evaluate.rollouts.rollout import rollout

rollout_mod = importlib.import_module("rlviz.evaluate.rollouts.rollout")  # (the package's name is the function)


class _Mlp(torch.nn.Module):
    def __init__(self, n_in, n_act):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Linear(n_in, n_act)
        self.v = torch.nn.Linear(n_in, 1)

    def forward(self, x):
        return self.body(x), self.v(x)[:, 0]


class _Mean(torch.nn.Module):
    """A cheap stochastic Atari policy: logits from the mean pixel of the stacked frames."""

    def forward(self, x):
        m = x.float().mean((1, 2, 3))[:, None] / 255.0
        return m * torch.tensor([[1.0, 3.0, -2.0, 0.5]]), m[:, 0]


def _both(monkeypatch, env_id, policy, episodes, **kw):
    """(rollout rendering every step, rollout replaying failures) with the same plan."""
    monkeypatch.setattr(rollout_mod, "REPLAY_PIXEL_FAILURES", False)
    eager = rollout(env_id, policy, RolloutPlan(episodes, **kw))
    monkeypatch.setattr(rollout_mod, "REPLAY_PIXEL_FAILURES", True)
    return eager, rollout(env_id, policy, RolloutPlan(episodes, **kw))


def _same(a, b):
    assert a.heatmap.object_names == b.heatmap.object_names
    for name in a.heatmap.object_names:
        assert np.array_equal(a.heatmap.counts[name], b.heatmap.counts[name]), name
    assert (a.heatmap.failures, a.heatmap.episodes) == (b.heatmap.failures, b.heatmap.episodes)
    assert [(e.seed, e.ret, e.length, e.failures) for e in a.episodes] == [
        (e.seed, e.ret, e.length, e.failures) for e in b.episodes
    ]


def test_cartpole_motion_heatmap_equals_every_step_and_renders_two_frames_a_failure(monkeypatch):
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    policy = TorchPolicy(_Mlp(4, 2), device="cpu")
    kw = dict(num_envs=3, seed=4, objects=MotionExtractor(), heatmap=True, progress=False)
    eager, lazy = _both(monkeypatch, "CartPole-v1", policy, 8, **kw)
    _same(eager, lazy)
    assert lazy.heatmap.failures == sum(e.terminated for e in lazy.episodes) > 0
    assert lazy.heatmap.counts["moving"].sum() > 0

    renders = []
    real = CartPoleEnv.render
    monkeypatch.setattr(CartPoleEnv, "render", lambda self: renders.append(1) or real(self))
    again = rollout("CartPole-v1", policy, RolloutPlan(8, **kw))
    _same(eager, again)
    # one background frame, then the frame before each failure and the one before it (motion)
    assert len(renders) == 1 + 2 * again.heatmap.failures < again.steps


def test_object_gone_before_the_failure_is_found_in_the_window_by_a_second_replay(monkeypatch):
    ex = FunctionExtractor(probe_objects)
    kw = dict(num_envs=2, seed=11, objects=ex, heatmap=True, progress=False)
    eager, lazy = _both(monkeypatch, "rlviz-probe/Vanish-v0", TorchPolicy(_Mlp(3, 2), device="cpu"), 16, **kw)
    _same(eager, lazy)
    lost = lazy.heatmap.failures
    assert lost > 0 and lazy.heatmap.counts["obj"][PROBE_PIXEL] == lost == lazy.heatmap.counts["obj"].sum()


def test_several_failures_per_episode(monkeypatch):
    kw = dict(num_envs=2, seed=1, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    eager, lazy = _both(monkeypatch, "rlviz-probe/Lives-v0", TorchPolicy(_Mlp(3, 2), device="cpu"), 4, **kw)
    _same(eager, lazy)
    assert lazy.heatmap.failures == 12 and lazy.heatmap.counts["obj"][PROBE_PIXEL] == 12


def test_ale_breakout_colour_masks_from_rendered_frames_equal_every_step(monkeypatch):
    pytest.importorskip("ale_py")
    ex = breakout_extractor()
    ex.needs_frame = True  # read the rendered frames instead of the emulator's screen
    policy = TorchPolicy(_Mean(), device="cpu")
    kw = dict(num_envs=2, seed=0, objects=ex, heatmap=True, progress=False, max_steps=300)
    eager, lazy = _both(monkeypatch, "ALE/Breakout-v5", policy, 2, **kw)
    _same(eager, lazy)
    assert lazy.heatmap.failures >= 2 and lazy.heatmap.counts["ball"].sum() > 0


def test_non_deterministic_env_warns_and_keeps_going(monkeypatch):
    class Flaky(gym.Wrapper):
        made = 0

        def __init__(self, env):
            super().__init__(env)
            Flaky.made += 1
            self.first = Flaky.made == 1  # the rollout's env; the replay's env ends episodes on their first step

        def __deepcopy__(self, memo):  # no snapshots: failing episodes are replayed from their seeds
            raise TypeError("cannot copy")

        def reset(self, *, seed=None, options=None):  # gymnasium's signature (its env checker reads it)
            obs, info = self.env.reset(seed=seed, options=options)
            self.cut = 10**9 if self.first else 1
            return obs, info

        def step(self, a):
            obs, r, term, trunc, info = self.env.step(a)
            self.cut -= 1
            return obs, r, term or self.cut <= 0, trunc, info

    if "rlviz-test/Flaky-v0" not in gym.registry:
        gym.register("rlviz-test/Flaky-v0", entry_point=lambda render_mode=None: Flaky(
            gym.make("rlviz-probe/Lives-v0", render_mode=render_mode)))
    policy = TorchPolicy(_Mlp(3, 2), device="cpu")
    with pytest.warns(UserWarning, match="not deterministic under its seed"):
        res = rollout("rlviz-test/Flaky-v0", policy, RolloutPlan(1, num_envs=1, seed=0, heatmap=True, progress=False,
                                                                 objects=FunctionExtractor(probe_objects)))
    assert res.episodes[0].failures == 3 and res.heatmap.failures < 3


class _Balancer(torch.nn.Module):
    """CartPole: push toward the pole's fall, sampled softly: episodes of a few hundred steps."""

    def forward(self, x):
        s = 4.0 * (x[:, 2] + 0.3 * x[:, 3] + 0.02 * x[:, 1])
        return torch.stack([-s, s], 1), x[:, 0] * 0


def test_long_episodes_replay_from_snapshots_not_from_the_start(monkeypatch):
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    policy = TorchPolicy(_Balancer(), device="cpu")
    kw = dict(num_envs=2, seed=1, objects=MotionExtractor(), heatmap=True, progress=False)
    steps = []
    real = CartPoleEnv.step
    monkeypatch.setattr(CartPoleEnv, "step", lambda self, a: steps.append(1) or real(self, a))
    lazy = rollout("CartPole-v1", policy, RolloutPlan(2, **kw))
    replayed = len(steps) - lazy.steps - 2 * 24  # less the rollout's own steps and the copy check
    monkeypatch.setattr(rollout_mod, "REPLAY_PIXEL_FAILURES", False)
    _same(rollout("CartPole-v1", policy, RolloutPlan(2, **kw)), lazy)  # the reference renders every step
    failed = [e for e in lazy.episodes if e.terminated]
    assert any(e.length > 256 for e in failed) and lazy.heatmap.failures == len(failed)
    # at most two snapshot intervals a failure, fewer steps than replaying the failed episodes whole
    assert 0 < replayed <= 256 * len(failed) and replayed < sum(e.length for e in failed)


def test_short_episodes_replay_from_their_seed_without_copying_the_env(monkeypatch):
    import copy

    pixel_heatmap = importlib.import_module("rlviz.evaluate.failures.pixel_heatmap")
    copies = []
    real = copy.deepcopy
    monkeypatch.setattr(pixel_heatmap.copy, "deepcopy",
                        lambda x, *a: (isinstance(x, gym.Env) and copies.append(x)) or real(x, *a))
    policy = TorchPolicy(_Mlp(4, 2), device="cpu")
    kw = dict(num_envs=3, seed=4, objects=MotionExtractor(), heatmap=True, progress=False)
    lazy = rollout("CartPole-v1", policy, RolloutPlan(8, **kw))
    assert max(e.length for e in lazy.episodes) < 128 and lazy.heatmap.failures == 8
    assert len(copies) == 1  # copies_faithfully's check; step 0 of an episode is its seed, not a copy
    monkeypatch.undo()
    _same(_both(monkeypatch, "CartPole-v1", policy, 8, **kw)[0], lazy)
