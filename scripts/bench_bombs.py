"""Hostile files refused: the wall time and the memory above start-up of each refusal, in fresh processes.

    python scripts/bench_bombs.py                          # this tree, 3 repetitions
    python scripts/bench_bombs.py --baseline /work/main    # and another checkout (e.g. 0.3.0), interleaved

Cases (tests/_bombs.py makes the files): a 1 MB SB3 zip whose ``data`` inflates to 1 GiB, found by ``discover`` in a
training run's folder; the same with ``policy.pth`` inflating, loaded by ``load_agent``; a 396-byte YAML alias bomb in
an rl-zoo3 run's ``args.yml`` (``env_kwargs: *i``); a .pt2 whose ``extra/rlviz.json`` nests 100,000 arrays. Start-up
(torch, gymnasium, SB3, rlviz's readers) is imported before the clock starts; memory is ``ru_maxrss`` after minus
before. Figures: min and median over repetitions. The baseline gets a time limit (``--limit``, default 120 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _bombs import DEEP_JSON, YAML_BOMB, measured, zip_with_bomb  # noqa: E402

STARTUP = ("import gymnasium, stable_baselines3, torch, yaml\nimport rlviz.sources.stable_baselines3.zips, rlviz.sources.stable_baselines3.zoo\n"
           "from rlviz.sources import load_agent\nfrom rlviz.sources.run_folders import discover\n")


def _files(work: Path) -> dict[str, str]:
    run = work / "run"
    run.mkdir()
    zip_with_bomb(run / "final.zip", {"policy.pth": b"\0" * 64, "_stable_baselines3_version": b"2.4.0"}, "data")
    weights = zip_with_bomb(work / "w.zip", {"data": b"{}", "_stable_baselines3_version": b"2.4.0"}, "policy.pth")
    zoo = work / "CartPole-v1_1"
    (zoo / "CartPole-v1").mkdir(parents=True)
    (zoo / "CartPole-v1.zip").write_bytes(b"PK\x03\x04")
    (zoo / "CartPole-v1" / "config.yml").write_text("policy: MlpPolicy\n")
    (zoo / "CartPole-v1" / "args.yml").write_text(YAML_BOMB + "env: CartPole-v1\nenv_kwargs: {k: *i}\n")
    code = ("import torch\nfrom torch import nn\nfrom rlviz.sources.pt2.saving import save_checkpoint\n"
            f"save_checkpoint({str(work / 'good.pt2')!r}, nn.Linear(4, 2), env='CartPole-v1', kind='logits')\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    with zipfile.ZipFile(work / "good.pt2") as z, zipfile.ZipFile(work / "deep.pt2", "w") as out:
        for info in z.infolist():
            out.writestr(info, DEEP_JSON if info.filename.endswith("extra/rlviz.json") else z.read(info))
    return {"zip bomb (data), discover": f"discover({str(run)!r}, require=False)[1][0].why",
            "zip bomb (policy.pth), load_agent": f"load_agent({str(weights)!r}, env='CartPole-v1')",
            "YAML alias bomb (args.yml), load_agent": f"load_agent({str(zoo)!r})",
            "100,000-deep JSON (.pt2), load_agent": f"load_agent({str(work / 'deep.pt2')!r})"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--baseline", help="another checkout's root, run interleaved")
    parser.add_argument("--limit", type=float, default=120)
    args = parser.parse_args()
    trees = {"this tree": str(ROOT), **({"baseline": args.baseline} if args.baseline else {})}
    with tempfile.TemporaryDirectory() as tmp:
        cases = _files(Path(tmp))
        got: dict[tuple[str, str], list[dict]] = {}
        for _ in range(args.reps):
            for case, call in cases.items():
                for tree, path in trees.items():
                    try:
                        got.setdefault((case, tree), []).append(measured(STARTUP, call, args.limit, path))
                    except subprocess.TimeoutExpired:
                        got.setdefault((case, tree), []).append({"s": args.limit, "mb": float("nan"),
                                                                 "outcome": f"over {args.limit:g} s"})
    for (case, tree), runs in got.items():
        s, mb = [r["s"] for r in runs], [r["mb"] for r in runs]
        print(f"{case:42} {tree:10} time min {min(s):8.3f} s median {statistics.median(s):8.3f} s   "
              f"memory min {min(mb):7.0f} MB median {statistics.median(mb):7.0f} MB   {runs[-1]['outcome'][:90]}")


if __name__ == "__main__":
    main()
