"""Attention at failure on recurrent policies: each step's attribution given the state the policy carried into it.

A planted recurrent agent on MinAtar Breakout whose reading is set by its memory (a step counter: the paddle for its
first 5 steps, the ball after) gets its shares exactly there, step by step (a tracker that ignored the carried state
would put every step on the paddle); an sb3-contrib RecurrentPPO trained for seconds renders with --saliency gradient
--heatmap: attention at failure, the memory saliency and the memory in the .npz."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rlviz.agent.policy import Policy, PolicyOutput
from rlviz.evaluate import RolloutPlan, RolloutProbes
from rlviz.evaluate.rollouts.rollout import rollout

ENV = "MinAtar/Breakout-v1"  # observation [10, 10, 4] bool: paddle 0, ball 1, trail 2, brick 3
SWITCH = 5


class CountingReader(Policy):
    """Memory h: a step counter (h' = h + 0.2); logits read the paddle channel while h < 0.9 (its first 5 steps),
    the ball channel after (fixed random weights)."""

    stateful = True
    memory_kind = "other"

    def __init__(self):
        self.num_actions, self.kind = 3, "logits"
        self.w = torch.randn(100, 3, generator=torch.Generator().manual_seed(0))

    def initial_state(self, n):
        return (np.zeros((int(n), 1), np.float32),)

    def state_tensors(self, rows):
        return (torch.as_tensor(np.asarray(rows[0], np.float32)),)

    @staticmethod
    def state_arrays(tensors):
        return (tensors[0].detach().numpy().astype(np.float32),)

    def memory_of(self, rows):
        return np.asarray(rows[0], np.float32)

    def torch_step(self, obs, state):
        on_ball = (state[0] >= 0.9).float()
        x = on_ball * obs[..., 1].flatten(1) + (1 - on_ball) * obs[..., 0].flatten(1)
        return {"logits": torch.log_softmax(x @ self.w, -1)}, (state[0] + 0.2,)

    @torch.no_grad()
    def step(self, obs, state, masks=None):
        heads, new = self.torch_step(self.to_tensor(obs), self.state_tensors(state))
        logits = heads["logits"]
        return PolicyOutput(logits.numpy(), torch.exp(logits).numpy(), None, self.kind), self.state_arrays(new)


@pytest.mark.parametrize("num_envs", [1, 4])
def test_attention_of_a_recurrent_agent_follows_its_carried_state(num_envs):
    r = rollout(ENV, CountingReader(), RolloutPlan(6, seed=0, num_envs=num_envs), RolloutProbes(attention="gradient"))
    for e in r.episodes:
        a = e.attention
        names = list(a["names"])
        track = a["track"]
        assert track.shape == (e.length, len(names)) and e.length > SWITCH
        np.testing.assert_array_equal(track[:SWITCH, names.index("paddle")], 1.0)  # |grad x input| is exact here
        np.testing.assert_array_equal(track[SWITCH:, names.index("ball")], 1.0)
        assert a["total"][names.index("ball")] == e.length - SWITCH


@pytest.fixture(scope="module")
def recurrent_minatar(tmp_path_factory):
    contrib = pytest.importorskip("sb3_contrib")
    from rlviz.envs import make_env

    model = contrib.RecurrentPPO("MlpLstmPolicy", make_env(ENV), n_steps=32, batch_size=32, n_epochs=1, seed=0,
                                 device="cpu", policy_kwargs={"lstm_hidden_size": 16, "net_arch": [16]})
    model.learn(64)
    path = tmp_path_factory.mktemp("recurrent") / "recurrent_minatar.zip"
    model.save(path)
    return path


def test_recurrent_ppo_renders_saliency_heatmap_and_attention_at_failure(recurrent_minatar, tmp_path):
    from rlviz.cli import main
    from rlviz.jobs.render import ATTENTION_PNG

    out = tmp_path / "run"
    assert main(["render", str(recurrent_minatar), "--env", ENV, "--episodes", "3", "--saliency", "gradient",
                 "--heatmap", "--memory-window", "8", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    att = summary["attention"]
    assert att["method"] == "gradient" and att["failures"] == 3 and set(att["objects"]) == {"ball", "paddle"}
    total = sum(r["share"] for r in att["objects"].values()) + att["other"]["share"]
    assert abs(total - 1.0) < 1e-3
    assert (out / ATTENTION_PNG).stat().st_size > 1000 and (out / "heatmap.png").exists()
    (npz,) = (out / "videos").glob("*.npz")
    with np.load(npz) as z:
        steps = len(z["actions"]) + 1
        shares = z["memory_saliency"]
        assert shares.shape == (steps, 8)
        for t in range(steps):
            k = min(8, t + 1)
            assert np.isnan(shares[t, k:]).all()
            assert np.isnan(shares[t, :k]).all() or abs(float(np.nansum(shares[t])) - 1.0) < 1e-5
        assert z["memory"].shape == (steps, 16) and z["memory"].dtype == np.float16
        assert z["extra_attention ball"].shape == (steps,)
