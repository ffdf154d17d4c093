"""An episode's outcome depends on (agent, env, seed, flags), never on --num-envs: padded fixed-row forwards,
per-episode noise drawn ahead in blocks, MinAtar's sticky action cleared on a seeded reset. And a lone replay
reproduces a rollout's episode exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from _envs import probe_objects
from torch import nn

from rlviz.agent.actions import draw_noise
from rlviz.agent.policy import FORWARD_ROWS, PIXEL_FORWARD_ROWS, TorchPolicy
from rlviz.envs import make_env
from rlviz.envs.ale_seed import seeded_reset
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.backends.threads import torch_threads
from rlviz.evaluate.failures.objects import FunctionExtractor
from rlviz.evaluate.rollouts.rollout import replay_episode, rollout
from rlviz.sources.checkpoint import load_checkpoint

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def fields(e) -> tuple:
    """Every field of an episode, its actions (an array) as a list."""
    return tuple(x.tolist() if isinstance(x, np.ndarray) else x for x in dataclasses.astuple(e))


def rows(result) -> list[tuple]:
    """Every field of every episode (returns, lengths, seeds, entropies, value sums, diagnostics, actions...)."""
    return [fields(e) for e in result.episodes]


def same_counts(a, b) -> bool:
    return a.object_names == b.object_names and all(np.array_equal(a.counts[k], b.counts[k]) for k in a.counts)


def same_episode(a, b) -> None:
    assert fields(a) == fields(b)


@pytest.fixture(scope="module")
def minatar():
    return load_checkpoint(SAMPLES / "minatar_breakout_ppo.pt2", device="cpu")


def test_minatar_num_envs_1_4_16_give_identical_episodes_and_heatmaps(minatar):
    runs = {n: rollout(minatar.recipe, minatar.policy, RolloutPlan(16, num_envs=n, seed=7, heatmap=True,
                                                                   progress=False, threads=1)) for n in (1, 4, 16)}
    assert len({e.ret for e in runs[1].episodes}) > 1  # sampled actions: the episodes differ from each other
    for n in (4, 16):
        assert rows(runs[n]) == rows(runs[1])
        assert runs[n].heatmap.failures == runs[1].heatmap.failures > 0
        assert same_counts(runs[n].heatmap, runs[1].heatmap)


def test_minatar_replay_reproduces_rollout_episodes_exactly(minatar):
    res = rollout(minatar.recipe, minatar.policy, RolloutPlan(5, num_envs=5, seed=2, progress=False))
    with torch_threads(1):
        for e in res.episodes[1::2]:
            same_episode(replay_episode(minatar.recipe, minatar.policy, e), e)


def test_minatar_seeded_reset_forgets_the_previous_episodes_sticky_action():
    used, fresh = make_env("MinAtar/Breakout-v1"), None
    try:
        for seed in range(30):
            used.reset(seed=1000 + seed)
            for _ in range(5):
                used.step(2)  # leaves last_action = 2 behind (a fresh env has 0)
            fresh = make_env("MinAtar/Breakout-v1")
            a, _ = seeded_reset(used, seed)
            b, _ = seeded_reset(fresh, seed)
            for t in range(20):
                assert np.array_equal(a, b)
                a, ra, *_ = used.step(t % 3)
                b, rb, *_ = fresh.step(t % 3)
                assert ra == rb
            fresh.close()
    finally:
        used.close()


class Linear(nn.Module):
    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


def test_probe_num_envs_1_4_16_give_identical_episodes_and_heatmaps():
    policy = TorchPolicy(Linear(), num_actions=2, device="cpu")
    kw = dict(seed=3, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    runs = {n: rollout("rlviz-probe/Probe-v0", policy, RolloutPlan(20, num_envs=n, **kw)) for n in (1, 4, 16)}
    for n in (4, 16):
        assert rows(runs[n]) == rows(runs[1])
        assert same_counts(runs[n].heatmap, runs[1].heatmap)
    same_episode(replay_episode("rlviz-probe/Probe-v0", policy, runs[16].episodes[13]), runs[16].episodes[13])


class GaussianMlp(nn.Module):
    """A random-init Gaussian actor-critic MLP (GEMMs: the bits of a row depend on the batch size)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.mean, self.v = nn.Linear(64, 1), nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return {"mean": self.mean(h), "log_std": torch.full_like(x[:, :1], -0.5), "value": self.v(h)[:, 0]}


