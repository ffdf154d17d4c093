"""MuJoCo speed: rlviz's rollouts against the bare gymnasium loop, and its recorder with panels against RecordVideo.

1. ``render``: ``rollout()`` of N episodes of Hopper-v5 (16 envs in lockstep, diagnostics and the torso heatmap on)
   against a bare ``gym.make`` loop stepping one env with the same policy (a Gaussian MLP, one forward a step).
   Ratio rlviz / bare (<= 1.2 wanted).
2. ``record``: ``RecordEpisode(env, folder, policy)`` (the body beside its action panels, H.264 through rlviz's own
   encoder) against gymnasium's ``RecordVideo`` (plain frames, moviepy) on the same seeded actions. Ratio
   rlviz / RecordVideo (<= 1.0 wanted). RecordVideo needs moviepy, which rlviz's venv does not hold: give a Python
   that has it (``--moviepy-python``, e.g. a throwaway ``python -m venv --system-site-packages`` with moviepy), and
   its runs go there.

Each pair runs interleaved (order alternating) ``--repeats`` times; min and median wall times and their ratios.

    python scripts/bench_mujoco.py --episodes 100 --repeats 3
    python scripts/bench_mujoco.py --only record --steps 60 --moviepy-python /tmp/mp/bin/python
    python scripts/bench_mujoco.py --only record --before /tmp/old-tree   # + that tree's RecordEpisode, interleaved

``--before DIR`` (a checkout of another commit, e.g. ``git archive REV | tar -x -C DIR``) adds that tree's recorder
as a third contender in the same interleaved runs, so a change is measured against its baseline on the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from compiled import compile_trees  # noqa: E402

ENV = "Hopper-v5"


def _module():
    import torch
    from torch import nn

    class Gaussian(nn.Module):  # an SB3-sized MLP Gaussian
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.pi = nn.Sequential(nn.Linear(11, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))
            self.v = nn.Sequential(nn.Linear(11, 64), nn.Tanh(), nn.Linear(64, 1))

        def forward(self, x):
            mean = self.pi(x)
            return {"mean": mean, "std": torch.full_like(mean, 0.3), "value": self.v(x)[:, 0]}

    return Gaussian()


def bare(episodes: int) -> float:
    import gymnasium as gym
    import numpy as np
    import torch

    from rlviz.envs.headless import choose_gl

    choose_gl(ENV)
    net, env, rng = _module(), gym.make(ENV), np.random.default_rng(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        for k in range(episodes):
            obs, _ = env.reset(seed=k)
            done = False
            while not done:
                out = net(torch.as_tensor(obs, dtype=torch.float32)[None])
                a = (out["mean"] + out["std"] * torch.as_tensor(rng.standard_normal(3), dtype=torch.float32))[0]
                obs, _, term, trunc, _ = env.step(np.clip(a.numpy(), -1, 1))
                done = term or trunc
    return time.perf_counter() - t0


def rlviz_render(episodes: int) -> float:
    import gymnasium as gym

    from rlviz.agent.policy import TorchPolicy
    from rlviz.envs import make_env
    from rlviz.evaluate import RolloutPlan
    from rlviz.evaluate.rollouts.rollout import rollout

    space = make_env(ENV, render_mode=None).action_space
    policy = TorchPolicy(_module(), action_space=space, device="cpu")
    t0 = time.perf_counter()
    rollout(ENV, policy, RolloutPlan(episodes, seed=0, heatmap=True, progress=False))
    del gym
    return time.perf_counter() - t0


def record(which: str, steps: int, folder: str) -> float:
    import gymnasium as gym
    import numpy as np

    if which == "rlviz":
        from rlviz import RecordEpisode
        from rlviz.envs.headless import choose_gl

        choose_gl(ENV)
        env = RecordEpisode(gym.make(ENV, render_mode="rgb_array"), folder, _module(),
                            episode_trigger=lambda k: True)
    else:
        os.environ.setdefault("MUJOCO_GL", "egl")
        env = gym.wrappers.RecordVideo(gym.make(ENV, render_mode="rgb_array"), folder,
                                       episode_trigger=lambda k: True, disable_logger=True)
    env.action_space.seed(0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    env.reset(seed=0)
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(np.clip(rng.normal(0, 0.3, 3), -1, 1).astype(np.float32))
        if term or trunc:
            env.reset(seed=int(rng.integers(1 << 30)))
    env.close()
    return time.perf_counter() - t0


def _in_process(kind: str, n: int, python: str, root: Path = ROOT) -> float:
    """One measurement in a fresh process (each picks its OpenGL backend before mujoco is imported), importing
    rlviz from ``root``."""
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); sys.argv = ['x']\n"
            f"import importlib.util as u; s = u.spec_from_file_location('b', {__file__!r}); m = u.module_from_spec(s)\n"
            f"s.loader.exec_module(m); import tempfile\n"
            f"with tempfile.TemporaryDirectory() as d:\n"
            f"    print(m.{'record' if kind.startswith('record:') else kind}("
            f"{repr(kind.split(':')[1]) + ', ' if kind.startswith('record:') else ''}{n}"
            f"{', d' if kind.startswith('record:') else ''}))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(root)}
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise SystemExit(f"{kind} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def _pair(names: tuple[str, ...], runs: dict, repeats: int) -> dict:
    """Each of ``names`` run ``repeats`` times, interleaved (order reversed every other round); the ratios of the
    first to the second (and of a third, when given, to the second)."""
    times: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(repeats):
        for n in names if rep % 2 == 0 else names[::-1]:
            times[n].append(runs[n]())
    a, b = names[:2]
    out = {"times": times, "ratio_min": min(times[a]) / min(times[b]),
           "ratio_median": statistics.median(times[a]) / statistics.median(times[b])}
    for c in names[2:]:
        out[f"{c}_ratio_min"] = min(times[c]) / min(times[b])
        out[f"{c}_ratio_median"] = statistics.median(times[c]) / statistics.median(times[b])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--steps", type=int, default=60, help="steps recorded per recorder run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("render", "record"))
    ap.add_argument("--moviepy-python", default=sys.executable, help="a Python with moviepy, for RecordVideo")
    ap.add_argument("--before", help="another checkout of rlviz whose recorder is timed too, interleaved")
    args = ap.parse_args()
    me = sys.executable
    compile_trees(ROOT / "rlviz", *([Path(args.before) / "rlviz"] if args.before else []))  # as installed
    report = {}
    if args.only in (None, "render"):
        r = _pair(("rlviz", "bare"), {"rlviz": lambda: _in_process("rlviz_render", args.episodes, me),
                                      "bare": lambda: _in_process("bare", args.episodes, me)}, args.repeats)
        report["render"] = r
        print(f"{ENV}, {args.episodes} episodes: rlviz rollout {min(r['times']['rlviz']):.2f}s min / "
              f"{statistics.median(r['times']['rlviz']):.2f}s median, bare loop {min(r['times']['bare']):.2f}s / "
              f"{statistics.median(r['times']['bare']):.2f}s; rlviz / bare: min {r['ratio_min']:.2f}x, median "
              f"{r['ratio_median']:.2f}x (<= 1.2 wanted)")
    if args.only in (None, "record"):
        runs = {"rlviz": lambda: _in_process("record:rlviz", args.steps, me),
                "recordvideo": lambda: _in_process("record:recordvideo", args.steps, args.moviepy_python)}
        if args.before:
            runs["before"] = lambda: _in_process("record:rlviz", args.steps, me, Path(args.before).resolve())
        r = _pair(tuple(runs), runs, args.repeats)
        report["record"] = r
        print(f"{ENV}, {args.steps} steps recorded: RecordEpisode with panels {min(r['times']['rlviz']):.2f}s min / "
              f"{statistics.median(r['times']['rlviz']):.2f}s median, RecordVideo "
              f"{min(r['times']['recordvideo']):.2f}s / {statistics.median(r['times']['recordvideo']):.2f}s; "
              f"rlviz / RecordVideo: min {r['ratio_min']:.2f}x, median {r['ratio_median']:.2f}x (<= 1.0 wanted)")
        if args.before:
            print(f"  --before {args.before}: {min(r['times']['before']):.2f}s min / "
                  f"{statistics.median(r['times']['before']):.2f}s median; before / RecordVideo: min "
                  f"{r['before_ratio_min']:.2f}x, median {r['before_ratio_median']:.2f}x")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "times"} for k, v in report.items()}))


if __name__ == "__main__":
    main()
