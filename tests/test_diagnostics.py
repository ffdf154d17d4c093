"""Diagnostics: each planted bug of a tiny probe agent raises its finding, exactly; healthy raises none.

``rlviz-diag/Count-v0``: obs float32 [t, L]; 2 actions (ignored); reward 1 every step; terminates at t = L,
L drawn in 10..30 from the reset seed. With gamma 0.9 the discounted return-to-go from obs (t, L) is exactly
G = (1 - 0.9^(L - t)) / 0.1, so a probe value can be exact, negated, offset, constant or NaN on one step.
``rlviz-diag/Ring-v0``: obs one-hot [6] of a position on a ring, action 0 steps +1, action 1 steps -1,
reward 0, never terminates (time limit 200): a policy that always steps +1 loops with period 6.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import tb_accumulator

from rlviz.agent.policy import TorchPolicy
from rlviz.cli import main
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.rollouts.rollout import rollout
from rlviz.evaluate.statistics.diagnostics import EpisodeDiagnostics, diagnose
from rlviz.evaluate.statistics.stats import summarize
from rlviz.media import probe_video
from rlviz.sources.checkpoint import save_checkpoint

GAMMA = 0.9
COUNT, RING = "rlviz-diag/Count-v0", "rlviz-diag/Ring-v0"
POLICY_IDS = {"policy_uniform", "policy_collapsed", "action_dominant"}
VALUE_IDS = {"value_uninformative", "value_wrong_sign", "value_biased"}


class CountEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 100.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.L = 0, 10

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.L = 0, int(self.np_random.integers(10, 31))
        return np.array([self.t, self.L], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, self.L], np.float32), 1.0, self.t >= self.L, False, {}

    def render(self):
        f = np.zeros((16, 16, 3), np.uint8)
        f[self.t % 16, 0] = 255
        return f


class RingEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (6,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0

    def _obs(self):
        return np.eye(6, dtype=np.float32)[self.pos]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(0, 6))
        return self._obs(), {}

    def step(self, action):
        self.pos = (self.pos + (1 if int(action) == 0 else -1)) % 6
        return self._obs(), 0.0, False, False, {}

    def render(self):
        return np.zeros((16, 16, 3), np.uint8)


if COUNT not in gym.registry:
    gym.register(COUNT, entry_point=CountEnv, max_episode_steps=100)
    gym.register(RING, entry_point=RingEnv, max_episode_steps=200)


class Probe(torch.nn.Module):
    """logits from ``logits``; value = scale * G + offset (G exact), ``constant`` instead when given,
    NaN on step ``nan_at`` when given."""

    def __init__(self, logits=(0.0, 1.0), scale=1.0, offset=0.0, constant=None, nan_at=None):
        super().__init__()
        self.register_buffer("logits", torch.tensor(logits, dtype=torch.float32))
        self.scale, self.offset, self.constant, self.nan_at = scale, offset, constant, nan_at

    def forward(self, x):
        t, L = x[:, 0], x[:, 1]
        g = (1.0 - GAMMA ** (L - t)) / (1.0 - GAMMA)
        v = g * self.scale + self.offset if self.constant is None else torch.full_like(t, self.constant)
        if self.nan_at is not None:
            v = torch.where(t == self.nan_at, torch.full_like(v, float("nan")), v)
        return self.logits.expand(x.shape[0], -1), v


def run(module, env=COUNT, episodes=40):
    res = rollout(env, TorchPolicy(module, num_actions=2, device="cpu"), RolloutPlan(episodes, num_envs=4, seed=3,
                                                                                     gamma=GAMMA, progress=False))
    found = diagnose(res)
    return res, {f.id: f for f in found if f.severity == "warning"}, found


def test_healthy_probe_raises_no_warning_and_its_value_is_exact():
    res, warn, found = run(Probe())
    assert warn == {}
    s = summarize(res, found)
    assert s.value_explained_variance == pytest.approx(1.0, abs=1e-6)
    assert s.value_residual == pytest.approx(0.0, abs=1e-5)
    assert {f.id for f in found} == {"rewards_one_sign"}  # info only: all rewards are +1


def test_uniform_logits_raise_policy_uniform_only():
    res, warn, _ = run(Probe(logits=(0.0, 0.0)))
    assert set(warn) == {"policy_uniform"}
    assert warn["policy_uniform"].evidence["mean_relative_entropy"] == pytest.approx(1.0)


def test_one_hot_logits_raise_collapsed_and_dominant_and_no_value_finding():
    res, warn, _ = run(Probe(logits=(0.0, 50.0)))
    assert set(warn) == {"policy_collapsed", "action_dominant"}
    assert warn["policy_collapsed"].evidence["low_entropy_fraction"] == 1.0
    dom = warn["action_dominant"].evidence
    assert dom["action"] == 1 and dom["fraction"] == 1.0
    assert dom["action_counts"] == [0, int(res.lengths.sum())]


def test_q_agents_are_greedy_by_design_no_entropy_finding():
    res = rollout(COUNT, TorchPolicy(Probe(logits=(0.0, 1.0)), num_actions=2, kind="q", device="cpu"),
                  RolloutPlan(10, seed=3, gamma=GAMMA, progress=False))
    ids = {f.id for f in diagnose(res, "q")}
    assert "policy_collapsed" not in ids and "action_dominant" in ids  # argmax always picks action 1


@pytest.mark.parametrize("probe, expected", [
    (Probe(constant=5.0), {"value_uninformative"}),
    (Probe(scale=-1.0), {"value_wrong_sign"}),
    (Probe(offset=100.0), {"value_biased"}),
])
def test_value_bugs_raise_their_id_and_no_policy_finding(probe, expected):
    res, warn, _ = run(probe)
    assert set(warn) == expected
    ev = next(iter(warn.values())).evidence
    if probe.scale == -1.0:
        assert ev["correlation"] == pytest.approx(-1.0)
    if probe.offset:
        assert ev["value_mean"] - ev["return_mean"] == pytest.approx(100.0, abs=1e-3)
        assert ev["explained_variance"] == pytest.approx(1.0, abs=1e-6)
    if probe.constant is not None:
        assert ev["explained_variance"] == pytest.approx(0.0, abs=1e-9) and ev["correlation"] is None


def test_loop_until_time_limit_raises_episode_loops_and_never_terminates():
    res, warn, _ = run(Probe(logits=(50.0, 0.0), constant=0.0), env=RING, episodes=6)
    assert {"episode_loops", "never_terminates"} <= set(warn)
    assert not VALUE_IDS & set(warn)  # the return is constant (0): no value statistics to judge
    loops = warn["episode_loops"].evidence
    # period 6 from step 6 on: every one of the 200 steps is part of the cycle
    assert loops["episodes"] == 6 and loops["period"] == 6 and loops["longest"] == 200
    assert all(e.diag["loop_steps"] == 200 and e.truncated for e in res.episodes)
    assert warn["never_terminates"].evidence["truncated_fraction"] == 1.0


def test_loop_detector_exact_periods_and_bounded_memory():
    def longest(seq):
        d = EpisodeDiagnostics(2)
        for x in seq:
            d.step(np.array([x], np.int64), 0, 0.5, 0.0)
        return d, d.finish()

    d, out = longest(list(range(64)) * 3)  # period 64: cycle from step 64 to the end
    assert (out["loop_period"], out["loop_steps"]) == (64, 192)
    _, out = longest(list(range(65)) * 3)  # period 65 is beyond the window: not a loop
    assert out["loop_steps"] == 0
    _, out = longest([7] * 5 + list(range(100, 300)))  # a short stall, then no repeat
    assert (out["loop_period"], out["loop_steps"]) == (1, 5)
    d, _ = longest(range(10_000))
    assert len(d._last) <= 128  # only the last 128 hashes are kept


def test_nan_value_on_one_step_is_rendered_flagged_and_skipped(tmp_path, capsys):
    ckpt = save_checkpoint(tmp_path / "nan.pt2", Probe(nan_at=3.0), env=COUNT, gamma=GAMMA)
    out = tmp_path / "out"
    code = main(["render", str(ckpt), "--episodes", "6", "--num-envs", "2", "--videos", "first:1",
                 "--out", str(out), "--no-progress", "--tensorboard", str(tmp_path / "tb")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "nan_internals" in printed
    summary = json.loads((out / "summary.json").read_text())
    lengths = [int(x.split(",")[3]) for x in (out / "episodes.csv").read_text().splitlines()[1:]]
    nan = [f for f in summary["diagnostics"] if f["id"] == "nan_internals"]
    assert nan and nan[0]["severity"] == "warning"
    assert nan[0]["evidence"]["steps"] == 6 and nan[0]["evidence"]["first_episode"] == 0
    assert nan[0]["evidence"]["first_step"] == 3
    assert summary["nonfinite_steps"] == 6
    assert summary["value_explained_variance"] == pytest.approx(1.0, abs=1e-6)  # the NaN steps are skipped
    assert {f["id"] for f in summary["diagnostics"] if f["severity"] == "warning"} == {"nan_internals"}
    video = out / "videos" / "first-0-episode-0.mp4"
    assert probe_video(video).num_frames == lengths[0] + 1
    text = tb_accumulator(tmp_path / "tb").Tensors("rlviz/diagnostics/text_summary")
    assert b"nan_internals" in text[0].tensor_proto.string_val[0]


def test_strict_exits_3_on_a_warning_and_0_without(tmp_path, capsys):
    healthy = save_checkpoint(tmp_path / "ok.pt2", Probe(), env=COUNT, gamma=GAMMA)
    uniform = save_checkpoint(tmp_path / "uniform.pt2", Probe(logits=(0.0, 0.0)), env=COUNT, gamma=GAMMA)
    common = ["--episodes", "8", "--videos", "none", "--no-progress", "--strict"]
    assert main(["render", str(healthy), "--out", str(tmp_path / "a"), *common]) == 0
    assert main(["render", str(uniform), "--out", str(tmp_path / "b"), *common]) == 3
    err = capsys.readouterr().err
    assert "policy_uniform" in err and "Traceback" not in err
    assert (tmp_path / "b" / "summary.json").exists()  # the outputs are written before the exit code
    assert main(["render", str(uniform), "--out", str(tmp_path / "c"), *common[:-1]]) == 0


def test_panels_draw_gaps_and_nan_markers_instead_of_crashing():
    from test_compose import episode

    from rlviz.draw.compose import COLORS, Compositor

    T = 6
    trace, it = episode(T=T, value=np.linspace(0.0, 1.0, T + 1).astype(np.float32))
    value = it.value.copy()
    value[3] = np.nan
    probs = it.probs.copy()
    probs[3] = np.nan
    bad = type(it)(**{**it.__dict__, "value": value, "probs": probs, "logits": it.logits.copy(),
                      "entropy": np.where(np.arange(T + 1) == 3, np.nan, it.entropy).astype(np.float32)})
    good, broken = Compositor(trace, it), Compositor(trace, bad)
    frames = [broken.render(t) for t in range(T + 1)]  # every frame draws
    # the steps before the NaN are drawn exactly as without it (same plot scale); from step 3 on they differ
    assert [np.array_equal(f, good.render(t)) for t, f in enumerate(frames)] == [True] * 3 + [False] * (T - 2)
    px, py, pw, ph = broken.layout.plot
    x3 = broken.x_of(3)

    def near_value(img):  # pixels within 2 pixels of step 3's column close to the value trace's colour
        col = img[py : py + ph, x3 - 2 : x3 + 3].astype(int)
        return int((np.abs(col - np.array(COLORS["value"])).sum(-1) < 100).sum())

    assert near_value(good.render(T)) >= 2 and near_value(frames[-1]) == 0  # the value trace is cut at step 3
    L = broken.layout
    bars = frames[3][L.bar_rows[0] : L.bar_rows[-1] + L.bar_h, L.bar_x0 : L.bar_x0 + L.bar_len]
    assert not (bars == np.array(COLORS["bar"], np.uint8)).all(-1).any()  # no bar drawn from NaN probabilities
    # the "NaN" labels are drawn in the "chosen" colour where the numbers were
    label = frames[3][L.bar_rows[0] : L.bar_rows[-1] + L.bar_h, L.bar_x0 + L.bar_len + 2 :]
    assert (label == np.array(COLORS["chosen"], np.uint8)).all(-1).sum() > 20


class _TwoLogits(torch.nn.Module):
    """CartPole: a linear actor-critic that never says how many actions it has (TorchPolicy reads it from its first
    forward)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pi = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.pi(x), x[:, 0]


@pytest.mark.parametrize("num_envs", [1, 4])
def test_a_policy_built_without_num_actions_is_diagnosed_on_several_envs(num_envs):
    """The first episodes start before the first forward tells A: their action counts are still of the env's
    Discrete(2) (0.5 crashed in diagnose on counts of sizes 1 and 2)."""
    policy = TorchPolicy(_TwoLogits(), device="cpu")
    assert policy.num_actions == -1
    result = rollout("CartPole-v1", policy, RolloutPlan(6, max_steps=40, seed=0, num_envs=num_envs))
    counts = [e.diag["action_counts"] for e in result.episodes]
    assert all(len(c) == 2 for c in counts) and [sum(c) for c in counts] == [e.length for e in result.episodes]
    diagnose(result)  # (no error)
