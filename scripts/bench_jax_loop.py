"""Benchmark: recording from inside a jit-compiled JAX training loop (rlviz.jax.batch_recorder via rlviz.jax.every),
and rlviz.jax.record_batch against the torch-side recorder writing the same frames.

* ``loop``: a PureJaxRL-shaped PPO (tests/_purejaxrl.py: gymnax Breakout-MinAtar, 64 envs x 128 steps per update,
  4 epochs of 4 minibatches, the whole of training one ``jax.jit``) with the recording line (``every(K, ...)``, one
  video of env 0's first whole episode per call, written on the recorder's thread) vs the same loop without it.
  K is chosen from the plain loop's measured speed so that one video is written every ``--seconds-per-video``
  (default 60: a video a minute); each timed run is K updates (one recording, at update 0) plus the wait for its
  video. Interleaved (plain, recording, plain, ...), ``--reps`` times; compile time apart (AOT: ``.lower().compile()``).
* ``batch``: 8 episodes of 500 steps of Breakout-MinAtar (a paddle that follows the ball, so each episode runs to the
  500-step limit; a PureJaxRL batch [500, 8] with logits and values): ``record_batch`` (frames drawn from the
  observations) vs ``rlviz.record.RecordEpisode`` on an env replaying the same frames, with ``annotate(logits=...,
  value=..., log_prob=...)`` before each step: the same panels (its frames are given, not drawn: the torch side does
  less). Interleaved, repeated.

Ratios (recording / plain; record_batch / RecordEpisode) with min and median, of the wall time and of the CPU time
(this process's threads and its finished children, ffmpeg): on a shared machine the wall time swings with the other
processes' load, the CPU time much less; the medians and the interleaving are the guard.

    PYTHONPATH=. python scripts/bench_jax_loop.py --part loop --reps 5
    PYTHONPATH=. python scripts/bench_jax_loop.py --part batch --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _cpu() -> float:
    """CPU seconds of this process (every thread) and its finished children (ffmpeg): what the work costs, less
    swayed by the other processes of a shared machine than the wall time."""
    import os
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime if os.name == "posix" else time.process_time()


def _stats(xs: list[float]) -> str:
    return f"min {min(xs):.3f}  median {statistics.median(xs):.3f}  ({', '.join(f'{x:.3f}' for x in xs)})"


def _report(times: dict[str, list[float]], cpu: dict[str, list[float]], side: str, base: str, target: float) -> None:
    """Each side's wall and CPU seconds, and the ratios side / base (per repetition; of the medians)."""
    for what, got in (("wall", times), ("CPU", cpu)):
        ratios = [a / b for a, b in zip(got[side], got[base])]
        for name in (side, base):
            print(f"{what:4} {name:13} s: {_stats(got[name])}")
        print(f"{what:4} ratio {side}/{base}: {_stats(ratios)}; of medians "
              f"{statistics.median(got[side]) / statistics.median(got[base]):.3f} (target <= {target:g})")


def bench_loop(reps: int, seconds_per_video: float, num_envs: int, num_steps: int, work: Path) -> None:
    import jax
    from _purejaxrl import make_train

    import rlviz.jax as rj

    key = jax.random.key(0)

    def compiled(updates: int, record=None, every: int = 1):
        train, env, env_params = make_train("Breakout-MinAtar", num_envs=num_envs, num_steps=num_steps,
                                            num_updates=updates, epochs=4, minibatches=4, record=record,
                                            record_every=every)
        t0 = time.perf_counter()
        fn = jax.jit(train).lower(key).compile()
        return fn, time.perf_counter() - t0, env, env_params

    probe_updates = 10
    fn, compile_probe, env, env_params = compiled(probe_updates)
    jax.block_until_ready(fn(key))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(key))
    per_update = (time.perf_counter() - t0) / probe_updates
    k = max(1, round(seconds_per_video / per_update))
    print(f"loop: {per_update * 1000:.1f} ms per update ({num_envs} envs x {num_steps} steps, "
          f"{num_envs * num_steps / per_update:,.0f} env steps/s); K = {k} updates -> one video every "
          f"~{k * per_update:.0f} s", flush=True)
    recorder = rj.batch_recorder(env, env_params, work / "videos", episodes=1)
    plain, compile_plain, _, _ = compiled(k)
    recording, compile_rec, _, _ = compiled(k, recorder, k)
    print(f"compile: plain {compile_plain:.1f} s, recording {compile_rec:.1f} s (probe {compile_probe:.1f} s)")
    times: dict[str, list[float]] = {"plain": [], "recording": []}
    cpu: dict[str, list[float]] = {"plain": [], "recording": []}
    for rep in range(reps):
        for name, f in (("plain", plain), ("recording", recording)):
            recorder.folder = work / f"videos-{rep}"
            t0, c0 = time.perf_counter(), _cpu()
            jax.block_until_ready(f(key))
            if name == "recording":
                recorder.wait()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(_cpu() - c0)
            print(f"  rep {rep} {name}: {times[name][-1]:.2f} s wall, {cpu[name][-1]:.2f} s CPU", flush=True)
    print(f"{len(recorder.recorded)} videos written over {reps} recording runs")
    _report(times, cpu, "recording", "plain", 1.1)


