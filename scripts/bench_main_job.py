"""Benchmark: the README's main job on this tree against the last release (0.4.0), whole processes, interleaved.

    python scripts/bench_main_job.py                          # 3 repetitions, 0.4.0 unpacked from git (check_identity.BASELINE_REV)
    python scripts/bench_main_job.py --reps 5 --baseline DIR  # against another checkout
    python scripts/bench_main_job.py --episodes 200           # a shorter job

The job: ``rlviz render samples/minatar_breakout_ppo.pt2 --episodes 1000 --heatmap --videos first:1,worst:1
--saliency gradient`` (attention on, as --saliency with --heatmap turns it on), each run a fresh ``python -m rlviz``
process (start-up included), the two trees in turn with their order alternating per repetition, so drifts in the
machine's load hit both, each tree's modules compiled first as an install has them (scripts/compiled.py). Printed: each tree's min and median seconds and the per-repetition ratio baseline / this
tree (above 1: this tree is faster), min and median. Target (issue 33): at least 1.3x.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from check_identity import BASELINE_REV, baseline_tree  # noqa: E402
from compiled import compile_trees  # noqa: E402


def run(tree: Path, out: Path, episodes: int) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "rlviz", "render", "samples/minatar_breakout_ppo.pt2", "--episodes", str(episodes),
           "--heatmap", "--videos", "first:1,worst:1", "--saliency", "gradient", "--out", str(out), "--overwrite",
           "--no-progress"]
    t0, c0 = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed on {tree}: {done.stderr[-1500:]}")
    return wall, cpu


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes so far (a second figure on a loaded machine)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="the baseline checkout (default: release 0.4.0 unpacked from git)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-main-") as d:
        tmp = Path(d)
        base = args.baseline.resolve() if args.baseline else baseline_tree(BASELINE_REV, tmp / "baseline")
        trees = {"0.4.0" if not args.baseline else "baseline": base, "this tree": ROOT}
        compile_trees(*(t / "rlviz" for t in trees.values()))  # timed as installed: modules compiled
        times: dict = {k: [] for k in trees}
        cpus: dict = {k: [] for k in trees}
        for rep in range(args.reps):
            order = list(trees.items())[:: 1 if rep % 2 == 0 else -1]
            for label, tree in order:
                wall, cpu = run(tree, tmp / f"out-{label.replace(' ', '-')}", args.episodes)
                times[label].append(wall)
                cpus[label].append(cpu)
            print(f"  rep {rep + 1}: load {os.getloadavg()[0]:.1f}; "
                  + ", ".join(f"{k} {v[-1]:.1f}s (cpu {cpus[k][-1]:.1f}s)" for k, v in times.items()), flush=True)
    for what, table in (("seconds", times), ("CPU seconds (user + system)", cpus)):
        print(f"\nmain job ({args.episodes} episodes), {what}, min / median of {args.reps}:")
        for label, xs in table.items():
            print(f"  {label:<10} {min(xs):7.1f} / {statistics.median(xs):7.1f}")
        a, b = table.values()
        r = [x / y for x, y in zip(a, b)]
        print(f"  speed-up (baseline / this tree): {min(r):.2f}x / {statistics.median(r):.2f}x (min / median)")


if __name__ == "__main__":
    main()
