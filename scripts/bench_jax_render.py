"""Benchmark: rlviz's JAX engine on 1000 gymnax Breakout-MinAtar episodes (statistics and failure heatmap: the
run record of ``rlviz render --heatmap``, without the videos) against a bare jit-compiled, vmapped evaluation loop of
the same policy (returns only), interleaved, min and median of the ratios. Compile times are reported apart (each
side's first call, not in the timed repeats).

The policy has the seed's shape (a flax MLP actor and MLP critic, separate params, observations reshaped to
(-1, 10, 10, 4)); its logits get a ball-tracking term so that episodes last (an untrained MLP loses the ball in ~6
steps). Two bare loops: a fixed-length ``lax.scan`` over the env's cap (as PureJaxRL's evaluation runs), and a
``lax.while_loop`` that stops when every episode ended (the fastest bare loop); the target is <= 1.3x the faster.

Against rlviz's gymnasium path (``--gymnasium``): the same agent on the minatar package's ``MinAtar/Breakout-v1``
(gymnasium), rolled out by :func:`rlviz.evaluate.rollout` (what ``rlviz render --heatmap`` runs: 16 envs in lockstep,
statistics and the failure heatmap of MinAtar's objects). That path needs a torch agent: the flax agent's weights are
copied into a torch module of the same layers (``Linear.weight = kernel.T``; the observation flattened in the same
(row, column, channel) order; the same ball-tracking term), checked equal to the flax module on random observations
before timing. The two envs are MinAtar Breakout written twice (gymnax's port and the original), with the same
observations and rules (the original's sticky actions off: gymnax's port has none); both are capped at
``--max-steps``; the mean episode lengths are printed, and the ratio per environment step besides the ratio per 1000
episodes. Target: >= 10x.

Saliency (``--saliency``): the episodes ``--videos first:1,worst:1`` records; their rollout (each replayed alone,
keeping every step: :func:`rlviz.jax.replay.replay_jax_episode`) against the gradient saliency of every one of their
steps (:func:`rlviz.jax.replay.saliency_maps`: one vmapped ``jax.grad`` per episode). Target: <= 3x.

    python scripts/bench_jax_render.py [--episodes 1000] [--repeats 5] [--max-steps 1000] [--gymnasium] [--saliency]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--gymnasium", action="store_true", help="against rlviz's gymnasium MinAtar path (torch copy)")
    ap.add_argument("--saliency", action="store_true", help="gradient saliency of the recorded episodes vs their rollout")
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

    if args.gymnasium:
        return _against_gymnasium(run_engine, policy, args)
    if args.saliency:
        return _saliency(run_engine, engine, policy, args)
    runs = {"rlviz": lambda: run_engine(),
            "bare scan": lambda: np.asarray(bare_scan(policy.params, seeds)),
            "bare while": lambda: np.asarray(bare_while(policy.params, seeds))}
    times = _interleaved(runs, args.repeats)  # compile (the first call) reported apart
    result = run_engine()
    print(f"{n} episodes: mean return {result.returns.mean():.2f}, mean length {result.lengths.mean():.1f}, "
          f"{result.heatmap.failures} failures on the heatmap; bare while-loop mean return "
          f"{float(np.mean(runs['bare while']())):.2f}")
    for bare in ("bare scan", "bare while"):
        lo, med = _ratio(times, "rlviz", bare)
        print(f"rlviz / {bare}: min ratio {lo:.2f}x, median of run-by-run ratios {med:.2f}x")


def _interleaved(runs: dict, repeats: int) -> dict:
    """{name: [seconds]}: each of ``runs`` called once per repeat, in turn (after one untimed call each; a garbage
    collection, untimed, before each call)."""
    for name, fn in runs.items():
        t0 = time.perf_counter()
        fn()
        print(f"compile + first run  {name:14s} {time.perf_counter() - t0:7.2f} s")
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            gc.collect()  # (the other side's garbage is not this side's to collect: collected before each, untimed)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"{name:14s} min {min(ts):.3f} s  median {statistics.median(ts):.3f} s  ({len(ts)} runs)")
    return times


def _ratio(times: dict, a: str, b: str) -> tuple[float, float]:
    """(min a / min b, median of the run-by-run ratios a / b)."""
    return min(times[a]) / min(times[b]), statistics.median([x / y for x, y in zip(times[a], times[b])])


def torch_copy(policy):
    """A torch module computing what ``policy`` (the bench's flax seed agent) computes, from the same weights:
    ``(logits [B, 3], value [B])`` of float observations [B, 10, 10, 4]."""
    import torch

    def linear(dense):
        kernel, bias = np.asarray(dense["kernel"]), np.asarray(dense["bias"])
        layer = torch.nn.Linear(*kernel.shape)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
            layer.bias.copy_(torch.from_numpy(bias.copy()))
        return layer

    class TorchSeed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            a, c = policy.params["actor"]["params"], policy.params["critic"]["params"]
            self.actor = torch.nn.ModuleList(linear(d) for d in self.in_order(a))
            self.critic = torch.nn.ModuleList(linear(d) for d in self.in_order(c))

        @staticmethod
        def in_order(tree):  # flax names layers as they are made (Dense(3)(relu(Dense(64)(x))) makes Dense(3) first):
            layers = list(tree.values())  # the input layer takes 400 features, the output gives 3 (or 1)
            first = next(d for d in layers if d["kernel"].shape[0] == 400)
            last = next(d for d in layers if d["kernel"].shape[1] != 64)
            return [first, next(d for d in layers if d is not first and d is not last), last]

        @staticmethod
        def mlp(layers, x):
            x = torch.relu(layers[0](x))
            return layers[2](torch.relu(layers[1](x)))

        def forward(self, obs):
            x = obs.float()
            flat = x.reshape(x.shape[0], -1)
            cols = torch.arange(10.0)
            paddle = (x[:, 9, :, 0] * cols).sum(-1)
            ball = (x[:, :, :, 1].amax(dim=1) * cols).sum(-1)
            track = torch.stack([torch.zeros_like(paddle), paddle - ball, ball - paddle], -1)
            return self.mlp(self.actor, flat) + 6.0 * torch.tanh(track), self.mlp(self.critic, flat)[:, 0]

    return TorchSeed()


def _against_gymnasium(run_engine, policy, args) -> None:
    import jax
    import torch

    from rlviz.agent.policy import TorchPolicy
    from rlviz.choices import DEFAULT_NUM_ENVS
    from rlviz.envs.recipe import EnvRecipe
    from rlviz.evaluate import rollout
    from rlviz.evaluate.rollouts.plan import RolloutPlan

    module = torch_copy(policy)
    obs = (np.random.default_rng(0).random((64, 10, 10, 4)) < 0.2).astype(np.float32)
    want = jax.vmap(lambda o: policy.apply(policy.params, o))(jax.numpy.asarray(obs))
    with torch.no_grad():
        logits, value = module(torch.from_numpy(obs))
    err = max(float(np.abs(logits.numpy() - np.asarray(want.logits)).max()),
              float(np.abs(value.numpy() - np.asarray(want.value)).max()))
    print(f"torch copy vs flax on 64 observations: max |difference| {err:.2e} (logits and values)")
    assert err < 1e-4, err
    torch_policy = TorchPolicy(module, num_actions=3, kind="actor_critic", device="cpu")
    from dataclasses import replace

    recipe = replace(EnvRecipe.for_env_id("MinAtar/Breakout-v1"), env_kwargs={"sticky_action_prob": 0.0})
    plan = RolloutPlan(args.episodes, seed=0, num_envs=DEFAULT_NUM_ENVS, heatmap=True, max_steps=args.max_steps,
                       progress=False)
    last = {}

    def gymnasium():
        last["gym"] = rollout(recipe, torch_policy, plan)

    def jax_engine():
        last["jax"] = run_engine()

    times = _interleaved({"rlviz JAX": jax_engine, "rlviz gymnasium": gymnasium}, args.repeats)
    steps = {k: int(r.lengths.sum()) for k, r in last.items()}
    for k, r in last.items():
        print(f"{k}: {len(r.episodes)} episodes, mean length {r.lengths.mean():.1f}, mean return "
              f"{r.returns.mean():.2f}, {r.heatmap.failures} failures on the heatmap")
    lo, med = _ratio(times, "rlviz gymnasium", "rlviz JAX")
    per_step = (min(times["rlviz gymnasium"]) / steps["gym"]) / (min(times["rlviz JAX"]) / steps["jax"])
    print(f"gymnasium / JAX: min ratio {lo:.1f}x, median of run-by-run ratios {med:.1f}x; per env step "
          f"(min times) {per_step:.1f}x")


def _saliency(run_engine, engine, policy, args) -> None:
    from rlviz.config import parse_video_spec
    from rlviz.jax.replay import replay_jax_episode, saliency_maps
    from rlviz.jobs.videos import select_episodes

    result = run_engine()
    chosen = select_episodes(result.returns, parse_video_spec("first:1,worst:1"), seed=0)
    seeds = [int(result.episodes[i].seed) for _, i in chosen]
    reps = [replay_jax_episode(engine, s) for s in seeds]
    print("recorded episodes: " + ", ".join(f"{label}:{i} ({r.length} steps)" for (label, i), r in zip(chosen, reps)))

    def rollout_them():
        for s in seeds:
            replay_jax_episode(engine, s)

    def saliency_of_them():
        for r in reps:
            saliency_maps("gradient", policy, r.observations)

    times = _interleaved({"their rollout": rollout_them, "saliency": saliency_of_them}, args.repeats)
    lo, med = _ratio(times, "saliency", "their rollout")
    print(f"gradient saliency of every step / their rollout: min ratio {lo:.2f}x, median of run-by-run ratios "
          f"{med:.2f}x")


if __name__ == "__main__":
    main()
