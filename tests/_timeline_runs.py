"""A real SB3 training run for the timeline tests, made once per test session: PPO on CartPole with
CheckpointCallback (``rl_model_<steps>_steps.zip``), and a copy whose policy head, from ``COLLAPSE_AT`` on, always
takes action 0 (a planted collapse)."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

SAVE_FREQ, TOTAL = 1024, 4096
STEPS = [1024, 2048, 3072, 4096]
COLLAPSE_AT = 3072


def trained_runs(tmp_path_factory) -> tuple[Path, Path]:
    """(healthy run folder, collapsed copy), trained the first time a test of the session asks."""
    base = tmp_path_factory.getbasetemp() / "timeline-runs"
    healthy, collapsed = base / "healthy", base / "collapsed"
    if (base / "done").exists():
        return healthy, collapsed
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CheckpointCallback

    shutil.rmtree(base, ignore_errors=True)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=512, batch_size=128, n_epochs=4, seed=0, device="cpu",
                learning_rate=1e-3, policy_kwargs={"net_arch": [32, 32]})
    model.learn(TOTAL, callback=CheckpointCallback(save_freq=SAVE_FREQ, save_path=str(healthy)))
    shutil.copytree(healthy, collapsed)
    for step in STEPS:
        if step >= COLLAPSE_AT:
            path = collapsed / f"rl_model_{step}_steps.zip"
            m = PPO.load(path, device="cpu")
            with torch.no_grad():
                m.policy.action_net.weight.zero_()
                m.policy.action_net.bias.copy_(torch.tensor([20.0, -20.0]))
            m.save(path)
    (base / "done").write_text("ok")
    return healthy, collapsed
