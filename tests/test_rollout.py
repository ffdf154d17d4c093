import numpy as np
import pytest
import torch
from _envs import PROBE_PIXEL, probe_objects

from rlviz.agent.models import NatureCNNAgent
from rlviz.agent.policy import TorchPolicy
from rlviz.envs import make_env
from rlviz.envs.ale_seed import seeded_reset
from rlviz.errors import UsageError
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.evaluate.failures.objects import FunctionExtractor
from rlviz.evaluate.rollouts.rollout import episode_seed_for, replay_episode, rollout

PROBE = "rlviz-probe/Probe-v0"


class Linear(torch.nn.Module):
    """logits = obs @ W (deterministic), value = obs.sum()."""

    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


def probe_policy():
    return TorchPolicy(Linear(), num_actions=2, device="cpu")


def probe_rollout(n, first=0, num_envs=3, **kw):
    return rollout(PROBE, probe_policy(), RolloutPlan(n, num_envs=num_envs, seed=11, heatmap=True, progress=False,
                                                      objects=FunctionExtractor(probe_objects), first_episode=first,
                                                      **kw))


def test_probe_heatmap_counts_exactly_the_pre_failure_pixel():
    res = probe_rollout(24)
    terminated = sum(e.terminated for e in res.episodes)
    truncated = sum(e.truncated for e in res.episodes)
    assert 0 < terminated < 24 and terminated + truncated == 24  # both kinds occur
    hm = res.heatmap
    grid = hm.counts["obj"]
    assert grid[PROBE_PIXEL] == terminated
    assert grid.sum() == terminated  # truncated episodes add nothing, no other pixel counted
    assert hm.failures == terminated and hm.episodes == 24
    assert [e.index for e in res.episodes] == list(range(24))
    assert all(e.failures == int(e.terminated) for e in res.episodes)
    # probe rewards are the actions: the return is the number of 1-actions, at most the length
    assert all(0 <= e.ret <= e.length for e in res.episodes)
    assert {e.length for e in res.episodes if e.truncated} == {8}


