"""Scale-out benchmark: whole ``rlviz render`` runs (fresh processes: imports, agent loading and env building
included) at 1 and N workers, Ray (local instance) against ``--workers`` at the same count, and the cost of
batch-invariant (padded) forwards on rollouts.

    python scripts/bench_scale.py                          # MinAtar 1000 episodes, ALE 100, workers 1 and 2
    python scripts/bench_scale.py --workers 1 2 4 8 16     # the curve, on a machine with the cores
    python scripts/bench_scale.py --minatar-episodes 200 --ale-episodes 16 --no-ray   # quick

One run of each configuration, in order (a shared machine: read the load printed beside it). The outputs of
every run are checked to be identical (episodes.csv), so the speed-up never trades away the result.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def render(checkpoint: str, episodes: int, out: Path, *extra: str) -> float:
    """Wall seconds of one ``rlviz render`` in a fresh process."""
    cmd = [sys.executable, "-m", "rlviz", "render", checkpoint, "--episodes", str(episodes), "--heatmap",
           "--videos", "none", "--no-progress", "--out", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return wall


def scaling(name: str, checkpoint: str, episodes: int, workers: list[int], ray: bool, tmp: Path) -> None:
    print(f"\n{name}: {episodes} episodes, {checkpoint} (load {os.getloadavg()[0]:.1f})", flush=True)
    rows, base = [], None
    for n in workers:
        out = tmp / f"{name}-w{n}"
        wall = render(checkpoint, episodes, out, "--workers", str(n))
        base = base or wall
        rows.append((f"--workers {n}", wall, base / wall, out))
        print(f"  --workers {n:<3} {wall:8.1f} s  {base / wall:5.2f}x  (load {os.getloadavg()[0]:.1f})", flush=True)
    if ray:
        n = max(workers)
        out = tmp / f"{name}-ray{n}"
        wall = render(checkpoint, episodes, out, "--ray", "--workers", str(n))
        same = [r for r in rows if r[0] == f"--workers {n}"][0][1]
        rows.append((f"--ray (local, {n} CPUs)", wall, base / wall, out))
        print(f"  --ray, {n} CPUs {wall:8.1f} s  {base / wall:5.2f}x; Ray / --workers {n}: {wall / same:.2f}x "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    first = (rows[0][3] / "episodes.csv").read_bytes()
    assert all((r[3] / "episodes.csv").read_bytes() == first for r in rows), "episodes.csv differs between runs"
    print(f"  episodes.csv identical across {len(rows)} runs", flush=True)


def invariance_cost(checkpoint: str, num_envs: int, episodes: int, forward_rows: int) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT))
    import torch
    from bench_rollouts import run_rollout

    from rlviz.agent import load_agent

    torch.set_num_threads(1)
    agent = load_agent(checkpoint)
    agent.policy.forward_rows = forward_rows
    ratios = []
    for _ in range(3):
        s_pad, w_pad = run_rollout(agent.recipe, agent.policy, episodes, num_envs, 0, padded=True)
        s_raw, w_raw = run_rollout(agent.recipe, agent.policy, episodes, num_envs, 0, padded=False)
        ratios.append((s_pad / w_pad) / (s_raw / w_raw))
    ratios.sort()
    print(f"\nbatch invariance, {checkpoint}, {num_envs} envs, forward rows {forward_rows}: padded / plain "
          f"rollout speed min {ratios[0]:.2f}x, median {ratios[1]:.2f}x (cost {1 - ratios[1]:.0%}; "
          f"load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minatar", default="samples/minatar_breakout_ppo.pt2")
    ap.add_argument("--ale", default="samples/ale_breakout_ppo.pt2")
    ap.add_argument("--minatar-episodes", type=int, default=1000)
    ap.add_argument("--ale-episodes", type=int, default=100)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--no-ale", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-scale-") as d:
        tmp = Path(d)
        scaling("minatar", args.minatar, args.minatar_episodes, args.workers, not args.no_ray, tmp)
        if not args.no_ale:
            scaling("ale", args.ale, args.ale_episodes, args.workers, not args.no_ray, tmp)
    invariance_cost(args.minatar, 16, 200, 16)
    if not args.no_ale:
        invariance_cost(args.ale, 16, 16, 16)


if __name__ == "__main__":
    main()
