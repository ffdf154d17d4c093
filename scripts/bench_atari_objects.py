#!/usr/bin/env python
"""Benchmark and table of the Atari RAM object maps (rlviz.evaluate.failures.atari_ram).

    python scripts/bench_atari_objects.py                       # render ratio, 100 episodes per game, 3 repeats
    python scripts/bench_atari_objects.py --episodes 1000 --repeats 2 --workers 2   # the issue's full size
    python scripts/bench_atari_objects.py --games MsPacman --episodes 100 --repeats 2   # one game
    python scripts/bench_atari_objects.py --table --steps 300   # docs/atari-objects.md's table
    python scripts/bench_atari_objects.py --pictures docs/img   # the docs page's two heatmaps
    python scripts/bench_atari_objects.py --before af0ff52 --games Pitfall --episodes 200   # this tree against REV

Render ratio: ``rlviz render`` of N episodes of Breakout (the shipped samples/ale_breakout_ppo.pt2), SpaceInvaders
and MsPacman (random-weight Nature-CNN agents saved here: a near-uniform policy) with ``--heatmap`` against the same
render without it (``--videos none``, seed 0), interleaved (plain, heatmap, heatmap, plain, ...) in one process;
prints min and median seconds of each and the ratio heatmap / plain, of wall clock and of CPU time (this process's
and, with ``--workers N``, its worker processes': the robust figure on a loaded machine). Target: <= 1.3x.

Table: per game, each category's screen-check hit rate (tests/test_atari_objects.py's check: random decisions of 4
frames, seed 0; in brackets the drawn boxes checked and the boxes the map reported as not drawn) and the cost of
detection (``RamGame.detect`` on one RAM snapshot) relative to one ``env.step`` of ALE/<Game>-v5 (frame skip 4), and
of the capture (the 128 bytes, and the band of screen rows for the games that read objects from the screen); min of
3 timed passes.

Before/after (``--before REV``): the same heatmap rollout (``rlviz.rollout``, a random-weight Nature-CNN agent, N
episodes of at most ``--max-steps`` steps, 8 envs, seed 0) in fresh processes on REV's tree (``git archive``,
unpacked in a temporary folder: the repository is not touched) and on this one, interleaved (before, after, after,
before, ...); prints min and median of the rollout's wall and CPU seconds on each side and the ratios after /
before, and each side's failures and heatmap layers.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GAMES_RENDERED = (("Breakout", None), ("SpaceInvaders", 6), ("MsPacman", 9))


def _agents(work: Path, games) -> dict[str, Path]:
    import torch

    from rlviz.agent.models import NatureCNNAgent
    from rlviz.sources.checkpoint import save_checkpoint

    torch.manual_seed(0)
    out = {}
    for game, n in GAMES_RENDERED:
        if game not in games:
            continue
        if n is None:
            out[game] = ROOT / "samples" / "ale_breakout_ppo.pt2"
        else:
            out[game] = save_checkpoint(work / f"{game}.pt2", NatureCNNAgent(n), env=f"ALE/{game}-v5")
    return out


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the --workers processes, joined after each render)."""
    import resource

    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def render_ratio(episodes: int, repeats: int, num_envs: int, games, workers: int = 1) -> None:
    from rlviz import RenderConfig, render

    work = Path(tempfile.mkdtemp(prefix="bench_atari_objects_"))
    try:
        agents = _agents(work, games)
        for game, ckpt in agents.items():
            base = RenderConfig(checkpoint=ckpt, episodes=episodes, videos="none", seed=0, progress=False,
                                overwrite=True, num_envs=num_envs, out=work / game, workers=workers)
            configs = {"plain": replace(base, heatmap=False), "heatmap": replace(base, heatmap=True)}
            for c in configs.values():  # warm-up, untimed
                render(replace(c, episodes=2))
            times: dict[str, list[float]] = {k: [] for k in configs}
            cpu: dict[str, list[float]] = {k: [] for k in configs}
            for r in range(repeats):
                order = list(configs) if r % 2 == 0 else list(reversed(configs))
                for name in order:
                    t, c = time.perf_counter(), _cpu()
                    render(configs[name])
                    times[name].append(time.perf_counter() - t)
                    cpu[name].append(_cpu() - c)
            for label, d in (("wall", times), ("cpu", cpu)):  # cpu: this process's and its workers' CPU time
                p, h = d["plain"], d["heatmap"]
                print(f"{game:14s} {episodes} episodes, {label}: plain min {min(p):.1f} s median "
                      f"{statistics.median(p):.1f} s; heatmap min {min(h):.1f} s median {statistics.median(h):.1f} s; "
                      f"ratio min {min(h) / min(p):.3f} median {statistics.median(h) / statistics.median(p):.3f}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


_ROLLOUT = """
import json, time, torch
import rlviz
from rlviz.evaluate import RolloutPlan
torch.set_num_threads(1)
agent = rlviz.load_agent({ckpt!r})
plan = RolloutPlan({episodes}, num_envs=8, heatmap=True, seed=0, max_steps={max_steps}, progress=False)
t, c = time.perf_counter(), time.process_time()
res = rlviz.rollout(agent.recipe, agent.policy, plan)
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({{"wall": wall, "cpu": cpu, "failures": res.heatmap.failures,
                  "layers": {{k: int(v.sum() > 0) for k, v in res.heatmap.counts.items()}}}}))
"""


def before_after(rev: str, game: str, episodes: int, repeats: int, max_steps: int) -> None:
    """The heatmap rollout on REV's tree and on this one, interleaved, in fresh processes."""
    import io
    import json
    import os
    import subprocess
    import tarfile

    import gymnasium as gym
    import torch

    from rlviz.agent.models import NatureCNNAgent
    from rlviz.sources.checkpoint import save_checkpoint

    work = Path(tempfile.mkdtemp(prefix="bench_atari_before_"))
    try:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(work / "before", filter="data")
        import ale_py

        gym.register_envs(ale_py)
        n = int(gym.make(f"ALE/{game}-v5").action_space.n)
        torch.manual_seed(0)
        ckpt = save_checkpoint(work / f"{game}.pt2", NatureCNNAgent(n), env=f"ALE/{game}-v5")
        code = _ROLLOUT.format(ckpt=str(ckpt), episodes=episodes, max_steps=max_steps)
        trees = {"before": work / "before", "after": ROOT}
        runs: dict[str, list[dict]] = {k: [] for k in trees}
        for r in range(repeats):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                env = {**os.environ, "PYTHONPATH": str(trees[side]), "OMP_NUM_THREADS": "1"}
                out = subprocess.run([sys.executable, "-c", code], cwd=trees[side], env=env, check=True,
                                     capture_output=True, text=True).stdout
                runs[side].append(json.loads(out.strip().splitlines()[-1]))
        for side, rs in runs.items():
            print(f"{game} {side} ({rev if side == 'before' else 'this tree'}): failures {rs[0]['failures']}, "
                  f"layers with counts {rs[0]['layers']}", flush=True)
        for key in ("wall", "cpu"):
            b, a = [x[key] for x in runs["before"]], [x[key] for x in runs["after"]]
            print(f"{game:10s} {episodes} episodes (max {max_steps} steps), {key}: before min {min(b):.1f} s median "
                  f"{statistics.median(b):.1f} s; after min {min(a):.1f} s median {statistics.median(a):.1f} s; "
                  f"ratio min {min(a) / min(b):.3f} median {statistics.median(a) / statistics.median(b):.3f}",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(steps: int, only: str | None = None) -> None:
    import ale_py
    import gymnasium as gym

    from rlviz.evaluate.failures.atari_ram import GAMES, check_game

    gym.register_envs(ale_py)
    print("| game | categories: hit rate (boxes) | detect / env.step | capture / env.step |")
    print("|---|---|---|---|")
    for rom, cls in GAMES.items():
        game = cls()
        camel = "".join(p.capitalize() for p in rom.split("_"))
        if only and camel not in only.split(","):
            continue
        env = gym.make(f"ALE/{camel}-v5", frameskip=1, repeat_action_probability=0.0)
        env.reset(seed=0)
        rng, n_actions = np.random.default_rng(0), int(env.action_space.n)
        check = check_game(game, env, steps, lambda t, rng=rng, n=n_actions: int(rng.integers(n)))
        env.close()
        env = gym.make(f"ALE/{camel}-v5", repeat_action_probability=0.0)
        env.reset(seed=0)
        ale, rams, bands, step_t = env.unwrapped.ale, [], [], []
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(200):
                _, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
                if term or trunc:
                    env.reset()
            step_t.append((time.perf_counter() - t) / 200)
        for _ in range(200):
            env.step(int(rng.integers(env.action_space.n)))
            rams.append(np.array(ale.getRAM(), dtype=np.uint8))
            bands.append(game.band(ale.getScreen()))
        det_t, cap_t = [], []
        for _ in range(3):
            t = time.perf_counter()
            for r, b in zip(rams, bands, strict=True):
                game.objects(np.asarray(r, dtype=np.int64), b)
            det_t.append((time.perf_counter() - t) / len(rams))
            t = time.perf_counter()
            for _ in rams:
                np.array(ale.getRAM(), dtype=np.uint8, copy=True)
                game.band(ale.getScreen())
            cap_t.append((time.perf_counter() - t) / len(rams))
        env.close()
        def cell(c: str, check=check) -> str:
            hidden = f", {check.hidden[c]} not drawn" if check.hidden.get(c) else ""
            if check.hidden_hits.get(c):
                hidden += f" ({check.hidden_hits[c]} drawn all the same)"
            rate = check.rate(c)
            return f"{c} {rate:.2f} ({check.boxes[c]}{hidden})" if rate is not None else f"{c} - (0{hidden})"

        rates = ", ".join(cell(c) for c in game.categories)
        print(f"| {camel} | {rates} | {min(det_t) / min(step_t):.3f} | {min(cap_t) / min(step_t):.4f} |", flush=True)


def pictures(folder: Path, episodes: int = 12) -> None:
    """docs/atari-objects.md's pictures: ``rlviz render --heatmap`` of random-weight agents (seed 0) on
    SpaceInvaders and Seaquest, their heatmap.png copied to ``folder/atari_<game>_heatmap.png``."""
    import torch

    from rlviz import RenderConfig, render
    from rlviz.agent.models import NatureCNNAgent
    from rlviz.sources.checkpoint import save_checkpoint

    work = Path(tempfile.mkdtemp(prefix="atari_pictures_"))
    try:
        for game, n in (("SpaceInvaders", 6), ("Seaquest", 18)):
            torch.manual_seed(0)
            ckpt = save_checkpoint(work / f"{game}.pt2", NatureCNNAgent(n), env=f"ALE/{game}-v5")
            render(RenderConfig(checkpoint=ckpt, episodes=episodes, num_envs=episodes, heatmap=True, videos="none",
                                seed=0, out=work / game, progress=False))
            shutil.copyfile(work / game / "heatmap.png", folder / f"atari_{game.lower()}_heatmap.png")
            print(folder / f"atari_{game.lower()}_heatmap.png", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1, help="rlviz render --workers (default 1: this process)")
    ap.add_argument("--games", default="Breakout,SpaceInvaders,MsPacman", help="comma-separated (default all three)")
    ap.add_argument("--table", action="store_true", help="print the per-game table instead")
    ap.add_argument("--steps", type=int, default=300, help="decisions per game for --table")
    ap.add_argument("--table-games", metavar="GAMES", help="comma-separated rows of --table (default all 20)")
    ap.add_argument("--pictures", metavar="DIR", help="write the docs page's two heatmap pictures into DIR instead")
    ap.add_argument("--before", metavar="REV", help="time the heatmap rollout of --games' first game on REV's tree "
                    "against this tree's instead (--episodes, --repeats, --max-steps)")
    ap.add_argument("--max-steps", type=int, default=150, help="--before: steps per episode at most (default 150)")
    args = ap.parse_args()
    if args.before:
        before_after(args.before, args.games.split(",")[0], args.episodes, args.repeats, args.max_steps)
    elif args.pictures:
        pictures(Path(args.pictures))
    elif args.table:
        table(args.steps, args.table_games)
    else:
        render_ratio(args.episodes, args.repeats, args.num_envs, args.games.split(","), args.workers)


if __name__ == "__main__":
    main()
