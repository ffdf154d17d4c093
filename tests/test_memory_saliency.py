"""Memory saliency and the memory diagnostics on the planted memory probe (tests/_memory_probe.py: the cue shown
at t = 0 only, acted on at t = K = 8) and on sb3-contrib's RecurrentPPO: the shares at the decision step sit on the
cue step for the agent that remembers it and on the current step for the memoryless control; the batched
truncated-BPTT equals a window-by-window backward; the image saliency of a recurrent policy is the saliency given
the carried state; memory_unused / memory_saturated / state_not_reset raised on their planted agents and loops
only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _memory_probe import CueEnv, K, TinyMemory, play

from rlviz.errors import UsageError
from rlviz.evaluate.statistics.memory_checks import memory_effect, memory_findings, reset_findings
from rlviz.explain import (
    GivenState,
    MemoryGradient,
    MemoryPerturbation,
    attribute,
    carried_states,
    episode_saliency,
    normalise_episode,
)

W = 16
SEEDS = range(6)


def _episode(mode: str, seed: int):
    policy = TinyMemory(mode)
    obs, actions, ret = play(policy, seed)
    return policy, obs, actions, ret


@pytest.mark.parametrize("method", [MemoryGradient, MemoryPerturbation])
def test_memory_saliency_finds_the_cue_step_at_the_decision(method):
    cues = set()
    for seed in SEEDS:
        policy, obs, actions, ret = _episode("cue", seed)
        cues.add(float(obs[0, 0]))
        assert ret == 1.0 and obs.shape == (K + 2, 2)  # solved: the cue acted on K steps later
        shares = method(policy, window=W).attribute(obs, actions=np.append(actions, 0))
        assert shares.shape == (K + 2, W) and shares.dtype == np.float32
        assert shares[K, K] >= 0.9  # the decision step's mass on the cue step (k = K)
        assert shares[K, K] == pytest.approx(1.0, abs=1e-6)  # the other observations are zeros: no contribution
        control, obs_c, actions_c, ret_c = _episode("memoryless", seed)
        assert ret_c == float(obs_c[0, 0] > 0)  # it always goes right: it solves half of the cues only
        shares_c = method(control, window=W).attribute(obs_c, actions=np.append(actions_c, 0))
        assert shares_c[K, K] <= 0.1 and shares_c[K, 0] == pytest.approx(1.0)  # all on the current observation
    assert cues == {-1.0, 1.0}


def test_memory_saliency_rows_sum_to_one_over_the_steps_that_exist():
    policy, obs, actions, _ = _episode("cue", 1)
    x = obs + np.random.default_rng(0).normal(scale=0.3, size=obs.shape).astype(np.float32)  # every step counts
    for window in (1, 4, W):
        shares = MemoryGradient(policy, window=window).attribute(x)
        for t in range(x.shape[0]):
            exists = min(window, t + 1)
            assert np.isnan(shares[t, exists:]).all() and not np.isnan(shares[t, :exists]).any()
            assert shares[t, :exists].sum() == pytest.approx(1.0, abs=1e-5)


@pytest.fixture(scope="module")
def lstm_policy():
    contrib = pytest.importorskip("sb3_contrib")
    from rlviz.sources.stable_baselines3.recurrent_ppo import SB3RecurrentPolicy

    torch.manual_seed(0)
    model = contrib.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", device="cpu", seed=0,
                                 policy_kwargs={"lstm_hidden_size": 16, "net_arch": [16]})
    return SB3RecurrentPolicy(model.policy, 2, device="cpu")


def _window_by_window(policy, x, states, actions, window):
    """|grad x input| of observation t-k on target t, one backward per (t, k), the state into t-k held fixed."""
    n, out = x.shape[0], np.full((x.shape[0], window), np.nan)
    for t in range(n):
        for k in range(min(window, t + 1)):
            src = torch.tensor(x[t - k : t - k + 1], requires_grad=True)
            state = policy.state_tensors(tuple(s[t - k : t - k + 1] for s in states))
            for j in range(t - k, t + 1):
                heads, state = policy.torch_step(src if j == t - k else torch.tensor(x[j : j + 1]), state)
            (g,) = torch.autograd.grad(heads["logits"][0, actions[t]], src)
            out[t, k] = abs(float((g * src).sum()))
    return out / np.nansum(out, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk", [512, 7])
def test_batched_bptt_equals_one_backward_per_step_and_lag(lstm_policy, chunk):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 4)).astype(np.float32)
    actions = rng.integers(0, 2, 25)
    states = carried_states(lstm_policy, x)
    got = MemoryGradient(lstm_policy, window=6, chunk=chunk).attribute(x, actions=actions, states=states)
    want = _window_by_window(lstm_policy, x, states, actions, 6)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, atol=1e-5, equal_nan=True)


def test_carried_states_are_the_steps_states(lstm_policy):
    x = np.random.default_rng(1).normal(size=(12, 4)).astype(np.float32)
    states = carried_states(lstm_policy, x)
    rows = lstm_policy.initial_state(1)
    for t in range(12):
        assert all(np.allclose(s[t : t + 1], r, atol=1e-6) for s, r in zip(states, rows))
        _, rows = lstm_policy.step(x[t : t + 1], rows)


def test_image_saliency_of_a_recurrent_policy_is_given_the_carried_state(lstm_policy):
    x = np.random.default_rng(2).normal(size=(20, 4)).astype(np.float32)
    actions = np.random.default_rng(3).integers(0, 2, 19)
    maps, label = episode_saliency(lstm_policy, x, actions, method="gradient", options=None)
    states = carried_states(lstm_policy, x)
    raw = np.stack([attribute(GivenState(lstm_policy, tuple(s[t : t + 1] for s in states)), x[t : t + 1],
                              actions=[int(a)])[0]
                    for t, a in enumerate(np.append(actions, 0))])
    last = lstm_policy.step(x[-1:], tuple(s[-1:] for s in states))[0].logits.argmax()
    raw[-1] = attribute(GivenState(lstm_policy, tuple(s[-1:] for s in states)), x[-1:], actions=[int(last)])[0]
    np.testing.assert_allclose(maps, normalise_episode(raw, 99.5), atol=1e-5)  # as the recorder normalises
    assert label.startswith("gradient")
    smooth, _ = episode_saliency(lstm_policy, x, actions, method="smoothgrad", n_samples=4)
    assert smooth.shape == (20, 4) and np.isfinite(smooth).all()


def test_attribute_refuses_a_recurrent_policy_without_its_states(lstm_policy):
    with pytest.raises(UsageError, match="GivenState"):
        attribute(lstm_policy, np.zeros((3, 4), np.float32))
    with pytest.raises(UsageError, match="window"):
        MemoryGradient(lstm_policy, window=0)


def test_memory_unused_flags_the_agent_that_ignores_its_state_only():
    for mode, flagged in (("memoryless", True), ("cue", False)):
        episodes = []
        for seed in SEEDS:
            policy, obs, _, _ = _episode(mode, seed)
            episodes.append((obs, carried_states(policy, obs)))
        ids = [f.id for f in memory_findings(policy, episodes)]
        assert ("memory_unused" in ids) == flagged, (mode, ids)
        assert "memory_saturated" not in ids
    cue = TinyMemory("cue")
    obs = play(cue, 0)[0]
    change = memory_effect(cue, obs, carried_states(cue, obs))
    assert change[0] == 0.0 and change[K] > 0.4  # the decision without the cue: a coin flip instead of certainty


def test_memory_saturated_flags_the_pinned_memory_only():
    policy = TinyMemory("saturated")
    episodes = []
    for seed in SEEDS:
        obs, _, ret = play(policy, seed)
        assert ret == 1.0
        episodes.append((obs, carried_states(policy, obs)))
    findings = {f.id: f for f in memory_findings(policy, episodes)}
    assert "memory_saturated" in findings and "memory_unused" not in findings
    # every step after the first is pinned, except the last of a cue -1 episode: go = 1 cancels h = -1 there
    negative = sum(obs[0, 0] < 0 for obs, _ in episodes)
    want = 1 - negative / (len(episodes) * (K + 1))
    assert findings["memory_saturated"].evidence["mean_saturated_share"] == pytest.approx(want, abs=1e-4)


def _loop(reset: bool, episodes: int = 4) -> list:
    """A user's loop with the cue agent that records the memory it carries into each step, resetting the state
    at each episode start or (planted) not."""
    policy, env, carried = TinyMemory("cue"), CueEnv(), []
    state = policy.initial_state(1)
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        if reset:
            state = policy.initial_state(1)
        rows, done = [], False
        while not done:
            rows.append(policy.memory_of(state)[0])
            out, state = policy.step(obs[None], state)
            obs, _, done, _, _ = env.step(int(out.logits[0].argmax()))
        carried.append(np.stack(rows))
    return carried


def test_state_not_reset_flags_the_loop_that_carries_its_memory_across_episodes():
    initial = TinyMemory("cue").memory_of(TinyMemory("cue").initial_state(1))[0]
    assert reset_findings(_loop(reset=True), initial) == []
    (finding,) = reset_findings(_loop(reset=False), initial)
    assert finding.id == "state_not_reset"
    assert finding.evidence["not_reset"] == 3 and finding.evidence["episodes"] == [1, 2, 3]
    # each starts with the cue the episode before latched (|h0| ~ 0.86), not with zeros
    assert finding.evidence["max_difference"] > 0.5
