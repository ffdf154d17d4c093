#!/usr/bin/env python
"""Instructions, not seconds: the recorder's import on this tree against another, counted by valgrind's callgrind.

    python scripts/bench_instructions.py --baseline /path/to/rlviz-0.4.0            # the recorder import, 2 runs each
    python scripts/bench_instructions.py --baseline DIR --runs 3

On a shared 2-core machine a few percent of wall or CPU time cannot be told from noise (``bench_light.py``'s
``import gymnasium`` alone spans 0.14-0.19 s CPU over 25 processes). The number of instructions a process executes
barely depends on the machine's load, so two trees can be compared to a tenth of a percent. Each run is one fresh
``python`` under ``valgrind --tool=callgrind`` (the main process; ``OMP_NUM_THREADS=1``), the trees interleaved, both
trees' modules compiled first (scripts/compiled.py). Printed: the instructions of ``import gymnasium`` (what every
recorder's user pays anyway) and of ``from rlviz import RecordEpisode, RecordVectorEpisode`` per tree, and the
recorder's own share (the import minus ``import gymnasium``) as a ratio this tree / baseline.
Needs ``valgrind`` (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from compiled import compile_trees  # noqa: E402

GYMNASIUM = "import gymnasium"
RECORDER = ("from rlviz import RecordEpisode\nimport importlib.util\n"
            "if importlib.util.find_spec('rlviz.record.vector'):\n    from rlviz import RecordVectorEpisode")


def instructions(code: str, tree: Path, tmp: Path) -> int:
    """Instructions callgrind counts for ``python -c code`` run in ``tree`` (on its ``PYTHONPATH``)."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}", sys.executable,
                          "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed in {tree}:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True, help="the other checkout (e.g. release 0.4.0 unpacked)")
    ap.add_argument("--runs", type=int, default=2, help="runs per tree and snippet (the counts vary by ~0.1%%)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind).")
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT}
    compile_trees(*(tree / "rlviz" for tree in trees.values()))
    counts: dict[str, list[int]] = {label: [] for label in trees}
    gym: list[int] = []
    with tempfile.TemporaryDirectory(prefix="rlviz-bench-instr-") as folder:
        tmp = Path(folder)
        for run in range(args.runs):
            gym.append(instructions(GYMNASIUM, ROOT, tmp))
            for label, tree in list(trees.items())[:: 1 if run % 2 == 0 else -1]:
                counts[label].append(instructions(RECORDER, tree, tmp))
                print(f"  run {run + 1} {label:9s} {counts[label][-1] / 1e6:9.2f} M", flush=True)
    g = statistics.median(gym)
    print(f"\nimport gymnasium: {g / 1e6:.2f} M instructions (median of {len(gym)})")
    own = {}
    for label, xs in counts.items():
        own[label] = statistics.median(xs) - g
        print(f"{label:9s} recorder import {statistics.median(xs) / 1e6:9.2f} M (runs {', '.join(f'{x / 1e6:.2f}' for x in xs)}); "
              f"beyond gymnasium {own[label] / 1e6:.2f} M")
    print(f"this tree / baseline: the whole import {statistics.median(counts['this tree']) / statistics.median(counts['baseline']):.4f}x, "
          f"the recorder's own share {own['this tree'] / own['baseline']:.4f}x")


if __name__ == "__main__":
    main()
