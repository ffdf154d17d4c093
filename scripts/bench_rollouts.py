"""Benchmark rollout() (seeded per-episode resets, per-episode rngs, diagnostics) against a bare batched-policy
loop over a gymnasium SyncVectorEnv (same-step autoreset) with the same envs, the same policy and the same batch.

    python scripts/bench_rollouts.py                 # MinAtar (16 envs) and ALE Breakout (8 envs), shipped agents
    python scripts/bench_rollouts.py --case minatar --repeats 5
    python scripts/bench_rollouts.py --native         # the single-run table, with ale-py's AtariVectorEnv
    python scripts/bench_rollouts.py --heatmap-cost   # CartPole, Acrobot, LunarLander: heatmap on vs off

The default compares, per case, three variants run interleaved (bare, rollout, rollout unpadded; the order
rotates each repetition), ``--repeats`` times: ``rollout()`` against the bare loop (steps/s ratio, >= 0.9x is
the target), and the cost of batch invariance: ``rollout()`` against the same rollout forwarding only its active
rows, at their own count, instead of whole padded ``forward_rows`` chunks (as rlviz did before). Prints min and
median of the per-repetition ratios.

``--heatmap-cost`` times rollout() without the failure heatmap, with it (the env's default extractor: exact,
from the env's state, on these envs) and with it from pixels (the motion extractor on rendered frames, as
for an env without an exact extractor), interleaved and repeated, and prints the min and median of the
per-repeat ratios of CPU time (and the median ratio of wall time).
"""

from __future__ import annotations

import argparse
import importlib
import time
from types import SimpleNamespace

import numpy as np
import torch

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent
from rlviz.agent.policy import Policy, TorchPolicy
from rlviz.envs import make_env, make_vec_env
from rlviz.envs.ale_seed import seeded_reset
from rlviz.evaluate.rollouts.rollout import RolloutPlan, rollout
from rlviz.sources.checkpoint import load_checkpoint

rollout_mod = importlib.import_module("rlviz.evaluate.rollouts.rollout")  # the package exports a function of that name
lockstep_mod = importlib.import_module("rlviz.evaluate.rollouts.lockstep")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # what _drive and rollout() time with (--clock)


def use_clock(name: str) -> None:
    """Time both loops with this process's CPU time ("cpu": on a shared machine, time spent waiting for a core
    is not counted; torch runs one thread) or wall time."""
    global clock
    clock = CLOCKS[name]
    rollout_mod.time = SimpleNamespace(perf_counter=clock)


def _drive(vec, policy, episodes, num_envs, seed):
    """Step ``vec`` with batched policy.act until ``episodes`` have finished; (steps, episodes, seconds)."""
    obs, _ = vec.reset(seed=seed)
    rng = np.random.default_rng(seed)
    done_eps = steps = 0
    t0 = clock()
    while done_eps < episodes:
        acts, _ = policy.act(obs, rng)
        obs, _, term, trunc, _ = vec.step(acts)
        steps += num_envs
        done_eps += int(np.sum(term | trunc))
    wall = clock() - t0
    vec.close()
    return steps, done_eps, wall


def bare_loop(env_id, policy, episodes, num_envs, seed, render_mode=None):
    """What a user writes: step a vector env, policy.act; count finished episodes."""
    return _drive(make_vec_env(env_id, num_envs, render_mode=render_mode), policy, episodes, num_envs, seed)


def native_loop(env_id, policy, episodes, num_envs, seed):
    """ale-py's AtariVectorEnv (C++ threads), timed only: rollout() cannot use it, its episodes differ from the
    recipe's for the same seeds (reset no-op count, seeds >= 2**31, frame-stack padding: scripts/probe_native_ale.py)."""
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


class _Mlp(torch.nn.Module):
    """A random-init actor-critic MLP: the worst case for the heatmap (short episodes, each one failing)."""

    def __init__(self, n_in, n_act):
        super().__init__()
        self.pi, self.v = torch.nn.Linear(n_in, n_act), torch.nn.Linear(n_in, 1)

    def forward(self, x):
        return self.pi(x), self.v(x)[:, 0]


