#!/usr/bin/env python
"""Benchmark: ``rlviz compare A B --disagreements K`` against the same compare without it.

    python scripts/bench_disagreements.py                          # 200 episodes, K = 10, 3 repeats
    python scripts/bench_disagreements.py --episodes 50 --repeats 1 --horizon 100

The shipped MinAtar agents (healthy A, no-entropy B), the same flags for both jobs (videos first:1, the
disagreements' branch videos on), run interleaved (plain, with, with, plain, ...) in one process so that load drifts
hit both; wall clock of the whole library call. Prints each repeat's ratio (with / without, the two runs of one
repeat back to back) and the machine's load average, then min and median seconds of each and of the ratios, after
one untimed 2-episode warm-up of each; CPU seconds too (this process and its ffmpeg children: a loaded machine
moves them less than the wall clock). Target: with --disagreements 10, at most 1.6x.
"""

from __future__ import annotations

import argparse
import os
import resource
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

from rlviz import CompareConfig, compare  # noqa: E402

A = ROOT / "samples" / "minatar_breakout_ppo.pt2"
B = ROOT / "samples" / "minatar_breakout_ppo_noent.pt2"


def timed(config) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its ffmpeg children) of one compare."""
    t, c = time.perf_counter(), _cpu()
    compare(config)
    return time.perf_counter() - t, _cpu() - c


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--disagreements", type=int, default=10)
    ap.add_argument("--horizon", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--videos-for", type=int, default=None, help="--disagreement-videos (default: every state)")
    ap.add_argument("--videos", default="first:1")
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bench_disagreements_"))
    flags = dict(episodes=args.episodes, videos=args.videos, seed=0, progress=False, overwrite=True)
    jobs = {"plain": CompareConfig(a=A, b=B, out=work / "plain", **flags),
            "disagree": CompareConfig(a=A, b=B, out=work / "disagree", disagreements=args.disagreements,
                                      disagreement_horizon=args.horizon,
                                      disagreement_videos=args.videos_for, **flags)}
    times: dict[str, list[float]] = {name: [] for name in jobs}
    ratios: list[float] = []
    cpus: dict[str, list[float]] = {name: [] for name in jobs}
    try:
        for config in jobs.values():  # warm-up, not timed: imports, torch init, first-call costs
            compare(replace(config, episodes=2, out=work / "warmup"))
        for r in range(args.repeats):
            for name in (("plain", "disagree") if r % 2 == 0 else ("disagree", "plain")):
                wall, cpu = timed(jobs[name])
                times[name].append(wall)
                cpus[name].append(cpu)
                print(f"repeat {r}: {name:<9} {wall:7.1f} s   (CPU {cpu:5.1f} s)   load {_load()}", flush=True)
            ratios.append(times["disagree"][-1] / times["plain"][-1])
            print(f"repeat {r}: with / without {ratios[-1]:.2f}x", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.episodes} episodes, --disagreements {args.disagreements} (horizon {args.horizon}, branch videos "
          f"{'all' if args.videos_for is None else args.videos_for}), videos {args.videos!r}, {args.repeats} repeats")
    for name, ts in times.items():
        print(f"{name:<9} min {min(ts):7.1f} s   median {statistics.median(ts):7.1f} s   "
              f"(CPU median {statistics.median(cpus[name]):5.1f} s)")
    print(f"with / without, per repeat: min {min(ratios):.2f}x   median {statistics.median(ratios):.2f}x   "
          f"(of min times {min(times['disagree']) / min(times['plain']):.2f}x, of medians "
          f"{statistics.median(times['disagree']) / statistics.median(times['plain']):.2f}x; target <= 1.6x)   "
          f"load {_load()}")


def _load() -> str:
    """The machine's 1, 5 and 15 minute load averages (runnable processes; this machine's cores: os.cpu_count())."""
    return "/".join(f"{v:.1f}" for v in os.getloadavg()) + f" on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
