"""Smoke tests for scripts/train_ppo.py: a tiny real PPO run on MinAtar Breakout."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def train_ppo():
    spec = importlib.util.spec_from_file_location("train_ppo", ROOT / "scripts" / "train_ppo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(train_ppo, tmp_path, name, *extra):
    out = tmp_path / f"{name}.pt2"
    state = tmp_path / f"{name}.state.pt"
    train_ppo.main([
        "--env", "MinAtar/Breakout-v1", "--num-envs", "2", "--num-steps", "128", "--total-steps", "256",
        "--minibatches", "4", "--epochs", "2", "--seed", "3", "--out", str(out), "--state-out", str(state),
        "--log-every", "1", "--device", "cpu", *extra,
    ])
    return out, state


def test_tiny_run_writes_a_loadable_checkpoint(train_ppo, tmp_path, capsys):
    out, state = _run(train_ppo, tmp_path, "agent")
    log = capsys.readouterr().out
    assert "step       256" in log
    blob = torch.load(state, map_location="cpu", weights_only=True)
    assert blob["recipe"]["env_id"] == "MinAtar/Breakout-v1"
    assert blob["metadata"]["total_steps"] == 256
    assert "--total-steps 256" in blob["metadata"]["command"]
    policy, recipe = train_ppo.load_policy(str(state))
    assert recipe.env_id == "MinAtar/Breakout-v1"
    obs = np.zeros((5, 10, 10, 4), dtype=bool)
    obs[:, 9, 4, 0] = True
    res = policy.evaluate(obs)
    assert res.probs.shape == (5, 3) and res.value.shape == (5,)
    np.testing.assert_allclose(res.probs.sum(-1), 1.0, rtol=1e-5)
    assert (res.probs > 0).all()
    if out.exists():  # rlviz.sources.checkpoint present: the rlviz-format file loads to the same policy
        policy2, recipe2 = train_ppo.load_policy(str(out))
        assert recipe2.env_id == recipe.env_id
        np.testing.assert_allclose(policy2.evaluate(obs).probs, res.probs, rtol=1e-5, atol=1e-6)


def test_no_entropy_makes_the_coefficient_irrelevant(train_ppo, tmp_path, capsys):
    def weights(name, *extra):
        _, state = _run(train_ppo, tmp_path, name, *extra)
        return torch.load(state, map_location="cpu", weights_only=True)["state_dict"]["actor.weight"]

    a = weights("a", "--ent-coef", "0.0")
    b = weights("b", "--ent-coef", "0.5")
    c = weights("c", "--ent-coef", "0.0", "--no-entropy")
    d = weights("d", "--ent-coef", "0.5", "--no-entropy")
    assert "WARNING: --no-entropy is ON" in capsys.readouterr().out
    assert not torch.allclose(a, b)  # the entropy bonus reaches the loss
    torch.testing.assert_close(c, d, rtol=0, atol=0)  # seed 003's bug: the coefficient has no effect
    torch.testing.assert_close(a, c, rtol=0, atol=0)  # no-entropy == coefficient zero


def test_eval_counts_exactly_the_requested_episodes(train_ppo, tmp_path):
    _, state = _run(train_ppo, tmp_path, "e")
    returns = train_ppo.evaluate(str(state), episodes=7, num_envs=3, seed=0, threads=1)
    assert returns.shape == (7,)
    assert (returns >= 0).all() and np.all(returns == np.round(returns))


def test_rlviz_every_logs_evaluation_videos_at_the_global_steps(train_ppo, tmp_path, capsys):
    from conftest import tb_accumulator

    tb, videos = tmp_path / "tb", tmp_path / "videos"
    _run(train_ppo, tmp_path, "logged", "--total-steps", "768", "--rlviz-every", "256",
         "--rlviz-tensorboard", str(tb), "--rlviz-dir", str(videos))
    assert capsys.readouterr().out.count("rlviz: logged an evaluation episode") == 3
    acc = tb_accumulator(tb)
    (tag,) = [t for t in acc.Tags()["images"] if t.startswith("eval/episode")]
    assert [e.step for e in acc.Images(tag)] == [256, 512, 768]
    assert sorted(p.name for p in videos.rglob("*.mp4")) == [f"episode-step{s}.mp4" for s in (256, 512, 768)]


def test_checkpoint_every_writes_a_run_for_rlviz_timeline(train_ppo, tmp_path, capsys):
    from rlviz.sources import load_agent
    from rlviz.sources.run_folders import discover

    run = tmp_path / "run"
    _run(train_ppo, tmp_path, "agent", "--total-steps", "1024", "--checkpoint-every", "512", "--checkpoint-dir", str(run))
    assert sorted(p.name for p in run.iterdir()) == ["step_1024.pt2", "step_512.pt2"]  # every 512 steps and the end
    assert "checkpoint: " + str(run / "step_512.pt2") in capsys.readouterr().out
    assert load_agent(run / "step_512.pt2", device="cpu").metadata["step"] == 512
    found, skipped = discover(run)
    assert [c.step for c in found] == [512, 1024] and skipped == []
