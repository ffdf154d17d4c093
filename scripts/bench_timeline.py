#!/usr/bin/env python
"""Benchmark: ``rlviz timeline`` of K checkpoints x N episodes against K separate ``rlviz render`` runs, and at
``--workers 2`` against one process.

    python scripts/bench_timeline.py                      # samples/runs/minatar_ppo, 10 checkpoints x 200 episodes
    python scripts/bench_timeline.py --run DIR --checkpoints 10 --episodes 200 --repeats 3
    python scripts/bench_timeline.py --no-renders --repeats 7   # only the --workers 2 speed-up and the ceiling

Every job is a fresh ``python -m rlviz`` process (what a user runs: the start-up, imports and torch init, is part of
it; the timeline pays it once, the K renders K times), with ``--videos none`` (no video either side; both write
their statistics and report.html). The three jobs run interleaved in each repetition (renders, timeline,
timeline --workers 2), so that load drifts hit all of them; min and median over the repetitions are printed, and
for the speed-up also each repetition's own ratio (the one and two-worker runs a few seconds apart: on a shared
machine whose speed drifts, the steadier figure).

Targets: the timeline at most 0.7x the K renders' total; ``--workers 2`` at least 1.6x faster than one process. The
machine's own two-process ceiling is printed beside it: one ``rlviz render`` of ``2N`` episodes alone, against two
of them at once (2 x alone / both at once: 2.0 on two idle cores, less when the cores are shared or throttled).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlviz.sources.run_folders import discover  # noqa: E402

DEFAULT_RUN = ROOT / "samples" / "runs" / "minatar_ppo"


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlviz", *args, "--videos", "none", "--no-progress"]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _run(cmd: list[str]) -> None:
    out = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")


def timed(cmds: list[list[str]], parallel: bool = False) -> float:
    """Seconds to run ``cmds`` one after the other (or all at once with ``parallel``)."""
    t = time.perf_counter()
    if parallel:
        procs = [subprocess.Popen(c, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for c in cmds]
        for p, c in zip(procs, cmds):
            if p.wait() != 0:
                raise SystemExit(f"{' '.join(c)} failed: {p.stderr.read()[-2000:]}")
    else:
        for c in cmds:
            _run(c)
    return time.perf_counter() - t


def pick(run: Path, k: int, folder: Path) -> list[Path]:
    """``k`` checkpoints of ``run`` spread over its steps, linked into ``folder``."""
    found, _ = discover(run)
    if len(found) < k:
        raise SystemExit(f"{run} has {len(found)} checkpoints; --checkpoints {k} needs at least that many.")
    chosen = [found[round(i * (len(found) - 1) / max(1, k - 1))] for i in range(k)]
    folder.mkdir(parents=True)
    for cp in chosen:
        os.symlink(cp.path, folder / cp.path.name)
    return [folder / cp.path.name for cp in chosen]


def _stats(xs: list[float]) -> str:
    return f"min {min(xs):7.2f} s  median {statistics.median(xs):7.2f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=DEFAULT_RUN, help="a run folder of checkpoints (default %(default)s)")
    ap.add_argument("--checkpoints", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-renders", action="store_true",
                    help="skip the K separate renders (only the --workers 2 speed-up and the ceiling)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_timeline_"))
    try:
        files = pick(args.run, args.checkpoints, work / "run")
        n = str(args.episodes)
        renders = [_cmd("render", str(f), "--episodes", n, "--out", str(work / f"r{i}"), "--overwrite")
                   for i, f in enumerate(files)]
        one = _cmd("timeline", str(work / "run"), "--episodes", n, "--out", str(work / "t1"), "--overwrite")
        two = _cmd("timeline", str(work / "run"), "--episodes", n, "--out", str(work / "t2"), "--overwrite",
                   "--workers", "2")
        solo = [_cmd("render", str(files[-1]), "--episodes", str(2 * args.episodes), "--out", str(work / f"c{i}"),
                     "--overwrite") for i in range(2)]
        times: dict[str, list[float]] = {k: [] for k in ("renders", "timeline", "timeline_w2", "alone", "pair")}
        timed([_cmd("render", str(files[0]), "--episodes", "2", "--out", str(work / "warm"), "--overwrite")])
        for r in range(args.repeats):
            if not args.no_renders:
                times["renders"].append(timed(renders))
            times["timeline"].append(timed([one]))
            times["timeline_w2"].append(timed([two]))
            times["alone"].append(timed(solo[:1]))
            times["pair"].append(timed(solo, parallel=True))
            print(f"rep {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items() if v), flush=True)
        k = args.checkpoints
        print(f"\n{k} checkpoints x {args.episodes} episodes of {args.run} ({os.cpu_count()} CPUs), "
              f"{args.repeats} interleaved repetitions")
        for name, label in (("renders", f"{k} x rlviz render"), ("timeline", "rlviz timeline"),
                            ("timeline_w2", "rlviz timeline --workers 2")):
            if times[name]:
                print(f"  {label:<28}{_stats(times[name])}")
        med = {name: statistics.median(v) for name, v in times.items() if v}
        low = {name: min(v) for name, v in times.items() if v}
        ceiling = [2 * a / p for a, p in zip(times["alone"], times["pair"])]
        if times["renders"]:
            print(f"  timeline / renders: {low['timeline'] / low['renders']:.2f}x (min), "
                  f"{med['timeline'] / med['renders']:.2f}x (median)   target <= 0.70x")
        pairs = [a / b for a, b in zip(times["timeline"], times["timeline_w2"])]  # each repetition's own ratio
        print(f"  --workers 2 speed-up: {low['timeline'] / low['timeline_w2']:.2f}x (min / min), "
              f"{med['timeline'] / med['timeline_w2']:.2f}x (median / median); repetition by repetition "
              f"{min(pairs):.2f}x (lowest), {statistics.median(pairs):.2f}x (median)   target >= 1.6x; this machine's "
              f"two-process ceiling {max(ceiling):.2f}x (best), {statistics.median(ceiling):.2f}x (median)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
