#!/usr/bin/env python
"""Benchmark: recording a PettingZoo game with every agent's panels (rlviz.record.agents.pettingzoo.RecordParallelEpisode
with annotations) against PettingZoo's own ``RecordVideoParallel`` (frames only, through moviepy), same episodes.

    python scripts/bench_multiagent_record.py --moviepy-path /tmp/moviepy_bench            # 3 repeats
    python scripts/bench_multiagent_record.py --moviepy-path DIR --episodes 2 --cycles 60 --pistons 4 --repeats 5
    python scripts/bench_multiagent_record.py --moviepy-path DIR --thread   # + ours drawing on its writer thread

moviepy must not be in rlviz's CI venv: install it elsewhere, e.g.
``pip install --target /tmp/moviepy_bench --no-deps moviepy proglog decorator python-dotenv`` (imageio and
imageio-ffmpeg, which moviepy also needs, are in the dev venv), and pass that folder: only PettingZoo's runs get it
on their ``PYTHONPATH``.

Each run is a fresh process (so peak memory is its own): pistonball_v6 with ``--pistons`` agents (parallel API,
``max_cycles=--cycles``), ``--episodes`` episodes from seed 0, the same seeded random actions; every episode recorded
(``episode_trigger=lambda e: True``). Ours annotates each piston's Gaussian (mean, std) and value before each step
(CleanRL-style: what a training loop has at hand), so every video has one panel column per agent and a ``.npz``.
"bare" runs the same loop without a recorder. rlviz's and moviepy's modules are compiled first (``compileall``: an
installed package has its .pyc files; a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile rlviz in every
run). Runs are interleaved (bare, theirs, ours, ours, theirs, bare, ...),
repeated; printed: min and median wall seconds (the process's own clock from the env's creation to ``close()``
returning, every video complete) and peak resident memory (the Python process's, plus ours' drawing process
(:mod:`rlviz.record.agents.draw_worker`, a Python child that draws and encodes the panel videos), and the largest ffmpeg
descendant's VmHWM, polled every 50 ms by this script's process through ``/proc/PID/task/*/children``: a thread
inside the measured process, as before, took its GIL ~3 ms in every 50 ms; ``getrusage``'s children figure cannot
serve, it counts the parent's pages a child had before its ``exec``), the CPU seconds of the process and its children
(user + system, the drawing process and every ffmpeg once waited for: a fair measure on a loaded
machine, where wall clocks are not), and the ratios ours / theirs. Targets: wall <= 1.0x, memory <= 1.2x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from compiled import compile_trees  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
kind, folder, episodes, cycles, pistons = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
column_width, max_columns = int(sys.argv[6]), int(sys.argv[7])
def cpu():  # CPU seconds of this process and of its children that ended (every ffmpeg, once its video is written)
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
t0, c0 = time.perf_counter(), cpu()
from pettingzoo.butterfly import pistonball_v6
env = pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=pistons, max_cycles=cycles)
if kind == "theirs":
    from pettingzoo.utils.wrappers import RecordVideoParallel
    env = RecordVideoParallel(env, folder, episode_trigger=lambda e: True)
elif kind in ("ours", "thread"):
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode
    options = None
    if column_width or max_columns or kind == "thread":  # another layout than the default; the drawing on a thread
        from rlviz.draw.panels_agents import AgentsLayout
        from rlviz.record.agents.video import AgentsOptions
        kw = {k: v for k, v in (("column_width", column_width), ("max_columns", max_columns)) if v}
        options = AgentsOptions(layout=AgentsLayout(**kw), process=kind == "ours")
    env = RecordParallelEpisode(env, folder, episode_trigger=lambda e: True, options=options)
rng = np.random.default_rng(0)
steps = 0
for ep in range(episodes):
    obs, _ = env.reset(seed=ep)
    while env.agents:
        mean = {a: rng.uniform(-1, 1, 1).astype(np.float32) for a in env.agents}
        if kind != "theirs" and kind != "bare":
            env.annotate(mean=mean, std={a: np.full(1, 0.3, np.float32) for a in env.agents},
                         value={a: float(m[0]) for a, m in mean.items()})
        env.step({a: np.clip(m + rng.normal(0, 0.3, 1).astype(np.float32), -1, 1) for a, m in mean.items()})
        steps += 1
env.close()
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "cpu": cpu() - c0, "steps": steps,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  }))
"""


