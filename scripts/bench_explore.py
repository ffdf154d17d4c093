"""``rlviz explore`` benchmark: opening an episode and starting the explorer, against baselines measured in the
same run, interleaved and repeated (min and median).

    python scripts/bench_explore.py                # a 200-episode MinAtar run (made once in a temp folder)
    python scripts/bench_explore.py --run DIR --reps 5
    python scripts/bench_explore.py --run DIR --startup-only --reps 10   # the start-up alone

Figures (each repetition does every measurement once, in turn):

* **cold open**: an episode of ~200 steps not yet rendered: from the POST that opens it (the page's request) to the
  first bytes of its video in hand, polling as the page does (every 250 ms), minus that episode's own replay time
  (the renderer's call: rollout of the episode and its video, timed inside the server). The agent is already loaded
  (the server loads it after the first page). Target: <= 1 s.
* **warm open**: the same episode again (cached): open -> status -> trace -> the video's first bytes. Target: <= 0.2 s.
* **start-up**: ``python -m rlviz explore RUN --no-browser --port 0`` from launch to the first page and its data
  (``/`` and ``/api/run`` answered), against ``python -m rlviz render --help`` (the CLI's import time) plus reading
  every file of the run folder once. Target: ratio <= 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "minatar_breakout_ppo.pt2"


def make_run(folder: Path) -> Path:
    from rlviz.jobs.render import render

    render(checkpoint=str(SAMPLE), episodes=200, heatmap=True, videos="none", out=folder)
    return folder


def _post(url: str) -> dict:
    return json.loads(urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=120).read())


def _get(url: str, first: bool = False) -> bytes:
    req = urllib.request.Request(url, headers={"Range": "bytes=0-65535"} if first else {})
    return urllib.request.urlopen(req, timeout=120).read()


def open_episode(base: str, n: int, poll: float = 0.25) -> float:
    """Seconds from the opening POST to the video's first bytes (polling every ``poll`` s, as the page does)."""
    t0 = time.perf_counter()
    state = _post(f"{base}/api/episode/{n}/open")
    while state["state"] == "rendering":
        time.sleep(poll)
        state = json.loads(_get(f"{base}/api/episode/{n}/status"))
    assert state["state"] == "done", state
    _get(f"{base}/api/episode/{n}/trace")
    _get(f"{base}/api/episode/{n}/video.mp4", first=True)
    return time.perf_counter() - t0


def startup(run: Path, env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rlviz", "explore", str(run), "--no-browser", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        base = line.split(" at ")[1].split()[0].rstrip("/")
        _get(base + "/")
        _get(base + "/api/run")
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def help_plus_read(run: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlviz", "render", "--help"], stdout=subprocess.DEVNULL, env=env, cwd=ROOT,
                   check=True)
    for p in sorted(run.rglob("*")):
        if p.is_file() and ".rlviz-cache" not in p.parts:
            p.read_bytes()
    return time.perf_counter() - t0


def _pair(run: Path, env: dict, i: int) -> tuple[float, float]:
    """(start-up, help + read), the order alternating with ``i``."""
    if i % 2 == 0:
        return startup(run, env), help_plus_read(run, env)
    base = help_plus_read(run, env)
    return startup(run, env), base


def startup_only(run: Path, env: dict, reps: int) -> None:
    start, base_t, ratio = [], [], []
    for i in range(reps):
        s, b = _pair(run, env, i)
        start.append(s)
        base_t.append(b)
        ratio.append(s / b)
        print(f"rep {i}: start-up {s:.3f} s vs help+read {b:.3f} s; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"\nstart-up (target ratio <= 1.5): {_mm(start)} s vs `render --help` + folder read {_mm(base_t)} s; "
          f"ratio {_mm(ratio)}")


def _mm(xs: list[float]) -> str:
    return f"min {min(xs):.3f}  median {statistics.median(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="a render run with --heatmap (default: made once in a temp folder)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--startup-only", action="store_true", help="measure the start-up only (no episode opened)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-explore-") as tmp:
        run = args.run or make_run(Path(tmp) / "run")
        if args.startup_only:
            return startup_only(run, env, args.reps)
        from rlviz.config import ExploreConfig
        from rlviz.explore.server import create_app, make_server, open_run

        index, cache = open_run(ExploreConfig(out=run, port=0, browser=False))
        inner: dict[int, float] = {}
        render = cache.renderer

        def timed(n: int, folder: Path) -> Path:
            t0 = time.perf_counter()
            try:
                return render(n, folder)
            finally:
                inner[n] = time.perf_counter() - t0

        cache.renderer = timed
        render.warm()  # the agent: loaded after the first page, before a user opens an episode
        server = make_server("127.0.0.1", 0, create_app(index, cache))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}"
        col = index.columns.index
        by_len = sorted((abs(r[col("length")] - 200), r[col("episode")]) for r in index.rows)
        picks = [e for _, e in by_len if cache.video(e) is None][: args.reps]
        cold, replay, warm, start, base_t, ratio = [], [], [], [], [], []
        for i, n in enumerate(picks):
            total = open_episode(base, n)
            cold.append(total - inner[n])
            replay.append(inner[n])
            warm.append(min(open_episode(base, n, poll=0.02) for _ in range(3)))
            pair = _pair(run, env, i)
            start.append(pair[0])
            base_t.append(pair[1])
            ratio.append(pair[0] / pair[1])
            length = index.episode(n)["length"]  # type: ignore[index]
            print(f"rep {i}: episode {n} ({length} steps) replay {inner[n]:.3f} s, open {total:.3f} s "
                  f"(beyond replay {cold[-1]:.3f} s), cached {warm[-1]:.3f} s; start-up {pair[0]:.3f} s vs "
                  f"help+read {pair[1]:.3f} s; load {os.getloadavg()[0]:.2f}", flush=True)
        server.shutdown()
        print(f"\ncold open beyond the replay (target <= 1 s): {_mm(cold)} s   (replay itself: {_mm(replay)} s)")
        print(f"warm open (target <= 0.2 s):                {_mm(warm)} s")
        print(f"start-up (target ratio <= 1.5):             {_mm(start)} s vs `render --help` + folder read "
              f"{_mm(base_t)} s; ratio {_mm(ratio)}")


if __name__ == "__main__":
    main()
