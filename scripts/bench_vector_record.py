"""Benchmark: recording inside a training loop, rlviz's RecordVectorEpisode vs gymnasium's RecordVideo.

Two comparisons, each run as fresh processes, interleaved (A B A B ...) and repeated; ratios rlviz / RecordVideo
with their min and median:

* ``loop``: a PPO loop in CleanRL's shape (4 CartPole envs, SyncVectorEnv, 128 steps per rollout, 2 epochs of 4
  minibatches), recording sub-env 0 on RecordVideo's capped cubic schedule: with ``RecordVideo`` inside
  ``make_env`` (CleanRL's way) vs ``RecordVectorEpisode`` around the vector env plus one ``annotate(logits=...,
  value=...)`` per step (panel videos). Same seed: the same steps and the same episodes recorded (checked).
* ``single``: one CartPole env, the same episodes of random actions, every episode recorded (frames only):
  ``RecordVideo(env)`` vs ``RecordVectorEpisode(SyncVectorEnv([env]))``; wall time and the process's peak memory
  (ru_maxrss; ffmpeg runs as a child process in both and is reported apart).

RecordVideo needs moviepy, which rlviz's CI venv does not have: run this with a venv that has it::

    PYTHONPATH=. /work/venvs/vector/bin/python scripts/bench_vector_record.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _loop(kind: str, folder: str, total: int, seed: int = 1) -> dict:
    import gymnasium as gym
    import numpy as np
    import torch
    from torch import nn
    from torch.distributions.categorical import Categorical

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    num_envs, num_steps = 4, 128

    def make_env(idx):
        def thunk():
            if idx == 0:
                env = gym.make("CartPole-v1", render_mode="rgb_array")
                if kind == "recordvideo":
                    env = gym.wrappers.RecordVideo(env, folder, disable_logger=True)
            else:
                env = gym.make("CartPole-v1")
            return gym.wrappers.RecordEpisodeStatistics(env)
        return thunk

    envs = gym.vector.SyncVectorEnv([make_env(i) for i in range(num_envs)])
    if kind == "rlviz":
        import rlviz

        envs = rlviz.RecordVectorEpisode(envs, folder, options=rlviz.RecordOptions(sinks=None))

    def layer(i, o, std=2 ** 0.5):
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.zeros_(lin.bias)
        return lin

    actor = nn.Sequential(layer(4, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 2, 0.01))
    critic = nn.Sequential(layer(4, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
    params = list(actor.parameters()) + list(critic.parameters())
    opt = torch.optim.Adam(params, lr=2.5e-4, eps=1e-5)
    obs_b = torch.zeros((num_steps, num_envs, 4))
    act_b, logp_b, rew_b, done_b, val_b = (torch.zeros((num_steps, num_envs)) for _ in range(5))
    next_obs, _ = envs.reset(seed=seed)
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(num_envs)
    start = time.perf_counter()
    for _ in range(total // (num_envs * num_steps)):
        for step in range(num_steps):
            obs_b[step], done_b[step] = next_obs, next_done
            with torch.no_grad():
                logits = actor(next_obs)
                dist = Categorical(logits=logits)
                action = dist.sample()
                value = critic(next_obs)
                if kind == "rlviz":
                    envs.annotate(logits=logits, value=value)
            act_b[step], logp_b[step], val_b[step] = action, dist.log_prob(action), value.flatten()
            next_obs, reward, term, trunc, _ = envs.step(action.numpy())
            rew_b[step] = torch.tensor(reward).view(-1)
            next_obs = torch.Tensor(next_obs)
            next_done = torch.Tensor(np.logical_or(term, trunc).astype(np.float32))
        with torch.no_grad():
            adv, last = torch.zeros_like(rew_b), 0
            nv = critic(next_obs).reshape(1, -1)
            for t in reversed(range(num_steps)):
                nonterm = 1.0 - (next_done if t == num_steps - 1 else done_b[t + 1])
                nxt = nv if t == num_steps - 1 else val_b[t + 1]
                adv[t] = last = rew_b[t] + 0.99 * nxt * nonterm - val_b[t] + 0.99 * 0.95 * nonterm * last
            ret = adv + val_b
        b_obs, b_act, b_logp = obs_b.reshape(-1, 4), act_b.reshape(-1), logp_b.reshape(-1)
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        for _epoch in range(2):
            for idx in np.array_split(np.random.default_rng(seed).permutation(len(b_obs)), 4):
                dist = Categorical(logits=actor(b_obs[idx]))
                ratio = (dist.log_prob(b_act.long()[idx]) - b_logp[idx]).exp()
                a = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                loss = (torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean() - 0.01 * dist.entropy().mean()
                        + 0.25 * ((critic(b_obs[idx]).view(-1) - b_ret[idx]) ** 2).mean())
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()
    envs.close()
    wall = time.perf_counter() - start
    return {"wall": wall, "videos": sorted(p.name for p in Path(folder).glob("*.mp4"))}


def _single(kind: str, folder: str, episodes: int, seed: int = 0) -> dict:
    """``episodes`` episodes of random actions (the same ones for both: the vector env's autoreset step draws none)."""
    import gymnasium as gym
    import numpy as np

    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    start = time.perf_counter()
    steps = 0
    if kind == "recordvideo":
        env = gym.wrappers.RecordVideo(env, folder, episode_trigger=lambda k: True, disable_logger=True)
        env.reset(seed=seed)
        for _ in range(episodes):
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(int(rng.integers(2)))
                done, steps = term or trunc, steps + 1
            env.reset()
    else:
        from rlviz.record import RecordOptions
        from rlviz.record.vector import RecordVectorEpisode

        envs = RecordVectorEpisode(gym.vector.SyncVectorEnv([lambda: env]), folder,
                                   episode_trigger=lambda k: True, options=RecordOptions(sinks=None))
        envs.reset(seed=seed)
        for _ in range(episodes):
            done = False
            while not done:
                _, _, term, trunc, _ = envs.step(np.array([rng.integers(2)]))
                done, steps = bool(term[0] or trunc[0]), steps + 1
            envs.step(np.array([0]))  # NEXT_STEP: this step is the reset (its action is ignored)
        env = envs
    env.close()
    wall = time.perf_counter() - start
    return {"wall": wall, "videos": len(list(Path(folder).glob("*.mp4"))), "steps": steps}


def _child(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        fn = _loop if args.case == "loop" else _single
        out = fn(args.kind, folder, args.steps)
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["child_maxrss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(out))


def _run(case: str, kind: str, steps: int) -> dict:
    cmd = [sys.executable, __file__, "--child", "--case", case, "--kind", kind, "--steps", str(steps)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loop-steps", type=int, default=4096, help="env steps of the PPO loop (4 envs)")
    p.add_argument("--single-episodes", type=int, default=150, help="episodes of the single-env comparison")
    p.add_argument("--cases", default="loop,single")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--kind", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args)
    import moviepy  # noqa: F401 - RecordVideo needs it: fail here, before any timing

    for case in args.cases.split(","):
        steps = args.loop_steps if case == "loop" else args.single_episodes
        rows = []
        for rep in range(args.repeats):
            order = ("rlviz", "recordvideo") if rep % 2 == 0 else ("recordvideo", "rlviz")
            got = {kind: _run(case, kind, steps) for kind in order}
            rows.append(got)
            a, b = got["rlviz"], got["recordvideo"]
            if case == "loop":
                same = [n.replace("rl-video-env-0-", "rl-video-") for n in a["videos"] if n.endswith(".mp4")]
                if sorted(same) != sorted(b["videos"]):
                    raise SystemExit(f"loop: the recorded episodes differ: {a['videos']} vs {b['videos']}")
            elif (a["videos"], a["steps"]) != (b["videos"], b["steps"]):
                raise SystemExit(f"single: {a['videos']} videos of {a['steps']} steps vs {b['videos']} of {b['steps']}")
            print(f"{case} #{rep}: rlviz {a['wall']:.2f} s, {a['maxrss_mb']:.0f} MB | RecordVideo {b['wall']:.2f} s, "
                  f"{b['maxrss_mb']:.0f} MB | videos {a['videos'] if case == 'single' else len(a['videos'])}",
                  flush=True)
        for key, label in (("wall", "wall time"), ("maxrss_mb", "peak memory (python)"),
                           ("child_maxrss_mb", "peak memory (ffmpeg child)")):
            ratios = [r["rlviz"][key] / r["recordvideo"][key] for r in rows]
            print(f"{case}: {label} rlviz / RecordVideo: min {min(ratios):.3f}x, median {statistics.median(ratios):.3f}x")


if __name__ == "__main__":
    main()
