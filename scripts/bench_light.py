"""How light the recorder is in a training process: import cost, and how long ``step()`` takes with recording on.

    python scripts/bench_light.py                      # imports (9 fresh processes each) and steps (3 repeats)
    python scripts/bench_light.py --part imports --reps 15 --baseline /path/to/rlviz-0.3.0
    python scripts/bench_light.py --part steps --steps 3000 --repeats 5

imports: one fresh interpreter per measurement, the kinds interleaved (order alternating), ``--reps`` each:

    python            the interpreter alone (its peak memory is the floor of the others)
    gymnasium         ``import gymnasium``
    RecordVideo       ``from gymnasium.wrappers import RecordVideo``
    rlviz recorder    ``from rlviz import RecordEpisode`` (and ``RecordVectorEpisode`` when it exists)

(the trees' modules compiled first, as an install has them: scripts/compiled.py) each timed inside the child
around the import (wall: perf_counter; CPU: process_time, steadier on a loaded
machine), its peak RSS (``ru_maxrss``) and whether torch,
matplotlib, cv2 or imageio_ffmpeg were loaded; min and median. Target: rlviz recorder <= gymnasium + 0.15 s.

steps: CartPole-v1, seeded random actions, every episode recorded (``--trigger cubic``: RecordVideo's default
schedule, as a training loop records); the wall time of each ``env.step`` call (the
recorder's work included: grabbing the frame, piping it to ffmpeg, and at an episode's end finishing its video) for

    bare + render     ``env.step`` then ``env.render()`` (what any recorder must at least do)
    RecordVideo       gymnasium's (needs moviepy; skipped when it is missing)
    frames            ``RecordEpisode`` without a policy: frames piped to ffmpeg as they come
    annotated         ``RecordEpisode`` with ``annotate(logits=, value=)`` before each step: panels drawn when the
                      episode ends
    ... (in step)     the same with ``RecordOptions(background=False)``: encoding and drawing inside ``step()``

the repeats interleaved; per kind the median, 99th percentile and maximum step time (min / median over repeats)
and the whole loop's wall time. A long maximum is a stall: a step that waited for a video to be written.
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

HEAVY = ("torch", "matplotlib", "cv2", "imageio_ffmpeg")

IMPORTS = {
    "python": "pass",
    "gymnasium": "import gymnasium",
    "RecordVideo": "from gymnasium.wrappers import RecordVideo",
    "rlviz recorder": ("from rlviz import RecordEpisode\nimport importlib.util\n"
                       "if importlib.util.find_spec('rlviz.record.vector'):\n    from rlviz import RecordVectorEpisode"),
}

CHILD = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
{code}
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({{"s": dt, "cpu": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "loaded": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def child(code: str, tree: Path = ROOT) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", CHILD.format(code=code, heavy=HEAVY)], capture_output=True,
                         text=True, env=env, check=True, cwd=tempfile.gettempdir())  # not a tree: PYTHONPATH picks it
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_imports(reps: int, baseline: Path | None = None) -> None:
    kinds = list(IMPORTS) + (["rlviz recorder (baseline tree)"] if baseline else [])
    got: dict[str, list[dict]] = {k: [] for k in kinds}
    for rep in range(reps):
        for k in kinds if rep % 2 == 0 else kinds[::-1]:
            base = k.endswith("(baseline tree)")
            got[k].append(child(IMPORTS["rlviz recorder"], baseline) if base and baseline else child(IMPORTS[k]))
    print(f"imports, {reps} fresh processes each (wall and CPU seconds inside the child around the import; peak RSS "
          "of the whole process):")
    for k, rows in got.items():
        s, c, m = ([r[f] for r in rows] for f in ("s", "cpu", "rss_mb"))
        loaded = sorted(set().union(*(set(r["loaded"]) for r in rows)))
        print(f"  {k:30s} wall min {min(s):6.3f} median {statistics.median(s):6.3f}   CPU min {min(c):6.3f} "
              f"median {statistics.median(c):6.3f} s   peak RSS min {min(m):6.1f} median {statistics.median(m):6.1f} MB"
              f"   loaded: {loaded}")
    for f, what in (("s", "wall"), ("cpu", "CPU")):
        g = [r[f] for r in got["gymnasium"]]
        r = [r[f] for r in got["rlviz recorder"]]
        print(f"rlviz recorder - gymnasium ({what}): min {min(r) - min(g):+.3f} s, median "
              f"{statistics.median(r) - statistics.median(g):+.3f} s (target <= +0.15 s)")


def loop(kind: str, steps: int, folder: str, trigger: str = "every") -> tuple[list[float], float]:
    import gymnasium as gym
    import numpy as np

    from rlviz import RecordEpisode

    env = gym.make("CartPole-v1", render_mode="rgb_array")
    every = (lambda k: True) if trigger == "every" else None  # None: RecordVideo's capped cubic schedule
    if kind == "RecordVideo":
        env = gym.wrappers.RecordVideo(env, folder, episode_trigger=every, disable_logger=True)
    elif kind.startswith(("frames", "annotated")):
        from rlviz import RecordOptions

        env = RecordEpisode(env, folder, episode_trigger=every,
                            options=RecordOptions(background="in step" not in kind))
    rng = np.random.default_rng(0)
    times = []
    t_all = time.perf_counter()
    env.reset(seed=0)
    for t in range(steps):
        a = int(rng.integers(2))
        if kind.startswith("annotated"):
            logits = np.array([0.1 * (t % 50), -0.1 * (t % 50)], np.float32)
            env.annotate(logits=logits, value=float(t % 50))
        t0 = time.perf_counter()
        _, _, term, trunc, _ = env.step(a)
        if kind == "bare + render":
            env.render()
        times.append(time.perf_counter() - t0)
        if term or trunc:
            env.reset(seed=int(rng.integers(1 << 30)))
    env.close()
    return times, time.perf_counter() - t_all


def bench_steps(steps: int, repeats: int, trigger: str) -> None:
    kinds = ["bare + render", "frames", "frames (in step)", "annotated", "annotated (in step)"]
    try:
        import moviepy  # noqa: F401

        kinds.insert(1, "RecordVideo")
    except ImportError:
        print("(moviepy is not installed: RecordVideo skipped)")
    rows: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in kinds}
    for rep in range(repeats):
        for k in kinds if rep % 2 == 0 else kinds[::-1]:
            with tempfile.TemporaryDirectory() as folder:
                times, wall = loop(k, steps, folder, trigger)
            ms = sorted(1000 * x for x in times)
            rows[k].append((statistics.median(ms), ms[int(0.99 * (len(ms) - 1))], ms[-1], wall))
    which = "every episode" if trigger == "every" else "episodes 0, 1, 8, 27, 64... (capped cubic)"
    print(f"steps: CartPole-v1, {steps:,} steps, {which} recorded, {repeats} repeats "
          "(ms per step call: min / median over repeats; wall: seconds):")
    for k, r in rows.items():
        cols = []
        for i, name in enumerate(("median", "p99", "max", "wall")):
            vals = [x[i] for x in r]
            cols.append(f"{name} {min(vals):7.3f} / {statistics.median(vals):7.3f}")
        print(f"  {k:20s} " + "   ".join(cols))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("imports", "steps", "both"), default="both")
    ap.add_argument("--baseline", type=Path, help="another checkout (e.g. release 0.3.0) whose recorder import is "
                                                  "measured too, interleaved")
    ap.add_argument("--reps", type=int, default=9, help="fresh processes per import kind")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trigger", choices=("every", "cubic"), default="every",
                    help="record every episode (a stress test: videos come faster than they are drawn) or "
                         "RecordVideo's default schedule (what a training loop records)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    if args.part in ("imports", "both"):
        compile_trees(ROOT / "rlviz", *([args.baseline / "rlviz"] if args.baseline else []))  # as installed
        bench_imports(args.reps, args.baseline)
    if args.part in ("steps", "both"):
        bench_steps(args.steps, args.repeats, args.trigger)


if __name__ == "__main__":
    main()