class _Balancer(torch.nn.Module):
    """CartPole: push toward the pole's fall, sampled softly (episodes of a few hundred steps, most failing)."""

    def forward(self, x):
        s = 4.0 * (x[:, 2] + 0.3 * x[:, 3] + 0.02 * x[:, 1])
        return torch.stack([-s, s], 1), x[:, 0] * 0


def _heatmap_cost_policy(env_id: str, kind: str) -> TorchPolicy:
    probe = make_env(env_id, render_mode=None)
    torch.manual_seed(0)
    module = _Balancer() if kind == "balancer" else _Mlp(probe.observation_space.shape[0], probe.action_space.n)
    probe.close()
    return TorchPolicy(module, device="cpu")


def _timed_rollout(env_id, policy, episodes, **kw) -> tuple:
    """(result, CPU seconds of the whole call: env construction and the heatmap's set-up included)."""
    t = time.process_time()
    result = rollout(env_id, policy, RolloutPlan(episodes, **kw))
    return result, time.process_time() - t


def heatmap_cost(episodes: int, repeats: int, num_envs: int, only: str = "") -> None:
    """Per case, each repeat runs three rollouts back to back (no heatmap; the env's default extractor, exact
    where rlviz has one; pixels: the motion extractor on rendered frames, as for an env without one) and
    prints, per heatmap variant, the min and the median over repeats of its CPU time over the same repeat's
    no-heatmap run (process CPU time, one torch thread: what a shared machine's other load disturbs least),
    and the median of the same ratio in wall time (the rollout loop's ``wall_s``)."""
    import gymnasium as gym

    from rlviz.evaluate.failures.objects import MotionExtractor, extractor_for

    cases = [("CartPole-v1", "random-init MLP"), ("CartPole-v1", "balancer"), ("Acrobot-v1", "random-init MLP")]
    try:
        gym.make("LunarLander-v3").close()
        cases.append(("LunarLander-v3", "random-init MLP"))
    except Exception as exc:  # gymnasium[box2d] missing
        print(f"LunarLander-v3 skipped ({type(exc).__name__}: {exc})")
    cases = [c for c in cases if only.lower() in " ".join(c).lower()]
    print(f"{'env':<16}{'policy':<17}{'extractor':<17}{'eps':>5}{'steps':>8}{'fails':>6}{'off st/s':>10}"
          f"{'on st/s':>9}{'cpu min':>9}{'median':>8}{'wall median':>12}")
    for env_id, kind in cases:
        policy = _heatmap_cost_policy(env_id, kind)
        kw = dict(num_envs=num_envs, seed=0, progress=False)
        variants = {type(extractor_for(env_id)).__name__: None, "pixels (motion)": MotionExtractor}
        rollout(env_id, policy, RolloutPlan(2, heatmap=True, **kw))  # warm up (imports, pygame)
        runs: dict = {name: [] for name in ("off", *variants)}
        for _ in range(repeats):  # interleaved
            runs["off"].append(_timed_rollout(env_id, policy, episodes, **kw))
            for name, make in variants.items():
                runs[name].append(_timed_rollout(env_id, policy, episodes, heatmap=True,
                                                 objects=make() if make else None, **kw))
        off_rate = np.median([r.steps / r.wall_s for r, _ in runs["off"]])
        for name in variants:
            pairs = list(zip(runs[name], runs["off"], strict=True))
            cpu = [on_cpu / off_cpu for (_, on_cpu), (_, off_cpu) in pairs]
            wall = [on.wall_s / off.wall_s for (on, _), (off, _) in pairs]
            on = runs[name][-1][0]
            print(f"{env_id:<16}{kind:<17}{name:<17}{episodes:>5}{on.steps:>8}{on.heatmap.failures:>6}{off_rate:>10.0f}"
                  f"{np.median([r.steps / r.wall_s for r, _ in runs[name]]):>9.0f}{min(cpu):>8.2f}x"
                  f"{np.median(cpu):>7.2f}x{np.median(wall):>11.2f}x", flush=True)


