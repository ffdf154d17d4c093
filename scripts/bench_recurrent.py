#!/usr/bin/env python
"""Benchmark: a recurrent render against the bare recurrent loop.

    python scripts/bench_recurrent.py                          # 200 CartPole episodes, 3 repeats
    python scripts/bench_recurrent.py --episodes 1000 --repeats 3   # the issue's size

The agent: an sb3-contrib RecurrentPPO (MlpLstmPolicy, LSTM 64) trained here for ``--train`` steps on CartPole-v1
and saved as its zip. Timed, interleaved (render, bare, bare, render, ...) in one process after an untimed warm-up:

* render: ``rlviz.render`` of the zip, ``--episodes N --greedy --videos none`` (rollouts with a state row per env,
  reset at each episode start; episodes.csv, summary.json, the report), ``--num-envs`` envs;
* bare: sb3-contrib's own loop, ``evaluate_policy(model, venv, N, deterministic=True)`` on a DummyVecEnv of the
  same number of envs, the LSTM states carried and reset by ``episode_start`` as it does; each sub-env takes the
  next of rlviz's episode seeds (``episode_seed_for(0, k)``) at each reset, so both play the same seeds.

* nomem: the same render with the memory diagnostics off (no episode keeps a sample of its steps:
  ``rlviz.evaluate.rollouts.runner.MEMORY_EPISODES`` set to 0 for that arm), to show what they cost.

Prints min and median seconds of each, the env steps each played, and the ratio render / bare of wall time (the
figure the target is on: the same N episodes' outcomes) and of time per env step (evaluate_policy also plays on the
sub-envs that have their quota while the others finish, steps it does not count). Target: <= 1.2x.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _agent(work: Path, steps: int) -> Path:
    from sb3_contrib import RecurrentPPO

    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=128, batch_size=128, n_epochs=4, seed=0,
                         device="cpu", policy_kwargs={"lstm_hidden_size": 64, "net_arch": [64]})
    model.learn(steps)
    model.save(work / "recurrent.zip")
    return work / "recurrent.zip"


class _Counter:
    steps = 0


def _seeded_envs(num_envs: int, counter: _Counter):
    """A DummyVecEnv whose sub-envs take rlviz's episode seeds in turn at each reset, counting steps."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlviz.evaluate.rollouts.rollout import episode_seed_for

    taken = iter(range(10**9))

    class Seeded(gym.Wrapper):
        def reset(self, **kwargs):
            kwargs["seed"] = episode_seed_for(0, next(taken))
            return self.env.reset(**kwargs)

        def step(self, action):
            counter.steps += 1
            return self.env.step(action)

    return DummyVecEnv([lambda: Monitor(Seeded(gym.make("CartPole-v1"))) for _ in range(num_envs)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--train", type=int, default=2048, help="RecurrentPPO training steps (longer episodes)")
    args = ap.parse_args()

    import csv

    import torch
    from sb3_contrib import RecurrentPPO
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy  # noqa: F401
    from stable_baselines3.common.evaluation import evaluate_policy

    from rlviz import RenderConfig, render

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bench_recurrent_"))
    try:
        path = _agent(work, args.train)
        model = RecurrentPPO.load(path, device="cpu")
        config = RenderConfig(checkpoint=path, env="CartPole-v1", episodes=args.episodes, videos="none", seed=0,
                              greedy=True, progress=False, overwrite=True, num_envs=args.num_envs, out=work / "out")

        def run_render() -> int:
            render(config)
            return sum(int(r["length"]) for r in csv.DictReader((work / "out" / "episodes.csv").open()))

        def run_nomem() -> int:
            from rlviz.evaluate.rollouts import runner

            kept, runner.MEMORY_EPISODES = runner.MEMORY_EPISODES, 0  # type: ignore[attr-defined]
            try:
                return run_render()
            finally:
                runner.MEMORY_EPISODES = kept  # type: ignore[attr-defined]

        def run_bare() -> int:
            counter = _Counter()
            venv = _seeded_envs(args.num_envs, counter)
            evaluate_policy(model, venv, n_eval_episodes=args.episodes, deterministic=True)
            venv.close()
            return counter.steps

        runs = {"render": run_render, "bare": run_bare, "nomem": run_nomem}
        for fn in runs.values():  # warm-up, untimed
            fn()
        times: dict[str, list[float]] = {k: [] for k in runs}
        steps: dict[str, int] = {}
        for rep in range(args.repeats):
            for name in (("render", "bare", "nomem") if rep % 2 == 0 else ("nomem", "bare", "render")):
                t0 = time.perf_counter()
                steps[name] = runs[name]()
                times[name].append(time.perf_counter() - t0)
        print(f"RecurrentPPO (LSTM 64) on CartPole-v1, {args.episodes} episodes, {args.num_envs} envs, greedy, "
              f"{args.repeats} repeats interleaved")
        for name in runs:
            t = times[name]
            print(f"  {name:7s} min {min(t):7.2f} s  median {statistics.median(t):7.2f} s  steps {steps[name]:7d}  "
                  f"({steps[name] / min(t):,.0f} steps/s at best)")
        wall = [min(times["render"]) / min(times["bare"]), statistics.median(times["render"]) /
                statistics.median(times["bare"])]
        per = [w * steps["bare"] / steps["render"] for w in wall]
        print(f"  ratio render / bare: wall min {wall[0]:.2f}x, median {wall[1]:.2f}x; per env step min "
              f"{per[0]:.2f}x, median {per[1]:.2f}x (target <= 1.2x)")
        print(f"  ratio render / render without the memory diagnostics: min "
              f"{min(times['render']) / min(times['nomem']):.2f}x, median "
              f"{statistics.median(times['render']) / statistics.median(times['nomem']):.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
