"""Attention benchmark (issue #28): a render with per-object attention against the same render without saliency.

    python scripts/bench_attention.py                      # MinAtar 1000 episodes and ALE 100, 3 repetitions
    python scripts/bench_attention.py --only minatar --reps 5 --minatar-episodes 1000

Each repetition runs, in fresh processes and interleaved (a shared machine: the load is printed beside each),
``rlviz render SAMPLE --episodes N --heatmap --videos none`` (the baseline) and the same with ``--saliency
gradient`` (attention on: every step's |gradient x input| shares per object). Figures: the min and median wall
seconds of each, and the min and median of the per-repetition ratios. Target (issue #28): MinAtar <= 2x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"minatar": "samples/minatar_breakout_ppo.pt2", "ale": "samples/ale_breakout_ppo.pt2"}
VARIANTS = {"without saliency": [], "attention (gradient)": ["--saliency", "gradient"]}


def run_once(sample: str, episodes: int, extra: list, out: Path) -> float:
    cmd = [sys.executable, "-m", "rlviz", "render", sample, "--episodes", str(episodes), "--heatmap", "--videos",
           "none", "--no-progress", "--out", str(out), "--overwrite", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def bench(name: str, episodes: int, reps: int) -> None:
    times: dict = {v: [] for v in VARIANTS}
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(reps):
            row = {v: run_once(SAMPLES[name], episodes, extra, Path(tmp) / f"{name}-{i}")
                   for i, (v, extra) in enumerate(VARIANTS.items())}
            for v, s in row.items():
                times[v].append(s)
            base, att = row.values()
            ratios.append(att / base)
            print(f"  {name} rep {rep + 1}: " + ", ".join(f"{v} {s:.1f} s" for v, s in row.items())
                  + f", ratio {att / base:.2f}x (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"{name}, {episodes} episodes:")
    for v, ts in times.items():
        print(f"  {v:<22} min {min(ts):.1f} s, median {statistics.median(ts):.1f} s")
    print(f"  ratio                  min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=tuple(SAMPLES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--minatar-episodes", type=int, default=1000)
    ap.add_argument("--ale-episodes", type=int, default=100)
    args = ap.parse_args()
    for name in (args.only,) if args.only else tuple(SAMPLES):
        bench(name, args.minatar_episodes if name == "minatar" else args.ale_episodes, args.reps)


if __name__ == "__main__":
    main()
