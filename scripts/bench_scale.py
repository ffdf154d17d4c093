"""Scale-out benchmark: whole ``rlviz render`` runs (fresh processes: imports, agent loading and env building
included) at 1 and N workers, and Ray (a local instance with N CPUs) against ``--workers N``.

    python scripts/bench_scale.py                          # MinAtar 1000 episodes, ALE 100, workers 1 and 2, Ray
    python scripts/bench_scale.py --workers 1 2 4 8 16     # the curve, on a machine with the cores
    python scripts/bench_scale.py --minatar-episodes 200 --ale-episodes 16 --no-ray --reps 3   # quick
    python scripts/bench_scale.py --no-ray --reps 2 --baseline /path/to/main   # the same runs of another checkout

Each repetition runs every configuration once, interleaved (a shared machine: read the load printed beside
each figure, and the ceiling: the speed-up N processes of pure Python get on the machine at that moment, measured
in every repetition); with ``--reps`` > 1 the speed-ups are the min and median of the per-repetition ratios. Beside
each run: its CPU seconds (the driver and its workers: what a run costs, much less sensitive to the load than wall
time), the rollout phase's wall time (summary.json's ``wall_s``: the workers' part) and the rest (start-up:
imports, loading the agent; the end: heatmap, report). The outputs of every run of a game are checked to be
identical (episodes.csv), so the speed-up never trades away the result.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def render(tree: Path, checkpoint: str, episodes: int, out: Path, *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of it and its workers) of one ``rlviz render`` of ``tree``'s rlviz in a fresh
    process."""
    cmd = [sys.executable, "-m", "rlviz", "render", checkpoint, "--episodes", str(episodes), "--heatmap",
           "--videos", "none", "--no-progress", "--overwrite", "--out", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (workers are waited for by the driver: counted too)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _spin(_=None) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.perf_counter() - t0


def ceiling(n: int) -> float:
    """The speed-up n processes of pure Python get on this machine now (the most --workers n can give)."""
    one = _spin()
    with multiprocessing.get_context("fork").Pool(n) as pool:
        t0 = time.perf_counter()
        pool.map(_spin, range(n))
        many = time.perf_counter() - t0
    return n * one / many


def configurations(workers: list[int], ray: bool) -> list[tuple[str, tuple]]:
    runs = [(f"--workers {n}", ("--workers", str(n))) for n in workers]
    if ray:
        n = max(workers)
        runs.append((f"--ray --workers {n}", ("--ray", "--workers", str(n))))
    return runs


def scaling(name: str, checkpoint: str, episodes: int, args, tmp: Path) -> None:
    configs, n = configurations(args.workers, not args.no_ray), max(args.workers)
    trees = {"": ROOT} if args.baseline is None else {"baseline ": args.baseline.resolve(), "": ROOT}
    print(f"\n{name}: {episodes} episodes of {checkpoint}, {args.reps} interleaved repetition(s) "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    walls: dict[str, list[float]] = {t + label: [] for t in trees for label, _ in configs}
    csvs: dict[str, bytes] = {}
    ceilings = []
    for rep in range(args.reps):
        for label, extra in configs:
            for t, tree in list(trees.items())[:: 1 if rep % 2 == 0 else -1]:  # neither tree always goes first
                out = tmp / f"{name}-{t.strip()}{label.replace(' ', '').replace('-', '')}"
                wall, cpu = render(tree, checkpoint, episodes, out, *extra)
                walls[t + label].append(wall)
                csvs[t + label] = (out / "episodes.csv").read_bytes()
                rollout_s = json.loads((out / "summary.json").read_text())["wall_s"]
                print(f"  rep {rep + 1}  {t + label:<31} {wall:6.1f} s wall, {cpu:6.1f} s CPU; rollouts "
                      f"{rollout_s:5.1f} s, the rest {wall - rollout_s:5.1f} s  (load {os.getloadavg()[0]:.1f})",
                      flush=True)
        ceilings.append(ceiling(n))

    def ratios(a: str, b: str) -> str:  # per-repetition wall(a) / wall(b): min and median
        r = [x / y for x, y in zip(walls[a], walls[b])]
        return f"{min(r):.2f}x / {statistics.median(r):.2f}x"

    print(f"  speed-up against --workers {args.workers[0]}, min / median (the machine's ceiling, measured after "
          f"each repetition: {' '.join(f'{c:.2f}x' for c in ceilings)} for {n} processes of pure Python):")
    for t in trees:
        for label, _ in configs[1:]:
            print(f"    {t + label:<31} {ratios(t + configs[0][0], t + label)}")
        if not args.no_ray:
            print(f"    {t}Ray / --workers {n} wall time, min / median: {ratios(t + configs[-1][0], f'{t}--workers {n}')}")
    if args.baseline is not None:
        print("  this tree's wall time / the baseline's, min / median: " +
              ", ".join(f"{label} {ratios(label, 'baseline ' + label)}" for label, _ in configs))
    base = next(iter(csvs))
    same = {label: csv == csvs[base] for label, csv in csvs.items()}
    print(f"  episodes.csv identical to {base}'s: " + ", ".join(f"{k}: {v}" for k, v in same.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minatar", default=str(ROOT / "samples/minatar_breakout_ppo.pt2"))
    ap.add_argument("--ale", default=str(ROOT / "samples/ale_breakout_ppo.pt2"))
    ap.add_argument("--minatar-episodes", type=int, default=1000)
    ap.add_argument("--ale-episodes", type=int, default=100)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--no-ale", action="store_true")
    ap.add_argument("--baseline", type=Path, help="another checkout's root: its rlviz runs the same, interleaved")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-scale-") as d:
        tmp = Path(d)
        scaling("minatar", args.minatar, args.minatar_episodes, args, tmp)
        if not args.no_ale:
            scaling("ale", args.ale, args.ale_episodes, args, tmp)


if __name__ == "__main__":
    main()
