#!/usr/bin/env python
"""Benchmark: ``rlviz compare A B`` over N episodes against one ``rlviz render`` of N episodes.

    python scripts/bench_compare.py                          # 200 episodes, 3 repeats, videos first:1
    python scripts/bench_compare.py --episodes 1000 --heatmap --repeats 2

The shipped MinAtar agents (healthy as A and as the render's agent, no-entropy twin as B), the same flags for
both jobs, run interleaved (render, compare, compare, render, ...) in one process so that load drifts hit both;
wall clock of the whole library call (loading, rollouts, outputs, videos). Prints min and median seconds of each
and their ratios, after one untimed 2-episode warm-up run of each. Target: compare within 2.1x render (it plays twice the episodes, so 2x is the floor).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlviz import CompareConfig, RenderConfig, compare, render  # noqa: E402

A = ROOT / "samples" / "minatar_breakout_ppo.pt2"
B = ROOT / "samples" / "minatar_breakout_ppo_noent.pt2"


def timed(job, config) -> float:
    t = time.perf_counter()
    job(config)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--videos", default="first:1")
    ap.add_argument("--heatmap", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    flags = dict(episodes=args.episodes, videos=args.videos, heatmap=args.heatmap, seed=0, progress=False, overwrite=True)
    jobs = {
        "render": (render, RenderConfig(checkpoint=A, out=work / "render", **flags)),
        "compare": (compare, CompareConfig(a=A, b=B, out=work / "compare", **flags)),
    }
    times: dict[str, list[float]] = {name: [] for name in jobs}
    try:
        for job, config in jobs.values():  # warm-up, not timed: imports, torch init, first-call costs
            job(replace(config, episodes=2, out=work / "warmup"))
        for r in range(args.repeats):
            for name in (("render", "compare") if r % 2 == 0 else ("compare", "render")):
                job, config = jobs[name]
                times[name].append(timed(job, config))
                print(f"repeat {r}: {name:<8} {times[name][-1]:7.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.episodes} episodes, videos {args.videos!r}, heatmap {args.heatmap}, {args.repeats} repeats")
    for name, ts in times.items():
        print(f"{name:<8} min {min(ts):7.1f} s   median {statistics.median(ts):7.1f} s")
    print(f"compare / render: min {min(times['compare']) / min(times['render']):.2f}x   "
          f"median {statistics.median(times['compare']) / statistics.median(times['render']):.2f}x   (target <= 2.1x)")


if __name__ == "__main__":
    main()
