"""A job's looks at its env before the rollout share one env and one seeded reset (rlviz.envs.probe): the loader's
spaces, load_agent's observation check, the default attention's and the saliency check's reset each built an env of
their own (an Atari env loads its ROM at each build and each seeded reset, ~0.3-0.5 s)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _envs import ProbeEnv

from rlviz.agent.policy import TorchPolicy
from rlviz.envs.probe import probe_env, probe_reset, shared_probes
from rlviz.sources import load_agent, save_checkpoint

PROBE = "_envs:rlviz-probe/Probe-v0"


class Linear(torch.nn.Module):
    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


@pytest.fixture
def counted(monkeypatch):
    """Counts of the probe env's builds (by render mode), seeded resets and closes."""
    counts = {"builds": [], "resets": 0, "closes": 0}
    init, reset, close = ProbeEnv.__init__, ProbeEnv.reset, ProbeEnv.close

    def counting_init(self, render_mode=None, **kw):
        counts["builds"].append(render_mode)
        init(self, render_mode=render_mode, **kw)

    def counting_reset(self, *, seed=None, options=None):
        counts["resets"] += seed is not None
        return reset(self, seed=seed, options=options)

    def counting_close(self):
        counts["closes"] += 1
        close(self)

    monkeypatch.setattr(ProbeEnv, "__init__", counting_init)
    monkeypatch.setattr(ProbeEnv, "reset", counting_reset)
    monkeypatch.setattr(ProbeEnv, "close", counting_close)
    return counts


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "probe.pt2"
    save_checkpoint(path, TorchPolicy(Linear(), num_actions=2, device="cpu"), env=PROBE, gamma=0.9)
    return path


def test_outside_a_scope_each_look_builds_and_closes_its_own_env(counted):
    with probe_env(PROBE) as a:
        pass
    with probe_env(PROBE) as b:
        pass
    assert a is not b and len(counted["builds"]) == 2 and counted["closes"] == 2
    first, obs_space, act_space = probe_reset(PROBE, 3)
    again, _, _ = probe_reset(PROBE, 3)
    assert counted["resets"] == 2 and np.array_equal(first, again) and obs_space.shape == (3,) and act_space.n == 2


def test_in_a_scope_one_env_and_one_reset_per_seed_each_caller_its_own_copy(counted):
    with shared_probes() as scope:
        with probe_env(PROBE) as a, probe_env(PROBE) as b:
            assert a is b
        with shared_probes() as inner:  # nested: the outer scope's, which its close() leaves open
            with probe_env(PROBE) as c:
                assert c is a
            inner.close()
            assert scope.open and counted["closes"] == 0
        first, _, _ = probe_reset(PROBE, 3)
        first[:] = -1.0  # the caller's copy
        again, _, _ = probe_reset(PROBE, 3)
        other, _, _ = probe_reset(PROBE, 4)
        assert counted["builds"] == [None] and counted["resets"] == 2 and counted["closes"] == 0
        assert not np.array_equal(first, again) and again[0] == 0.0  # (t = 0 at reset)
        scope.close()
        assert counted["closes"] == 1
        with probe_env(PROBE) as d:  # closed early: later looks build their own
            assert d is not a
    assert len(counted["builds"]) == 2 and counted["closes"] == 2
    assert np.array_equal(other, ProbeEnv().reset(seed=4)[0])


def test_a_load_builds_the_env_once(ckpt, counted):
    """The reader's look at the spaces and load_agent's observation check: one env (two before)."""
    agent = load_agent(ckpt, env=PROBE)
    assert agent.recipe.env_id == PROBE
    assert counted["builds"] == [None] and counted["closes"] == 1


def test_a_render_job_looks_at_its_env_once_and_its_outputs_are_unchanged(ckpt, counted, tmp_path):
    """render with --saliency and --heatmap (the default attention's look and the saliency check's): the loader and
    the checks share one env and one seeded reset (four builds and two seeded resets before, beside the rollout's
    own envs and the video's replay); the episodes equal those of the rollout alone."""
    import csv

    import rlviz

    done = rlviz.render(checkpoint=str(ckpt), env=PROBE, episodes=6, num_envs=2, saliency="gradient", heatmap=True, videos="first:1",
                        objects="_envs:probe_objects", out=str(tmp_path / "out"), progress=False)
    looks = counted["builds"].count(None)
    rollout = 2  # --num-envs 2 (render_mode rgb_array: the heatmap's frames)
    assert counted["builds"].count("rgb_array") >= rollout
    assert looks <= 1, counted["builds"]
    assert counted["closes"] == len(counted["builds"])  # every env closed, the shared one included
    rows = list(csv.DictReader((tmp_path / "out" / "episodes.csv").open()))
    assert len(rows) == 6 and done.summary["episodes"] == 6


def test_a_job_inside_a_callers_scope_leaves_it_open(ckpt, counted, tmp_path):
    """A render run inside the caller's shared_probes(): the job's checks end the job's sharing, not the caller's."""
    import rlviz

    with shared_probes() as scope:
        agent = load_agent(ckpt, env=PROBE)
        rlviz.render(checkpoint=str(ckpt), env=PROBE, episodes=2, num_envs=1, saliency="gradient", heatmap=True,
                     videos="first:1", objects="_envs:probe_objects", out=str(tmp_path / "out"), progress=False)
        assert scope.open and counted["builds"].count(None) == 1  # the load's env, shared by the job's looks
        with probe_env(agent.recipe):
            pass
        assert counted["builds"].count(None) == 1
    assert counted["closes"] == len(counted["builds"])
