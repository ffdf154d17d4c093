"""Benchmark rollout() (seeded per-episode resets, per-episode rngs, failure heatmap) against a bare
batched-policy loop over a gymnasium SyncVectorEnv (same-step autoreset) with the same policy.

    python scripts/bench_rollouts.py                 # ALE Breakout, random NatureCNNAgent, 32 episodes
    python scripts/bench_rollouts.py --episodes 1000 --native

Prints steps/s and episodes/s of each variant and the ratio to the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent
from rlviz.agent.policy import TorchPolicy
from rlviz.envs import make_env, make_vec_env
from rlviz.envs.ale_seed import seeded_reset
from rlviz.evaluate.rollout import rollout


def _drive(vec, policy, episodes, num_envs, seed):
    """Step ``vec`` with batched policy.act until ``episodes`` have finished; (steps, episodes, seconds)."""
    obs, _ = vec.reset(seed=seed)
    rng = np.random.default_rng(seed)
    done_eps = steps = 0
    t0 = time.perf_counter()
    while done_eps < episodes:
        acts, _ = policy.act(obs, rng)
        obs, _, term, trunc, _ = vec.step(acts)
        steps += num_envs
        done_eps += int(np.sum(term | trunc))
    wall = time.perf_counter() - t0
    vec.close()
    return steps, done_eps, wall


def bare_loop(env_id, policy, episodes, num_envs, seed):
    """What a user writes: step a vector env, policy.act; count finished episodes."""
    return _drive(make_vec_env(env_id, num_envs, render_mode=None), policy, episodes, num_envs, seed)


def native_loop(env_id, policy, episodes, num_envs, seed):
    """ale-py's AtariVectorEnv (C++ threads, its own preprocessing: episodes differ from the recipe's)."""
    from ale_py.vector_env import AtariVectorEnv

    vec = AtariVectorEnv(game=env_id.split("/")[1].split("-")[0].lower(), num_envs=num_envs,
                         repeat_action_probability=0.25, reward_clipping=False, episodic_life=False)
    return _drive(vec, policy, episodes, num_envs, seed)


def reset_costs(env_id, n=10):
    env = make_env(env_id)
    env.reset(seed=0)
    out = {}
    for name, fn in (("reset(seed) [ROM reload]", lambda i: env.reset(seed=1000 + i)),
                     ("seeded_reset [restore]", lambda i: seeded_reset(env, 2000 + i)),
                     ("reset() unseeded", lambda i: env.reset())):
        fn(0)
        t = time.perf_counter()
        for i in range(n):
            fn(i)
        out[name] = (time.perf_counter() - t) / n * 1000
    env.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="ALE/Breakout-v5")
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--native", action="store_true", help="also time ale-py's native AtariVectorEnv")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (shared machine: 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    probe = make_env(args.env)
    n_act = int(probe.action_space.n)
    module = MinAtarAgent(n_act, probe.observation_space.shape[-1]) if args.env.startswith("MinAtar/") else NatureCNNAgent(n_act)
    probe.close()
    policy = TorchPolicy(module, device="cpu")

    if args.env.startswith("ALE/"):
        for k, v in reset_costs(args.env).items():
            print(f"{k:<28} {v:7.1f} ms")
    rows = []
    s, e, w = bare_loop(args.env, policy, args.episodes, args.num_envs, args.seed)
    rows.append(("bare SyncVectorEnv loop", s, e, w))
    r = rollout(args.env, policy, args.episodes, num_envs=args.num_envs, seed=args.seed, progress=False)
    rows.append(("rollout()", r.steps, len(r.episodes), r.wall_s))
    r = rollout(args.env, policy, args.episodes, num_envs=args.num_envs, seed=args.seed, heatmap=True, progress=False)
    rows.append(("rollout(heatmap=True)", r.steps, len(r.episodes), r.wall_s))
    print(f"heatmap: {r.heatmap.failures} failures / {r.heatmap.episodes} episodes, objects {r.heatmap.object_names}")
    if args.native and args.env.startswith("ALE/"):
        s, e, w = native_loop(args.env, policy, args.episodes, args.num_envs, args.seed)
        rows.append(("native AtariVectorEnv loop", s, e, w))
    base = rows[0][1] / rows[0][3]
    print(f"{'variant':<28}{'steps':>8}{'episodes':>9}{'wall s':>8}{'steps/s':>9}{'eps/s':>7}{'vs bare':>9}")
    for name, s, e, w in rows:
        print(f"{name:<28}{s:>8}{e:>9}{w:>8.1f}{s / w:>9.0f}{e / w:>7.2f}{(s / w) / base:>9.2f}x")


if __name__ == "__main__":
    main()