class unpadded:
    """Within the block, rollouts forward only their active rows, at their own count (not whole padded chunks
    of ``forward_rows``): what rollouts cost without batch invariance (main before it)."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def __enter__(self):
        pol, decide = self.policy, lockstep_mod.decide
        pol._forward_padded = lambda chunk, rows, parts: Policy._forward_padded(pol, chunk, chunk.shape[0], parts)

        def decide_active(policy, obs, rows, noise, greedy, spec):
            return decide(policy, obs if rows is None else obs[rows], None, noise, greedy, spec)

        lockstep_mod.decide = decide_active
        self.saved = decide

    def __exit__(self, *exc):
        del self.policy._forward_padded
        lockstep_mod.decide = self.saved


CASES = {"minatar": ("samples/minatar_breakout_ppo.pt2", 16, 1000), "ale": ("samples/ale_breakout_ppo.pt2", 8, 48)}


def compare(case: str, repeats: int, episodes: int | None, seed: int) -> dict:
    """Interleaved repetitions of bare loop / rollout() / unpadded rollout(); prints and returns the ratios."""
    path, num_envs, default_eps = CASES[case]
    agent = load_checkpoint(path, device="cpu")
    recipe, policy, eps = agent.recipe, agent.policy, episodes or default_eps
    rollout(recipe, policy, RolloutPlan(2, num_envs=2, seed=seed, progress=False, threads=1))  # warm up (first forwards)

    def bare():
        s, e, w = bare_loop(recipe, policy, eps, num_envs, seed, render_mode="rgb_array")
        return s / w

    def ours():
        r = rollout(recipe, policy, RolloutPlan(eps, num_envs=num_envs, seed=seed, progress=False, threads=1))
        return r.steps / r.wall_s

    def ours_unpadded():
        with unpadded(policy):
            return ours()

    variants = {"bare": bare, "rollout": ours, "unpadded": ours_unpadded}
    rates: dict[str, list] = {k: [] for k in variants}
    names = list(variants)
    for r in range(repeats):
        for name in names[r % 3:] + names[: r % 3]:
            rates[name].append(variants[name]())
        print(f"{case} repeat {r}: " + ", ".join(f"{k} {v[-1]:.0f} steps/s" for k, v in rates.items()), flush=True)
    vs_bare = [o / b for o, b in zip(rates["rollout"], rates["bare"])]
    padding = [u / o for o, u in zip(rates["rollout"], rates["unpadded"])]
    print(f"{case} ({path}, {num_envs} envs, {eps} episodes, {repeats} interleaved repeats, {clock.__name__}):\n"
          f"  rollout() vs bare loop (steps/s):        min {min(vs_bare):.3f}x  median {np.median(vs_bare):.3f}x\n"
          f"  cost of padding (unpadded/padded speed): min {min(padding):.3f}x  median {np.median(padding):.3f}x")
    return {"vs_bare": vs_bare, "padding": padding}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["both", *CASES], default="both", help="the interleaved comparison's cases")
    ap.add_argument("--table", action="store_true", help="the single-run table on --env with a random-init agent")
    ap.add_argument("--env", default="ALE/Breakout-v5")
    ap.add_argument("--episodes", type=int, default=None)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--native", action="store_true", help="also time ale-py's native AtariVectorEnv")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (shared machine: 1)")
    ap.add_argument("--heatmap-cost", action="store_true", help="heatmap on vs off on classic-control envs")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="--heatmap-cost: only the cases whose env or policy contains this")
    ap.add_argument("--clock", choices=list(CLOCKS), default="cpu",
                    help="cpu: this process's CPU time (default: robust on a shared machine), wall: elapsed time")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    use_clock(args.clock)
    if args.heatmap_cost:
        return heatmap_cost(args.episodes or 200, args.repeats, args.num_envs, args.only)
    if not (args.table or args.native):
        for case in CASES if args.case == "both" else [args.case]:
            compare(case, args.repeats, args.episodes, args.seed)
        return None
    args.episodes = args.episodes or 32
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
    r = rollout(args.env, policy, RolloutPlan(args.episodes, num_envs=args.num_envs, seed=args.seed, progress=False))
    rows.append(("rollout()", r.steps, len(r.episodes), r.wall_s))
    r = rollout(args.env, policy, RolloutPlan(args.episodes, num_envs=args.num_envs, seed=args.seed, heatmap=True,
                                              progress=False))
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
