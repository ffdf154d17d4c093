"""Start-up benchmark: the fixed cost of a short ``rlviz render``, phase by phase, in fresh processes.

    python scripts/bench_startup.py                                # this tree alone, 5 repetitions
    python scripts/bench_startup.py --baseline /path/to/other/tree # against another checkout, interleaved
    python scripts/bench_startup.py --samples minatar --reps 9 --no-command
    python scripts/bench_startup.py --fixed --baseline /path/to/0.3.0 --reps 7   # the fixed cost only (below)

Phases (one fresh interpreter per repetition, run in this order, each timed on its own):

    interpreter        launch to the first line of the child (the interpreter and site-packages' .pth files)
    import rlviz.cli   what ``rlviz`` imports before parsing flags
    import torch       torch itself
    agent load         ``rlviz.sources.checkpoint.load_checkpoint(sample)`` (torch.export, the env's registration)
    env build (16)     ``make_env(recipe)`` 16 times, as a rollout builds them
    first forward      one ``policy.evaluate`` of the 16 reset observations
    pool start (2)     a ``WorkerPool(2)`` (as ``--workers 2`` starts it) running two empty tasks, then closed

Every tree's modules are compiled first, as an install has them (scripts/compiled.py).

``--fixed``: the fixed cost of a short job: ``rlviz render SAMPLE --episodes 1 --num-envs 1 --videos none`` (the
report included) minus ``python -c "import gc; gc.disable(); import torch, gymnasium"`` (the collector off, as the
``rlviz`` command starts), both timed from outside in the same repetition, one
fresh process each, every tree interleaved (their order alternating); min and median over the repetitions.

Otherwise, the whole command, ``rlviz render SAMPLE --episodes 16 --videos none --no-progress`` (and with ``--workers
2``), timed from outside. Every tree and sample runs once per repetition, interleaved (a shared machine: the load
is printed beside each repetition); figures are the min and median over repetitions, ratios the min and median of
the per-repetition ratios against the baseline.
"""

from __future__ import annotations

import argparse
import json
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

from compiled import compile_trees  # noqa: E402

SAMPLES = {"minatar": "samples/minatar_breakout_ppo.pt2", "ale": "samples/ale_breakout_ppo.pt2"}
#: ``--fixed``'s reference: what every job imports, with the collector off as ``python -m rlviz`` has it.
REFERENCE = "import gc; gc.disable(); import torch, gymnasium"
COMMAND = ("whole render", "whole render --workers 2")

#: The child: every phase in order, its seconds as JSON on the last line of stdout (the same code for every tree:
#: it uses only long-standing rlviz names).
CHILD = r"""
import json, sys, time
first = time.time()
marks, t = {}, time.perf_counter()
def mark(name):
    global t
    now = time.perf_counter()
    marks[name], t = now - t, now
import rlviz.cli
mark("import rlviz.cli")
import torch
mark("import torch")
from rlviz.sources.checkpoint import load_checkpoint
agent = load_checkpoint(sys.argv[1])
mark("agent load")
import numpy as np
from rlviz.envs import make_env
envs = [make_env(agent.recipe, render_mode="rgb_array") for _ in range(16)]
mark("env build (16)")
obs = np.stack([np.asarray(e.reset(seed=i)[0]) for i, e in enumerate(envs)])
t = time.perf_counter()  # (the resets are not a start-up cost)
agent.policy.evaluate(obs)
mark("first forward")
from rlviz.evaluate.backends.workers import WorkerPool
def nothing(task, progress):
    return task
with WorkerPool(2, start="fork") as pool:
    pool.map(nothing, [0, 1])
mark("pool start (2)")
for e in envs:
    e.close()
print(json.dumps({"first": first, "marks": marks}))
"""


def _env(tree: Path) -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))


def phases(tree: Path, sample: str) -> dict:
    """Seconds of each phase in one fresh process running ``tree``'s rlviz."""
    launch = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / sample)], env=_env(tree), capture_output=True,
                          text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"the phase child failed on {tree}: {done.stderr.strip()[-800:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"interpreter": out["first"] - launch, **out["marks"]}