def test_object_gone_on_the_step_before_a_loss_counts_where_last_seen():
    """As an ALE Breakout ball, which leaves the screen frames before the life is taken."""
    kw = dict(num_envs=3, seed=11, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    res = rollout("rlviz-probe/Vanish-v0", probe_policy(), RolloutPlan(24, **kw))
    lost = sum(e.terminated for e in res.episodes)
    grid = res.heatmap.counts["obj"]
    assert 0 < lost == grid[PROBE_PIXEL] == grid.sum() == res.heatmap.failures
    blind = rollout("rlviz-probe/Vanish-v0", probe_policy(), RolloutPlan(24, lookback=1, **kw))
    assert blind.heatmap.counts["obj"].sum() == 0 and blind.heatmap.failures == lost


def test_two_half_runs_merge_to_the_full_run(tmp_path):
    full = probe_rollout(20)
    a, b = probe_rollout(10), probe_rollout(10, first=10, num_envs=2)
    merged = FailureHeatmap.merged([a.heatmap, b.heatmap])
    assert np.array_equal(merged.counts["obj"], full.heatmap.counts["obj"])
    assert (merged.failures, merged.episodes) == (full.heatmap.failures, 20)
    assert [e.ret for e in a.episodes + b.episodes] == [e.ret for e in full.episodes]


def test_num_envs_does_not_change_episodes():
    one = rollout(PROBE, probe_policy(), RolloutPlan(9, num_envs=1, seed=3, progress=False))
    four = rollout(PROBE, probe_policy(), RolloutPlan(9, num_envs=4, seed=3, progress=False))
    assert [(e.seed, e.ret, e.length) for e in one.episodes] == [(e.seed, e.ret, e.length) for e in four.episodes]
    assert one.episodes[4].seed == episode_seed_for(3, 4)


def test_replay_probe_episode_gives_same_record():
    res = rollout(PROBE, probe_policy(), RolloutPlan(6, num_envs=3, seed=5, progress=False))
    for rec in res.episodes:
        again = replay_episode(PROBE, probe_policy(), rec)
        assert (again.ret, again.length, again.terminated, again.value_sums) == (
            rec.ret, rec.length, rec.terminated, rec.value_sums)


def test_value_sums_are_discounted_returns():
    res = rollout(PROBE, probe_policy(), RolloutPlan(1, num_envs=1, seed=0, gamma=0.5, progress=False))
    rec = res.episodes[0]
    # replay step by step to get the rewards and values the rollout saw
    env = make_env(PROBE)
    obs, _ = env.reset(seed=rec.seed)
    rng = np.random.default_rng(rec.seed)
    pol = probe_policy()
    rs, vs = [], []
    while True:
        a, out = pol.act(obs[None], rng)
        vs.append(float(out.value[0]))
        obs, r, term, trunc, _ = env.step(int(a[0]))
        rs.append(r)
        if term or trunc:
            break
    g = [sum(0.5 ** (k - t) * rs[k] for k in range(t, len(rs))) for t in range(len(rs))]
    assert sum(rs) == rec.ret
    assert rec.value_sums == pytest.approx((len(rs), sum(vs), sum(g), np.dot(vs, vs), np.dot(g, g), np.dot(vs, g)))


def test_life_loss_failures_and_max_steps():
    res = rollout("rlviz-probe/Lives-v0", probe_policy(), RolloutPlan(4, num_envs=2, heatmap=True, progress=False,
                                                                      objects=FunctionExtractor(probe_objects)))
    assert res.fail_on == "life-loss"
    assert [e.failures for e in res.episodes] == [3] * 4
    assert res.heatmap.counts["obj"][PROBE_PIXEL] == 12 and res.heatmap.counts["obj"].sum() == 12
    term = rollout("rlviz-probe/Lives-v0", probe_policy(), RolloutPlan(2, fail_on="termination", progress=False))
    assert [e.failures for e in term.episodes] == [1, 1]
    cut = rollout("rlviz-probe/Lives-v0", probe_policy(), RolloutPlan(2, max_steps=3, progress=False))
    assert [(e.length, e.truncated, e.terminated, e.failures) for e in cut.episodes] == [(3, True, False, 1)] * 2


def test_bad_arguments_raise_usage_errors():
    with pytest.raises(UsageError, match="fail_on"):
        rollout(PROBE, probe_policy(), RolloutPlan(1, fail_on="sometimes", progress=False))
    with pytest.raises(UsageError, match="episodes"):
        rollout(PROBE, probe_policy(), RolloutPlan(0, progress=False))


def test_ale_fast_seeded_reset_equals_rom_reload():
    fast, slow = make_env("ALE/Breakout-v5"), make_env("ALE/Breakout-v5")
    seeded_reset(fast, 999)  # first call captures the template from a genuine ROM load
    for seed in (1, 2, 3):
        o1, _ = seeded_reset(fast, seed)
        o2, _ = slow.reset(seed=seed)
        assert np.array_equal(o1, o2)
        rng = np.random.default_rng(seed)
        for _ in range(300):  # sticky actions draw from the ALE RNG every frame
            a = int(rng.integers(4))
            s1, s2 = fast.step(a), slow.step(a)
            assert np.array_equal(s1[0], s2[0]) and s1[1:4] == s2[1:4] and s1[4]["lives"] == s2[4]["lives"]
            if s1[2] or s1[3]:
                break
    assert np.array_equal(fast.render(), slow.render())


def test_ale_replay_same_return_on_a_given_env():
    torch.manual_seed(0)
    pol = TorchPolicy(NatureCNNAgent(4), device="cpu")
    res = rollout("ALE/Breakout-v5", pol, RolloutPlan(2, num_envs=2, seed=1, progress=False))
    rec = max(res.episodes, key=lambda e: e.length)
    assert rec.failures == 5 and rec.terminated  # Breakout: 5 lives, all lost
    env = make_env("ALE/Breakout-v5")
    again = replay_episode("ALE/Breakout-v5", pol, rec, env=env)
    assert (again.ret, again.length, again.failures) == (rec.ret, rec.length, rec.failures)
