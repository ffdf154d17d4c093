"""Benchmark memory saliency (W = 16) against the plain gradient saliency of the same recorded episode, in one run.

sb3-contrib RecurrentPPO policies with random weights, through rlviz's SB3RecurrentPolicy:

* ``mlp``: MlpLstmPolicy (LSTM 256, the sb3-contrib default) on CartPole-sized observations [T, 4];
* ``cnn``: CnnLstmPolicy (Nature CNN + LSTM 256) on 84 x 84 x 1 uint8 frames, episodes a fifth as long.

Per model, each repetition times, interleaved: ``plain``: :func:`rlviz.explain.episode_saliency` (gradient, each
frame given its carried state: the states pass plus one batched backward); ``memory``:
:class:`rlviz.explain.MemoryGradient` with W = 16 (the states pass, one forward with forward-mode derivatives, the
backwards through the state update). Printed: seconds (min, median) and the ratio memory / plain (min over the
repetitions' own ratios, median), and the same without the states pass (both given the carried states).

    python scripts/bench_memory_saliency.py               # CPU, ~1 min
    python scripts/bench_memory_saliency.py --repeats 7 --steps 1000
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch


def _policy(kind: str):
    import gymnasium as gym
    import sb3_contrib

    from rlviz.sources.stable_baselines3.recurrent_ppo import SB3RecurrentPolicy

    torch.manual_seed(0)
    if kind == "mlp":
        env = gym.make("CartPole-v1")
        model = sb3_contrib.RecurrentPPO("MlpLstmPolicy", env, device="cpu", seed=0)
    else:
        space = gym.spaces.Box(0, 255, (84, 84, 1), np.uint8)

        class Frames(gym.Env):
            observation_space, action_space = space, gym.spaces.Discrete(4)

        model = sb3_contrib.RecurrentPPO("CnnLstmPolicy", Frames(), device="cpu", seed=0)
    return SB3RecurrentPolicy(model.policy, int(model.action_space.n), device="cpu"), model.observation_space


def _episode(space, steps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    if space.dtype == np.uint8:
        return rng.integers(0, 256, (steps, *space.shape), dtype=np.uint8)
    return rng.normal(size=(steps, *space.shape)).astype(np.float32)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(kind: str, steps: int, repeats: int, window: int) -> None:
    from rlviz.explain import MemoryGradient, carried_states
    from rlviz.explain.saliency import AttributionOptions, episode_saliency
    from rlviz.progress import bar  # noqa: F401  (imported once, outside the timings)

    policy, space = _policy(kind)
    obs = _episode(space, steps)
    actions = np.random.default_rng(1).integers(0, policy.num_actions, steps - 1)
    acts = np.append(actions, 0)
    states = carried_states(policy, obs)
    jobs = {
        "plain": lambda: episode_saliency(policy, obs, actions, method="gradient"),
        "memory": lambda: MemoryGradient(policy, window=window).attribute(obs, actions=acts),
        "plain|states": lambda: episode_saliency(policy, obs, actions, method="gradient",
                                                 options=AttributionOptions(states=states)),
        "memory|states": lambda: MemoryGradient(policy, window=window).attribute(obs, actions=acts, states=states),
    }
    for fn in jobs.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(repeats):
        for name, fn in jobs.items():
            times[name].append(_timed(fn))
    print(f"\n{kind}: {steps} steps, W = {window}, {repeats} repetitions (interleaved), seconds min / median")
    for name, ts in times.items():
        print(f"  {name:14s} {min(ts):8.3f} {statistics.median(ts):8.3f}")
    for a, b in (("memory", "plain"), ("memory|states", "plain|states")):
        ratios = [x / y for x, y in zip(times[a], times[b])]
        print(f"  ratio {a} / {b}: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x (target <= 3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    parser.add_argument("--steps", type=int, default=500, help="episode length of the mlp model (cnn: a fifth)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for kind in args.models:
        run(kind, args.steps if kind == "mlp" else max(16, args.steps // 5), args.repeats, args.window)


if __name__ == "__main__":
    main()