def command(tree: Path, sample: str, out: Path, *extra: str) -> float:
    """Wall seconds of one whole ``rlviz render`` of 16 episodes in a fresh process."""
    cmd = [sys.executable, "-m", "rlviz", "render", str(ROOT / sample), "--episodes", "16", "--videos", "none",
           "--no-progress", "--overwrite", "--out", str(out), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed on {tree}: {done.stderr.strip()[-800:]}")
    return wall


def wall(cmd: list, env: dict, cwd: Path, cpu: list | None = None) -> float:
    """Seconds ``cmd`` took; its CPU seconds (user + system) appended to ``cpu`` when given."""
    t0, c0 = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {done.stderr.strip()[-800:]}")
    if cpu is not None:
        cpu.append(_children_cpu() - c0)
    return time.perf_counter() - t0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fixed_costs(trees: dict, sample: str, reps: int, tmp: Path) -> None:
    """Print each tree's fixed cost (a one-episode render minus importing torch and gymnasium), min / median."""
    costs: dict = {label: [] for label in trees}
    cpus: dict = {label: [] for label in trees}
    jobs: dict = {label: [] for label in trees}  # the whole command, wall and CPU, per repetition
    job_cpus: dict = {label: [] for label in trees}
    for rep in range(reps):
        base: list = []
        # as ``rlviz`` imports them: with the cyclic collector off (rlviz.gc_pause, in 0.4.0 too); with it on, the
        # reference pays full collections the job does not, and a fixed cost could come out below zero
        imports = wall([sys.executable, "-c", REFERENCE], dict(os.environ), ROOT, base)
        line = []
        for label, tree in list(trees.items())[:: 1 if rep % 2 == 0 else -1]:
            cmd = [sys.executable, "-m", "rlviz", "render", str(ROOT / SAMPLES[sample]), "--episodes", "1",
                   "--num-envs", "1", "--videos", "none", "--no-progress", "--overwrite", "--out", str(tmp / label)]
            cpu: list = []
            job = wall(cmd, _env(tree), tree, cpu)
            costs[label].append(job - imports)
            cpus[label].append(cpu[0] - base[0])
            jobs[label].append(job)
            job_cpus[label].append(cpu[0])
            line.append(f"{label} {job:.2f}s (cpu {cpu[0]:.2f}s)")
        print(f"  rep {rep + 1}: load {os.getloadavg()[0]:.1f}; import torch, gymnasium {imports:.2f}s (cpu "
              f"{base[0]:.2f}s); " + ", ".join(line), flush=True)
    for what, table in (("seconds", costs), ("CPU seconds (user + system)", cpus)):
        print(f"\nfixed cost beyond `import torch, gymnasium` ({sample}, 1 episode, --videos none), {what}, min / "
              f"median of {reps}:")
        for label, xs in table.items():
            print(f"  {label:<12} {min(xs):6.2f} / {statistics.median(xs):6.2f} s")
        labels = list(trees)
        if len(labels) > 1:
            r = [b / a for a, b in zip(table[labels[0]], table[labels[-1]]) if a > 0]
            print(f"  ratio {labels[-1]} / {labels[0]}: {min(r):.2f}x / {statistics.median(r):.2f}x (min / median)")
    labels = list(trees)
    if len(labels) > 1:  # the fixed cost is a small difference of two noisy times: the whole job's ratio is steadier
        for what, table in (("seconds", jobs), ("CPU seconds", job_cpus)):
            r = [b / a for a, b in zip(table[labels[0]], table[labels[-1]])]
            print(f"whole command, {what}: {labels[-1]} / {labels[0]} per repetition {min(r):.2f}x min, "
                  f"{statistics.median(r):.2f}x median; fastest {min(table[labels[-1]]):.2f} s against "
                  f"{min(table[labels[0]]):.2f} s")


def one_repetition(trees: dict, samples: list, run_command: bool, tmp: Path, rep: int) -> dict:
    """{(tree label, sample): {phase: seconds}} of one interleaved repetition (the trees' order alternates with
    ``rep``: neither always runs on the other's warm file cache)."""
    got, order = {}, list(trees.items())[:: 1 if rep % 2 == 0 else -1]
    for sample in samples:
        for label, tree in order:
            got[label, sample] = phases(tree, SAMPLES[sample])
        if run_command:
            for name, extra in zip(COMMAND, ((), ("--workers", "2"))):
                for label, tree in order:
                    got[label, sample][name] = command(tree, SAMPLES[sample], tmp / f"{label}-{sample}", *extra)
    return got


def report(runs: list, trees: dict, samples: list) -> None:
    labels = list(trees)
    base = labels[0] if len(labels) > 1 else None
    for sample in samples:
        print(f"\n{sample} ({SAMPLES[sample]}): seconds, min / median of {len(runs)} repetition(s)")
        head = "".join(f"{label:>20}" for label in labels)
        print(f"  {'phase':<26}{head}" + (f"{'ratio (min / median)':>24}" if base else ""))
        names = list(runs[0][labels[0], sample])
        totals = {label: [0.0] * len(runs) for label in labels}
        for name in names + ["sum of phases"]:
            cells, series = "", {}
            for label in labels:
                if name == "sum of phases":
                    xs = totals[label]
                else:
                    xs = [r[label, sample][name] for r in runs]
                    if not name.startswith("whole"):
                        totals[label] = [a + b for a, b in zip(totals[label], xs)]
                series[label] = xs
                cells += f"{min(xs):9.2f} / {statistics.median(xs):6.2f}  "
            line = f"  {name:<26}{cells}"
            if base:
                r = [b / a for a, b in zip(series[base], series[labels[-1]]) if a > 0]
                line += f"    {min(r):5.2f}x / {statistics.median(r):5.2f}x"
            print(line)
    if base:
        print(f"\n(ratio: {labels[-1]} / {base} per repetition; below 1 is faster)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="another checkout's root (its rlviz/ is imported) to compare with")
    ap.add_argument("--samples", nargs="+", choices=sorted(SAMPLES), default=["minatar", "ale"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-command", action="store_true", help="the phases only, not the whole command")
    ap.add_argument("--fixed", action="store_true", help="only the fixed cost beyond importing torch and gymnasium")
    args = ap.parse_args()
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), "this tree": ROOT}
    print(f"{os.cpu_count()} CPUs; trees: " + ", ".join(f"{k}: {v}" for k, v in trees.items()), flush=True)
    compile_trees(*(t / "rlviz" for t in trees.values()))  # timed as installed: modules compiled (scripts/compiled.py)
    if args.fixed:
        with tempfile.TemporaryDirectory(prefix="rlviz-bench-startup-") as d:
            fixed_costs(trees, args.samples[0], args.reps, Path(d))
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-startup-") as d:
        for rep in range(args.reps):
            runs.append(one_repetition(trees, args.samples, not args.no_command, Path(d), rep))
            whole = {k: round(v.get(COMMAND[0], sum(v.values())), 1) for k, v in runs[-1].items()}
            print(f"  rep {rep + 1}: load {os.getloadavg()[0]:.1f}; " +
                  ", ".join(f"{t}/{s} {w}s" for (t, s), w in whole.items()), flush=True)
    report(runs, trees, args.samples)


if __name__ == "__main__":
    main()
