"""Scale-out benchmark: whole ``rlviz render`` runs (fresh processes: imports, agent loading and env building
included) at 1 and N workers, and Ray (a local instance with N CPUs) against ``--workers N``.

    python scripts/bench_scale.py                          # MinAtar 1000 episodes, ALE 100, workers 1 and 2, Ray
    python scripts/bench_scale.py --workers 1 2 4 8 16     # the curve, on a machine with the cores
    python scripts/bench_scale.py --minatar-episodes 200 --ale-episodes 16 --no-ray --reps 3   # quick
    python scripts/bench_scale.py --no-ray --reps 2 --baseline /path/to/main   # the same runs of another checkout

Each repetition runs every configuration once, interleaved (a shared machine: read the load printed beside
each figure, and the ceiling: the speed-up N processes of pure Python get on the machine at that moment, measured
in every repetition); with ``--reps`` > 1 the speed-ups are the min and median of the per-repetition ratios. Beside
each run: its CPU seconds (the driver and its workers: what a run costs) and its critical path in CPU seconds (the
driver's before the rollouts: imports, loading the agent; the busiest worker's shards; the driver's after them:
heatmap, report), which is its wall time on idle cores from the interpreter's first line on: the speed-ups from it
are estimates that the machine's load barely moves (not for Ray, whose workers are not timed). The outputs of every
run of a game are checked to be identical (episodes.csv), so the speed-up never trades away the result.
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


#: The child: ``rlviz.cli.main`` with the rollout phase timed in CPU seconds, per process (``python -c TIMED LOG
#: render ...``). Forked workers inherit the wrapped shard function; each appends its shards' times to LOG.shards.
TIMED = r"""
import json, os, sys, time
cpu0, path = time.process_time(), sys.argv[1]
import rlviz.evaluate.backends.workers as workers
import rlviz.jobs.render
from rlviz.cli import main
job = sys.modules["rlviz.jobs.render"]  # (the package's attribute "render" is the function)
log = {}
def timed(fn, key):
    def wrapper(*args, **kwargs):
        c = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            log.setdefault(key, [c, time.process_time()])  # (the first call: the rollouts, not the videos)
    return wrapper
def shard(task, progress=None, _run=job.run_shard):
    c = time.process_time()
    out = _run(task, progress)
    with open(path + ".shards", "a") as f:
        f.write(json.dumps([os.getpid(), time.process_time() - c]) + "\n")
    return out
job.run_shard, job.rollout = shard, timed(job.rollout, "phase")
workers.WorkerPool.map = timed(workers.WorkerPool.map, "phase")
code = main(sys.argv[2:])
log["cpu"] = [cpu0, time.process_time()]
json.dump(log, open(path, "w"))
sys.exit(code)
"""


def render(tree: Path, checkpoint: str, episodes: int, out: Path, *extra: str) -> dict:
    """One ``rlviz render`` of ``tree``'s rlviz in a fresh process: {wall, cpu (it and its workers), path: the CPU
    seconds on its critical path (before the rollouts + the busiest worker's + after them: its wall time on idle
    cores), workers: each worker's CPU seconds}."""
    log = out.with_suffix(".timing.json")
    Path(f"{log}.shards").unlink(missing_ok=True)
    cmd = [sys.executable, "-c", TIMED, str(log), "render", checkpoint, "--episodes", str(episodes), "--heatmap",
           "--videos", "none", "--no-progress", "--overwrite", "--out", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (workers are waited for by the driver: counted too)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    t = json.loads(log.read_text())
    (c0, c1), (p0, p1) = t["cpu"], t.get("phase", (float("nan"), float("nan")))  # (nan: Ray)
    per_worker: dict[int, float] = {}
    for line in Path(f"{log}.shards").read_text().splitlines() if Path(f"{log}.shards").exists() else ():
        pid, cpu = json.loads(line)
        per_worker[pid] = per_worker.get(pid, 0.0) + cpu
    busiest = max(per_worker.values()) if per_worker else p1 - p0  # (one process: the rollout itself)
    return {"wall": wall, "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "path": (p0 - c0) + busiest + (c1 - p1), "before": p0 - c0, "after": c1 - p1,
            "workers": sorted(per_worker.values()) or [p1 - p0]}


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
    paths: dict[str, list[float]] = {t + label: [] for t in trees for label, _ in configs}
    csvs: dict[str, bytes] = {}
    ceilings = []
    for rep in range(args.reps):
        for label, extra in configs:
            for t, tree in list(trees.items())[:: 1 if rep % 2 == 0 else -1]:  # neither tree always goes first
                out = tmp / f"{name}-{t.strip()}{label.replace(' ', '').replace('-', '')}"
                r = render(tree, checkpoint, episodes, out, *extra)
                walls[t + label].append(r["wall"])
                paths[t + label].append(r["path"])
                csvs[t + label] = (out / "episodes.csv").read_bytes()
                print(f"  rep {rep + 1}  {t + label:<31} {r['wall']:6.1f} s wall, {r['cpu']:5.1f} s CPU; critical "
                      f"path {r['path']:5.1f} s CPU = {r['before']:4.1f} + rollouts "
                      f"[{' '.join(f'{w:.1f}' for w in r['workers'])}] + {r['after']:4.1f}  "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
        ceilings.append(ceiling(n))

    def ratios(a: str, b: str, of: dict = walls) -> str:  # per-repetition wall(a) / wall(b): min and median
        r = [x / y for x, y in zip(of[a], of[b])]
        return f"{min(r):.2f}x / {statistics.median(r):.2f}x"

    print(f"  speed-up against --workers {args.workers[0]}, min / median (the machine's ceiling, measured after "
          f"each repetition: {' '.join(f'{c:.2f}x' for c in ceilings)} for {n} processes of pure Python):")
    for t in trees:
        for label, _ in configs[1:]:
            print(f"    {t + label:<31} {ratios(t + configs[0][0], t + label)}   on idle cores (critical-path CPU "
                  f"seconds): {ratios(t + configs[0][0], t + label, paths)}")
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
