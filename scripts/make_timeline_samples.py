#!/usr/bin/env python
"""The timeline samples: ``rlviz timeline`` of the two shipped training runs (samples/runs/) and one picture of
both on the same step axis.

    python scripts/make_timeline_samples.py [--episodes 200]

writes samples/out/timeline_minatar_ppo/, samples/out/timeline_minatar_ppo_noent/ (= ``rlviz timeline
samples/runs/<run> --episodes N --heatmap --attention gradient --seed 0 --out ...``) and samples/timeline_twins.png, then prints
each checkpoint's return, entropy, value explained variance and policy change for docs/timeline.md.
The runs were trained with::

    python scripts/train_ppo.py --env MinAtar/Breakout-v1 --total-steps 4800000 --num-envs 64 --seed 1 --threads 1 \\
        --time-limit 18 --checkpoint-every 400000 --checkpoint-dir samples/runs/minatar_ppo \\
        --out /tmp/train/timeline_minatar_ppo_final.pt2
    (the same with --no-entropy and --checkpoint-dir samples/runs/minatar_ppo_noent)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlviz.config import TimelineConfig  # noqa: E402
from rlviz.training.plot import plot_timelines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "samples"
RUNS = {"with entropy bonus": "minatar_ppo", "--no-entropy (the bug)": "minatar_ppo_noent"}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args(argv)
    import rlviz.training

    os.chdir(ROOT.parent)  # paths relative to the repository in the outputs' rlviz-run.json
    datas = {}
    for label, name in RUNS.items():
        config = TimelineConfig(run=f"samples/runs/{name}", episodes=args.episodes, heatmap=True, seed=0, attention="gradient",
                                out=f"samples/out/timeline_{name}", overwrite=True, workers=args.workers)
        outputs = rlviz.timeline(config)
        print(outputs.table, flush=True)
        datas[label] = outputs.data
    png = plot_timelines(ROOT / "timeline_twins.png", datas,
                         title="MinAtar Breakout PPO: the run and its no-entropy twin")
    print(f"wrote {png}")
    for label, data in datas.items():
        print(f"\n{label}\n  step       return [95% CI]        entropy  value EV  policy TV  max")
        for r in data["checkpoints"]:
            ret, pc = r["return"], r.get("policy_change") or {}
            tv = pc.get("tv_mean")
            print(f"  {r['step']:>9,}  {ret['mean']:5.2f} [{ret['ci95'][0]:.2f}, {ret['ci95'][1]:.2f}]  "
                  f"{r['mean_relative_entropy']:.3f}   {r['value_explained_variance'] or float('nan'):6.3f}   "
                  f"{'' if tv is None else f'{tv:.3f}':>8}  {ret['max']:g}")
        regressions = [g["step"] for g in data.get("regressions", [])]
        print("  first seen:", data.get("first_seen"), " regressions:", regressions)


if __name__ == "__main__":
    main()
