"""Speed of RecordEpisode without a policy (the RecordVideo drop-in) against gymnasium's RecordVideo.

Same env, same seeded random actions, same steps, every episode recorded; the two recorders (and bare
stepping with a render per step, for scale) run interleaved, --repeats times each; min and median wall
time, and the ratio RecordVideo / RecordEpisode measured in this run. RecordVideo needs moviepy
(``pip install moviepy``: for this benchmark only, rlviz does not use it).

    python scripts/bench_record.py                    # CartPole-v1, 2,000 steps, 5 repeats
    python scripts/bench_record.py --env Pendulum-v1 --steps 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlviz import RecordEpisode, RecordOptions  # noqa: E402


def run(which: str, env_id: str, steps: int, folder: str) -> float:
    env = gym.make(env_id, render_mode="rgb_array")
    if which == "recordvideo":
        env = gym.wrappers.RecordVideo(env, folder, episode_trigger=lambda k: True, disable_logger=True)
    elif which.startswith("rlviz"):
        preset = which.split(":")[1] if ":" in which else "veryfast"
        env = RecordEpisode(env, folder, episode_trigger=lambda k: True, options=RecordOptions(preset=preset))
    rng = np.random.default_rng(0)
    env.action_space.seed(0)
    t0 = time.perf_counter()
    env.reset(seed=0)
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if which == "bare":
            env.render()
        if term or trunc:
            env.reset(seed=int(rng.integers(1 << 30)))
    env.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    kinds = ["bare", "rlviz", "rlviz:medium", "recordvideo"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for rep in range(args.repeats):
        for k in kinds if rep % 2 == 0 else kinds[::-1]:  # interleaved, order alternating
            with tempfile.TemporaryDirectory() as folder:
                times[k].append(run(k, args.env, args.steps, folder))
    print(f"{args.env}, {args.steps:,} steps, every episode recorded, {args.repeats} repeats (seconds):")
    for k in kinds:
        label = {"bare": "bare step + render", "rlviz": "RecordEpisode (veryfast)",
                 "rlviz:medium": "RecordEpisode (medium)", "recordvideo": "gymnasium RecordVideo"}[k]
        print(f"  {label:26s} min {min(times[k]):7.3f}  median {statistics.median(times[k]):7.3f}  "
              f"({args.steps / statistics.median(times[k]):7.0f} steps/s)")
    rv = times["recordvideo"]
    for k in ("rlviz", "rlviz:medium"):
        print(f"RecordVideo / {k}: min {min(rv) / min(times[k]):.2f}x, median "
              f"{statistics.median(rv) / statistics.median(times[k]):.2f}x (> 1: RecordEpisode is faster)")


if __name__ == "__main__":
    main()