def test_box_actions_num_envs_1_4_16_give_identical_episodes():
    env = make_env("Pendulum-v1")
    policy = TorchPolicy(GaussianMlp(), action_space=env.action_space, device="cpu")
    env.close()
    runs = {n: rollout("Pendulum-v1", policy, RolloutPlan(16, num_envs=n, seed=1, max_steps=25, progress=False,
                                                          threads=1))
            for n in (1, 4, 16)}
    assert rows(runs[4]) == rows(runs[1]) == rows(runs[16])
    same_episode(replay_episode("Pendulum-v1", policy, runs[4].episodes[3], RolloutPlan(1, max_steps=25)),
                 runs[4].episodes[3])


@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_noise_drawn_in_blocks_equals_noise_drawn_step_by_step(kind):
    block = draw_noise(np.random.default_rng(5), (kind, 3), 64)
    rng = np.random.default_rng(5)
    one_by_one = np.concatenate([draw_noise(rng, (kind, 3)) for _ in range(64)])
    assert np.array_equal(block, one_by_one)


def test_forward_rows_follow_the_observation_size_only():
    class Tiny(TorchPolicy):
        def __init__(self):
            pass

    policy = Tiny()
    assert policy.rows_for((4, 84, 84)) == policy.rows_for((64, 64, 3)) == PIXEL_FORWARD_ROWS == 8
    assert policy.rows_for((10, 10, 4)) == policy.rows_for((3,)) == policy.rows_for(()) == FORWARD_ROWS == 16
    policy.forward_rows = 5
    assert policy.rows_for((4, 84, 84)) == 5


@pytest.fixture(scope="module")
def ale():
    return load_checkpoint(SAMPLES / "ale_breakout_ppo.pt2", device="cpu")


def test_pixel_agent_rows_do_not_depend_on_their_neighbours(ale):
    env = make_env(ale.recipe)
    ob, _ = env.reset(seed=1)
    frames = []
    for t in range(60):
        ob, *_ = env.step(t % env.action_space.n)
        frames.append(ob)
    env.close()
    obs = np.stack(frames[::5])  # 12 frames: one whole chunk of 8 and one padded
    with torch_threads(1):
        together = ale.policy.evaluate(obs)
        alone = [ale.policy.evaluate(obs[i : i + 1]) for i in range(len(obs))]
        with torch.no_grad():  # the control: an unpadded forward of 12 rows is not bitwise a forward of 1
            t = ale.policy.to_tensor(obs)
            raw = ale.policy.heads(t)["logits"].numpy()
            raw_alone = np.concatenate([ale.policy.heads(t[i : i + 1])["logits"].numpy() for i in range(len(obs))])
    assert not np.array_equal(raw, raw_alone)
    assert np.array_equal(together.logits, np.concatenate([a.logits for a in alone]))
    assert np.array_equal(together.value, np.concatenate([a.value for a in alone]))


def test_ale_num_envs_1_3_10_give_identical_episodes(ale):
    runs = {n: rollout(ale.recipe, ale.policy, RolloutPlan(10, num_envs=n, seed=4, max_steps=30, progress=False,
                                                           threads=1))
            for n in (1, 3, 10)}
    assert len({e.mean_entropy for e in runs[1].episodes}) > 1  # different episodes: the check means something
    assert rows(runs[3]) == rows(runs[1]) == rows(runs[10])
