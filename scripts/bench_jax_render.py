"""Benchmark: rlviz's JAX engine on 1000 gymnax Breakout-MinAtar episodes (statistics and failure heatmap: the
run record of ``rlviz render --heatmap``, without the videos) against a bare jit-compiled, vmapped evaluation loop of
the same policy (returns only), interleaved, min and median of the ratios. Compile times are reported apart (each
side's first call, not in the timed repeats).

The policy has the seed's shape (a flax MLP actor and MLP critic, separate params, observations reshaped to
(-1, 10, 10, 4)); its logits get a ball-tracking term so that episodes last (an untrained MLP loses the ball in ~6
steps). Two bare loops: a fixed-length ``lax.scan`` over the env's cap (as PureJaxRL's evaluation runs), and a
``lax.while_loop`` that stops when every episode ended (the fastest bare loop); the target is <= 1.3x the faster.

    python scripts/bench_jax_render.py [--episodes 1000] [--repeats 5] [--max-steps 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--memory", action="store_true", help="peak memory of 1000 vs 10000 episodes (two processes)")
    ap.add_argument("--peak-of", type=int, default=0, help=argparse.SUPPRESS)  # (the --memory child)
    args = ap.parse_args()
    if args.memory:
        import subprocess
        import sys

        for n in (1000, 10000):
            out = subprocess.run([sys.executable, __file__, "--peak-of", str(n), "--max-steps", str(args.max_steps)],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            print(f"{n:6d} episodes: {out}")
        return

    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from rlviz.evaluate.rollouts.rollout import episode_seed_for
    from rlviz.jax.contract import PolicyOut
    from rlviz.jax.envs import make_jax_env
    from rlviz.jax.rollout import JaxEngine, jax_rollout

    class Actor(nn.Module):  # the seed's shape: an MLP on the flattened (10, 10, 4) observation
        n: int

        @nn.compact
        def __call__(self, x):
            x = x.reshape(-1, 10, 10, 4).reshape(x.shape[0] if x.ndim > 3 else 1, -1)
            x = nn.relu(nn.Dense(64)(x))
            return nn.Dense(self.n)(nn.relu(nn.Dense(64)(x)))

    class Critic(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.reshape(-1, 10, 10, 4).reshape(x.shape[0] if x.ndim > 3 else 1, -1)
            return nn.Dense(1)(nn.relu(nn.Dense(64)(nn.relu(nn.Dense(64)(x)))))

    class SeedPolicy:
        kind, squash, recurrent = "logits", False, False
        action_names = ("NOOP", "LEFT", "RIGHT")

        def __init__(self):
            k1, k2 = jax.random.split(jax.random.key(0))
            obs = jnp.zeros((10, 10, 4))
            self.actor, self.critic = Actor(3), Critic()
            self.params = {"actor": self.actor.init(k1, obs), "critic": self.critic.init(k2, obs)}

        def logits(self, params, obs):
            cols = jnp.arange(10.0)
            paddle = jnp.sum(obs[9, :, 0] * cols)
            ball = jnp.sum(jnp.max(obs[:, :, 1], axis=0) * cols)
            track = jnp.stack([0.0, paddle - ball, ball - paddle])  # NOOP, LEFT, RIGHT toward the ball
            return self.actor.apply(params["actor"], obs)[0] + 6.0 * jnp.tanh(track)

        def apply(self, params, obs):
            return PolicyOut(logits=self.logits(params, obs), value=self.critic.apply(params["critic"], obs)[0, 0])

    env = make_jax_env("gymnax:Breakout-MinAtar")
    policy = SeedPolicy()
    engine = JaxEngine(env, policy, heatmap=True, max_steps=args.max_steps)
    n, cap = args.episodes, args.max_steps
    seeds = jnp.asarray(np.array([episode_seed_for(0, k) for k in range(n)], np.uint32))
    genv, gparams = env.env, env.params

    def episode_start(seed):
        k_reset, k_steps = jax.random.split(jax.random.key(seed))
        obs, state = genv.reset(k_reset, gparams)
        return k_steps, obs, state

    def bare_step(params, c, t):
        k_steps, obs, state, ret, alive = c
        k_act, k_env = jax.random.split(jax.random.fold_in(k_steps, t))
        a = jax.random.categorical(k_act, policy.logits(params, obs))
        obs, state, r, done, _, _ = genv.step(k_env, state, a, gparams)
        return k_steps, obs, state, ret + r * alive, alive & ~done

    @jax.jit
    def bare_scan(params, seeds):
        def one(seed):
            k, obs, state = episode_start(seed)
            c, _ = jax.lax.scan(lambda c, t: (bare_step(params, c, t), None),
                                (k, obs, state, jnp.float32(0), jnp.bool_(True)), jnp.arange(cap))
            return c[3]
        return jax.vmap(one)(seeds)

    @jax.jit
    def bare_while(params, seeds):
        k, obs, state = jax.vmap(episode_start)(seeds)
        step = jax.vmap(lambda c, t: bare_step(params, c, t), in_axes=(0, None))

        def body(x):
            c, t = x
            return step(c, t), t + 1

        c0 = (k, obs, state, jnp.zeros(seeds.shape, jnp.float32), jnp.ones(seeds.shape, bool))
        (c, _) = jax.lax.while_loop(lambda x: jnp.any(x[0][4]) & (x[1] < cap), body, (c0, 0))
        return c[3]

    def run_engine():
        return jax_rollout(engine, n, seed=0, num_envs=min(n, 1000))

    if args.peak_of:
        import resource

        n = args.peak_of
        t0 = time.perf_counter()
        result = run_engine()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS {peak:.0f} MiB, {time.perf_counter() - t0:.1f} s (compile included), "
              f"{len(result.episodes)} episodes, {result.heatmap.failures} failures")
        return

    runs = {"rlviz": lambda: run_engine(),
            "bare scan": lambda: np.asarray(bare_scan(policy.params, seeds)),
            "bare while": lambda: np.asarray(bare_while(policy.params, seeds))}
    for name, fn in runs.items():  # compile (the first call), reported apart
        t0 = time.perf_counter()
        out = fn()
        print(f"compile + first run  {name:10s} {time.perf_counter() - t0:7.2f} s")
    result = run_engine()
    print(f"{n} episodes: mean return {result.returns.mean():.2f}, mean length {result.lengths.mean():.1f}, "
          f"{result.heatmap.failures} failures on the heatmap; bare while-loop mean return "
          f"{float(np.mean(out)):.2f}")
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):  # interleaved
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"{name:10s} min {min(ts):.3f} s  median {statistics.median(ts):.3f} s")
    for bare in ("bare scan", "bare while"):
        ratios = [a / b for a, b in zip(times["rlviz"], times[bare])]
        print(f"rlviz / {bare}: min ratio {min(times['rlviz']) / min(times[bare]):.2f}x, "
              f"median of run-by-run ratios {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