def _descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, ... now (``/proc/PID/task/*/children``)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in open(f"/proc/{parent}/task/{task}/children").read().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def helper_peaks_kb(pid: int) -> tuple[int, int]:
    """The largest VmHWM among ``pid``'s ffmpeg descendants now, and that of the recorder's drawing process (ours;
    its ffmpeg is its child); 0 when none or gone."""
    peaks = {"ffmpeg": 0, "python": 0}
    for child in _descendants(pid):
        try:
            comm = open(f"/proc/{child}/comm").read()
            # (a child between fork and exec is a copy of its parent, named python, with its parent's pages: only a
            # process that is the drawing process by its command line counts as one)
            kind = "ffmpeg" if "ffmpeg" in comm else "python" if "draw_worker" in open(f"/proc/{child}/cmdline").read() else None
            if kind is None:
                continue
            for line in open(f"/proc/{child}/status"):
                if line.startswith("VmHWM:"):
                    peaks[kind] = max(peaks[kind], int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass
    return peaks["ffmpeg"], peaks["python"]


def run(kind: str, args: argparse.Namespace, work: Path) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=work))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    paths = [str(ROOT)] + ([args.moviepy_path] if kind == "theirs" else []) + [env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, str(folder), str(args.episodes), str(args.cycles),
                                 str(args.pistons), str(args.column_width), str(args.max_columns)], env=env,
                                stdout=out, stderr=err, text=True)
        ffmpeg_kb = worker_kb = 0
        while proc.poll() is None:
            f_kb, w_kb = helper_peaks_kb(proc.pid)
            ffmpeg_kb, worker_kb = max(ffmpeg_kb, f_kb), max(worker_kb, w_kb)
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["ffmpeg_mb"] = ffmpeg_kb / 1024
    result["worker_mb"] = worker_kb / 1024  # (ours: the drawing process; counted with the Python process)
    result["rss_mb"] += result["worker_mb"]
    videos = sorted(folder.glob("*.mp4"))
    if kind != "bare" and len(videos) != args.episodes:
        raise SystemExit(f"{kind}: {len(videos)} videos for {args.episodes} episodes")
    result["mb_on_disk"] = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moviepy-path", default=None, help="a folder holding moviepy (not in the venv)")
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=125, help="pistonball's max_cycles (its default, 125)")
    ap.add_argument("--pistons", type=int, default=4, help="agents (4 or more)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--column-width", type=int, default=0, help="ours: AgentsLayout(column_width=...) (0: default)")
    ap.add_argument("--max-columns", type=int, default=0, help="ours: AgentsLayout(max_columns=...) (0: default)")
    ap.add_argument("--thread", action="store_true",
                    help="also run ours with AgentsOptions(process=False): the drawing on the recorder's thread")
    args = ap.parse_args()
    probe = subprocess.run([sys.executable, "-c", "import moviepy"], capture_output=True, check=False,
                           env=dict(os.environ, PYTHONPATH=args.moviepy_path or ""))
    if probe.returncode != 0:
        raise SystemExit("PettingZoo's RecordVideoParallel needs moviepy: pass --moviepy-path DIR (see --help).")
    # both sides import compiled modules, as installed packages do (scripts/compiled.py)
    compile_trees(ROOT / "rlviz", *([Path(args.moviepy_path)] if args.moviepy_path else []))
    results: dict[str, list[dict]] = {"bare": [], "theirs": [], "ours": []}
    order = ["bare", "theirs", "ours", "ours", "theirs", "bare"]
    if args.thread:
        results["thread"] = []
        order = ["bare", "theirs", "ours", "thread", "thread", "ours", "theirs", "bare"]
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-ma-") as tmp:
        for r in range(args.repeats):
            for kind in order if r % 2 == 0 else order[::-1]:
                results[kind].append(run(kind, args, Path(tmp)))
                print(f"  repeat {r} {kind:6s} {results[kind][-1]}", flush=True)
    print(f"\npistonball_v6, {args.pistons} agents, {args.episodes} episodes (max_cycles {args.cycles}: "
          f"{results['bare'][-1]['steps']} steps in all), "
          f"{args.repeats * 2} runs each (interleaved)")
    summary = {}
    for kind, rows in results.items():
        walls = [x["wall"] for x in rows]
        rss = [x["rss_mb"] for x in rows]
        ff = [x["ffmpeg_mb"] for x in rows]
        cpus = [x["cpu"] for x in rows]
        summary[kind] = (min(walls), statistics.median(walls), max(rss), max(ff), min(cpus), statistics.median(cpus))
        print(f"{kind:6s} wall min {min(walls):7.2f} s  median {statistics.median(walls):7.2f} s   "
              f"cpu min {min(cpus):6.2f} s  median {statistics.median(cpus):6.2f} s   peak RSS python {max(rss):7.1f} MB  "
              f"ffmpeg {max(ff):6.1f} MB   files {rows[-1]['mb_on_disk']:.1f} MB")
    o, t = summary["ours"], summary["theirs"]
    print(f"\nours / theirs: wall min {o[0] / t[0]:.2f}x  median {o[1] / t[1]:.2f}x   "
          f"peak RSS python {o[2] / t[2]:.2f}x  python+ffmpeg {(o[2] + o[3]) / (t[2] + t[3]):.2f}x "
          "(targets: wall <= 1.0x, memory <= 1.2x)")
    pairs = [a["wall"] / b["wall"] for a, b in zip(results["ours"], results["theirs"])]  # runs of the same repeat
    print(f"ours / theirs, run by run (the same repeat, beside each other): wall min {min(pairs):.2f}x  "
          f"median {statistics.median(pairs):.2f}x  max {max(pairs):.2f}x")
    print(f"ours / theirs: CPU seconds (python + its ffmpeg processes) min {o[4] / t[4]:.2f}x  median {o[5] / t[5]:.2f}x "
          "(what a loaded machine measures fairly)")
    if args.thread:
        h = summary["thread"]
        print(f"ours (drawing process) / ours on a thread (process=False): wall min {o[0] / h[0]:.2f}x  median "
              f"{o[1] / h[1]:.2f}x   CPU median {o[5] / h[5]:.2f}x   memory {(o[2] + o[3]) / (h[2] + h[3]):.2f}x")
    print(f"recording overhead over the bare loop: ours {o[1] / summary['bare'][1]:.2f}x, theirs "
          f"{t[1] / summary['bare'][1]:.2f}x (median wall)")


if __name__ == "__main__":
    main()
