"""Benchmark: a multi-agent ``rlviz render`` (issue #45 part 3) against the bare PettingZoo loop with the same policy.

MPE ``simple_spread_v3`` (3 agents, ``max_cycles`` 10), one shared-parameter actor-critic (18 -> 64 -> 5 logits +
value), ``EPISODES`` episodes (default 1000), in this process:

* bare: the loop a user writes: ``env.reset(seed)``, then per step one forward of every live agent's observation
  (``torch.no_grad``), a categorical sample, ``env.step(dict)``; returns summed; nothing written. Same env
  construction as rlviz's (``render_mode="rgb_array"``, never rendered).
* rlviz: ``rlviz.render(checkpoint, episodes=N, videos="first:0")``: the whole job (load, rollouts, summary.json,
  episodes.csv, env-recipe.json, the run folder).

Interleaved (bare, rlviz, bare, rlviz, ...) ``REPEATS`` times; the ratio rlviz / bare per pair, min and median.
Target (#45): <= 1.2x. Run: ``OMP_NUM_THREADS=1 python scripts/bench_multiagent_render.py [EPISODES] [REPEATS]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rlviz.envs.pettingzoo_envs import make_agents_env
from rlviz.envs.recipe import pettingzoo_recipe
from rlviz.jobs.render import render
from rlviz.sources.pt2.saving import save_checkpoint

RECIPE = pettingzoo_recipe("simple_spread_v3", {"max_cycles": 10})


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(18, 64), torch.nn.Tanh())
        self.pi, self.v = torch.nn.Linear(64, 5), torch.nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return self.pi(h), self.v(h).squeeze(-1)


def bare(net: Net, episodes: int) -> float:
    env = make_agents_env(RECIPE, render_mode="rgb_array")
    rng = np.random.default_rng(0)
    total = 0.0
    t0 = time.perf_counter()
    with torch.no_grad():
        for k in range(episodes):
            obs, _ = env.reset(seed=k)
            while env.agents:
                live = list(env.agents)
                logits, _ = net(torch.as_tensor(np.stack([obs[a] for a in live]), dtype=torch.float32))
                p = torch.softmax(logits, -1).numpy().astype(np.float64)
                u = rng.random((len(live), 1))
                acts = (p.cumsum(-1) < u).sum(-1).clip(0, 4)
                obs, rewards, _, _, _ = env.step({a: int(x) for a, x in zip(live, acts)})
                total += sum(rewards.values())
    env.close()
    return time.perf_counter() - t0


def rlviz_render(ckpt: Path, out: Path, episodes: int) -> float:
    t0 = time.perf_counter()
    render(checkpoint=str(ckpt), episodes=episodes, videos="first:0", out=str(out), overwrite=True)
    return time.perf_counter() - t0


def main() -> None:
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = Net()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = save_checkpoint(Path(tmp) / "spread.pt2", net, env=RECIPE)
        rlviz_render(ckpt, Path(tmp) / "warm", 5)
        bare(net, 5)
        ratios, rows = [], []
        for i in range(repeats):
            b = bare(net, episodes)
            r = rlviz_render(ckpt, Path(tmp) / f"run{i}", episodes)
            ratios.append(r / b)
            rows.append((b, r))
            print(f"pair {i}: bare {b:.2f} s, rlviz render {r:.2f} s, ratio {r / b:.3f}", flush=True)
    print(f"simple_spread_v3 (3 agents, 10 cycles), {episodes} episodes, {repeats} interleaved pairs")
    print(f"rlviz render / bare PettingZoo loop: min {min(ratios):.3f}x, median {statistics.median(ratios):.3f}x "
          f"(target <= 1.2x)")


if __name__ == "__main__":
    main()