def _follow_batch(episodes: int, steps: int):
    """A [steps, episodes] PureJaxRL batch of Breakout-MinAtar (max 500 steps): the paddle follows the ball."""
    import gymnax
    import jax
    import jax.numpy as jnp
    from _purejaxrl import Transition

    env, params = gymnax.make("Breakout-MinAtar")
    params = params.replace(max_steps_in_episode=steps)
    names = [int(a) for a in env.action_set]  # indices into MinAtar's full set: 0 NOOP, 1 LEFT, 3 RIGHT

    def body(carry, key):
        obs, state = carry
        move = jnp.sign(state.ball_x - state.pos)
        want = jnp.where(move < 0, names.index(1), jnp.where(move > 0, names.index(3), names.index(0)))
        logits = 3.0 * jax.nn.one_hot(want, len(names)) + 0.3 * jax.random.normal(key, (episodes, len(names)))
        action = jnp.argmax(logits, -1)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        value = jnp.tanh(state.ball_y / 10.0).astype(jnp.float32)
        out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(key, episodes), state, action, params)
        done = jnp.logical_or(out[3], out[4])
        return (out[0], out[1]), Transition(done, action, value, out[2], log_prob, obs, logits)

    start = jax.vmap(env.reset, (0, None))(jax.random.split(jax.random.key(0), episodes), params)
    _, batch = jax.jit(lambda k: jax.lax.scan(body, start, jax.random.split(k, steps)))(jax.random.key(1))
    return jax.device_get(batch), env, params


def _torch_side(batch, frames_of, work: Path, fps: float) -> None:
    """RecordEpisode on an env replaying the batch's frames, annotate(logits, value, log_prob) before each step."""
    import gymnasium as gym
    import numpy as np

    from rlviz.record import RecordEpisode, RecordOptions

    class Replay(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": fps}
        render_mode = "rgb_array"

        def __init__(self, n_actions: int):
            self.action_space = gym.spaces.Discrete(n_actions)
            self.observation_space = gym.spaces.Box(0, 1, batch.obs.shape[2:], np.float32)
            self.frames, self.t = None, 0

        def reset(self, *, seed=None, options=None):
            self.frames, self.t, self.col = options["frames"], 0, options["col"]
            return batch.obs[0, self.col], {}

        def step(self, action):
            self.t += 1
            done = bool(batch.done[self.t - 1, self.col])
            return batch.obs[min(self.t, len(batch.obs) - 1), self.col], float(batch.reward[self.t - 1, self.col]), \
                done, False, {}

        def render(self):
            return self.frames[self.t]

    env = RecordEpisode(Replay(batch.logits.shape[-1]), work, episode_trigger=lambda k: True, fps=fps,
                        options=RecordOptions(action_names=("NOOP", "LEFT", "RIGHT")))
    for col in range(batch.done.shape[1]):
        env.reset(options={"frames": frames_of[col], "col": col})
        for t in range(batch.done.shape[0]):
            env.annotate(logits=batch.logits[t, col], value=batch.value[t, col], log_prob=batch.log_prob[t, col])
            if env.step(int(batch.action[t, col]))[2]:
                break
    env.close()


def bench_batch(reps: int, episodes: int, steps: int, work: Path) -> None:
    import numpy as np

    import rlviz.jax as rj
    from rlviz.jax_loop.recording import jax_env_of

    t0 = time.perf_counter()
    batch, env, params = _follow_batch(episodes, steps)
    lengths = [int(np.flatnonzero(batch.done[:, c])[0]) + 1 if batch.done[:, c].any() else steps
               for c in range(episodes)]
    print(f"batch: [{steps}, {episodes}] in {time.perf_counter() - t0:.1f} s (compile included); episode lengths "
          f"{lengths}", flush=True)
    jenv = jax_env_of(env)
    frames_of = [np.concatenate([f, f[-1:]]) for f in
                 (jenv.frames_from_observations(batch.obs[:n, c]) for c, n in enumerate(lengths))]
    opt = rj.BatchVideoOptions(from_reset=True, sinks=None)
    rj.record_batch(batch, env, params, work / "warm", episodes=1, options=opt)  # imports, compiled get_obs
    times: dict[str, list[float]] = {"record_batch": [], "RecordEpisode": []}
    cpu: dict[str, list[float]] = {"record_batch": [], "RecordEpisode": []}
    for rep in range(reps):
        t0, c0 = time.perf_counter(), _cpu()
        out = rj.record_batch(batch, env, params, work / f"jax-{rep}", envs=None, episodes=episodes, options=opt)
        times["record_batch"].append(time.perf_counter() - t0)
        cpu["record_batch"].append(_cpu() - c0)
        assert [v.length for v in out] == lengths, [v.length for v in out]
        t0, c0 = time.perf_counter(), _cpu()
        _torch_side(batch, frames_of, work / f"torch-{rep}", float(jenv.fps))
        times["RecordEpisode"].append(time.perf_counter() - t0)
        cpu["RecordEpisode"].append(_cpu() - c0)
        print(f"  rep {rep}: record_batch {times['record_batch'][-1]:.2f} s ({cpu['record_batch'][-1]:.2f} CPU), "
              f"RecordEpisode {times['RecordEpisode'][-1]:.2f} s ({cpu['RecordEpisode'][-1]:.2f} CPU)", flush=True)
    _report(times, cpu, "record_batch", "RecordEpisode", 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("loop", "batch", "both"), default="both")
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions of each side")
    ap.add_argument("--seconds-per-video", type=float, default=60.0, help="loop: one video this often (sets K)")
    ap.add_argument("--num-envs", type=int, default=64, help="loop: PureJaxRL's NUM_ENVS")
    ap.add_argument("--num-steps", type=int, default=128, help="loop: PureJaxRL's NUM_STEPS")
    ap.add_argument("--episodes", type=int, default=8, help="batch: episodes written")
    ap.add_argument("--steps", type=int, default=500, help="batch: steps per episode")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-jax-loop-") as tmp:
        if args.part in ("batch", "both"):
            bench_batch(args.reps, args.episodes, args.steps, Path(tmp) / "batch")
        if args.part in ("loop", "both"):
            bench_loop(args.reps, args.seconds_per_video, args.num_envs, args.num_steps, Path(tmp) / "loop")


if __name__ == "__main__":
    main()
