"""Identical results: run a fixed set of jobs on release 0.4.0 and on this tree, compare every output.

    python scripts/check_identity.py                      # all jobs, against 0.4.0 (commit 3c325a3)
    python scripts/check_identity.py --jobs minatar,sac   # some of them
    python scripts/check_identity.py --keep /tmp/ident    # keep both trees' outputs there
    python scripts/check_identity.py --baseline-rev REV   # against another commit

The baseline is ``git archive REV`` unpacked in a temporary folder (the repository is not touched); HEAD is a copy
of the working tree this script sits in, uncommitted changes included, taken when it starts. Each job runs on each tree in a fresh process
(``python -m rlviz ...`` with ``PYTHONPATH`` set to the tree), on the same inputs (the SAC Pendulum zip is trained
here once, for seconds, and given to both).

Compared, file by file (the same relative paths must exist on both sides):

* ``.json``: every number (floats within float32 rounding: relative 1e-5, or one unit of the last decimal
  written when the value was rounded, as summary.json's attention shares are), every string and bool exactly;
  keys that hold a time, a version or a path are listed as ignored;
* ``.csv``: cell by cell, numbers as in JSON;
* ``.npz``: every array, shape and dtype exact, floats within float32 rounding (relative 1e-5 of the array's
  largest magnitude); heatmap counts exact;
* ``.mp4``: decoded with ``rlviz.media.decode`` (this tree's decoder for both): frame count, size, and pixels
  (max and mean absolute difference, share of pixels that differ);
* ``.png``: the decoded pixels.

The table lists each file as ``equal``, ``close`` (within the tolerances above), ``ignored`` (with the reason),
``intended`` (a difference listed in :data:`INTENDED` or ``--allow FILE``, with its reason) or ``DIFFERS``. The
exit status is 1 when anything DIFFERS without an intended reason, 0 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REV = "3c325a3"  # release 0.4.0 (tag v0.4.0)
BASE_LABEL = "0.4.0"
MINATAR = "samples/minatar_breakout_ppo.pt2"
MINATAR_NOENT = "samples/minatar_breakout_ppo_noent.pt2"

#: name -> the rlviz command line after ``python -m rlviz`` ({sac}: the trained zip; {out}: the job's folder).
JOBS: dict[str, list[str]] = {
    # MinAtar, 200 episodes: heatmap, attention (on with --saliency + --heatmap), gradient-saliency videos
    "minatar": ["render", MINATAR, "--episodes", "200", "--heatmap", "--videos", "first:1,worst:1",
                "--saliency", "gradient", "--out", "{out}", "--no-progress"],
    # the same agent with 4 saliency videos and no heatmap (the forward-count test's job)
    "minatar_videos": ["render", MINATAR, "--episodes", "4", "--videos", "first:4", "--saliency", "gradient",
                       "--out", "{out}", "--no-progress"],
    # an SB3 SAC zip (Box actions, tanh-squashed Gaussian), trained here for seconds
    "sac": ["render", "{sac}", "--env", "Pendulum-v1", "--episodes", "4", "--videos", "first:1,worst:1",
            "--out", "{out}", "--no-progress"],
    # compare: two MinAtar agents on the same seeds, heatmaps, one side-by-side video with saliency
    "compare": ["compare", MINATAR, MINATAR_NOENT, "--episodes", "20", "--heatmap", "--videos", "worst:1",
                "--saliency", "gradient", "--out", "{out}", "--no-progress"],
    # a timeline of the shipped run (12 checkpoints)
    "timeline": ["timeline", "samples/runs/minatar_ppo", "--episodes", "4", "--heatmap", "--out", "{out}",
                 "--no-progress"],
    # ALE Breakout (the shipped PPO agent) with its Atari RAM map (rlviz.evaluate.failures.atari_ram): heatmap and attention
    "atari": ["render", "samples/ale_breakout_ppo.pt2", "--episodes", "4", "--heatmap", "--attention", "--objects",
              "ram", "--videos", "none", "--out", "{out}", "--no-progress"],
}

#: Intended differences: (job glob, file glob, key glob) -> why. A key is a JSON path (``a/b/0``), a CSV
#: ``column`` or an npz array name; ``*`` matches all. Listed here with their reasons (and in the CHANGELOG).
INTENDED: dict[tuple[str, str, str], str] = {
    ("sac", "summary.json", "diagnostics*"): "#46: a Box policy is diagnosed against its action bounds; the SAC trained "
    "for seconds still has its initial wide Gaussian (gaussian_uniform, a new finding)",
    ("*", "*heatmap*.npz", "contrib_*"): "0.5 (#47): the heatmap keeps each episode's contribution (--videos "
                                         "failed-at, rlviz explore): new arrays, the counts unchanged",
    ("*", "summary.json", "entropy_measure"): "0.5.0 (#55): a Box agent's mean entropy is named a differential "
                                              "entropy (a new key; the number is unchanged)",
}

#: Keys whose values are times, versions or paths: not results.
IGNORED_KEYS = ("*wall_s*", "*seconds*", "*elapsed*", "*created*", "*started*", "*finished*", "*version*",
                "*time*", "*per_s*", "*steps_per_second*", "*_path", "*path", "*out*", "*checkpoint*", "*file*",
                "*host*", "*pid*", "*python*", "*torch*", "*platform*", "*machine*", "*cwd*", "*date*",
                "*video*", "*sha256*", "*digest*", "*threads*", "options")
#: Files that are not results (the page is built from the files compared here).
IGNORED_FILES = {"report.html": "the page, built from the files compared here",
                 "*.lock": "a lock file", "rlviz-run.json": "what wrote the run: version, options, time"}


@dataclass
class Row:
    job: str
    path: str
    status: str  # equal | close | ignored | intended | DIFFERS
    detail: str = ""


# -- trees and jobs ------------------------------------------------------------------------------------------
def baseline_tree(rev: str, into: Path) -> Path:
    """``git archive rev`` unpacked into ``into`` (the repository itself is not touched)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True,
                          capture_output=True).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def head_tree(into: Path) -> Path:
    """A copy of this working tree as it is now (tracked and untracked files, not ignored ones), so edits made
    while the jobs run do not mix into them."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, into / name)
    return into


def train_sac(path: Path) -> Path:
    """A SAC Pendulum agent trained for seconds (seeded), saved as an SB3 zip."""
    code = ("import torch; torch.set_num_threads(1); from stable_baselines3 import SAC; m = SAC('MlpPolicy', "
            "'Pendulum-v1', seed=0, learning_starts=100, device='cpu'); m.learn(300); "
            f"m.save(r'{path.with_suffix('')}')")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   capture_output=True)
    return path


def run_job(tree: Path, argv: list[str], out: Path, sac: Path | None, log: Path) -> float:
    """Run one job on ``tree`` in a fresh process (cwd: the tree); its seconds. Raises on a non-zero exit."""
    args = [a.format(out=out, sac=sac or "") for a in argv]
    env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rlviz", *args], cwd=tree, env=env, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed on {tree} (exit {proc.returncode}); see {log}:\n"
                           f"{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


# -- comparison ----------------------------------------------------------------------------------------------
def _match(name: str, patterns: Any) -> bool:
    return any(fnmatch.fnmatch(name.lower(), p) for p in patterns)


def _decimals(text: str) -> int | None:
    """Decimals written in a number's text (None for exponent notation or no fraction)."""
    if "e" in text.lower() or "." not in text:
        return None
    return len(text.split(".")[1])


def numbers_close(a: float, b: float, text_a: str = "", text_b: str = "") -> bool:
    """Within float32 rounding: relative 1e-5 (or both NaN / equal infinities), or one unit of the last decimal
    written when both were rounded to the same number of decimals (up to 6)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    if abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-9:
        return True
    da, db = _decimals(text_a), _decimals(text_b)
    return da is not None and da == db and da <= 6 and abs(a - b) <= 1.000001 * 10.0 ** -da


class Diffs:
    """Differences found in one file: (key, what) pairs; ``close``: some numbers differed within tolerance."""

    def __init__(self, job: str, path: str):
        self.job, self.path = job, path
        self.items: list[tuple[str, str]] = []
        self.ignored: list[str] = []
        self.close = False

    def add(self, key: str, what: str) -> None:
        self.items.append((key, what))

    def row(self) -> Row:
        unexplained, reasons = [], set()
        for key, what in self.items:
            why = intended(self.job, self.path, key)
            if why is None:
                unexplained.append(f"{key}: {what}")
            else:
                reasons.add(why)
        if unexplained:
            more = f" (+{len(unexplained) - 4} more)" if len(unexplained) > 4 else ""
            return Row(self.job, self.path, "DIFFERS", "; ".join(unexplained[:4]) + more)
        if reasons:
            return Row(self.job, self.path, "intended", "; ".join(sorted(reasons)))
        note = f"ignored keys: {', '.join(sorted(set(self.ignored))[:6])}" if self.ignored else ""
        return Row(self.job, self.path, "close" if self.close else "equal", note)


def intended(job: str, path: str, key: str) -> str | None:
    for (jp, fp, kp), why in INTENDED.items():
        if fnmatch.fnmatch(job, jp) and fnmatch.fnmatch(path, fp) and fnmatch.fnmatch(key, kp):
            return why
    return None


def compare_json(a: Any, b: Any, d: Diffs, key: str = "") -> None:
    leaf = not isinstance(a, (dict, list)) and not isinstance(b, (dict, list))
    if leaf and key and _match(key.rsplit("/", 1)[-1], IGNORED_KEYS):  # a time, version or path: not a result
        d.ignored.append(key.rsplit("/", 1)[-1])
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{key}/{k}" if key else str(k)
            if k not in a or k not in b:
                if not _match(str(k), IGNORED_KEYS) or isinstance(a.get(k, b.get(k)), (dict, list)):
                    d.add(sub, "only in " + ("HEAD" if k in b else BASE_LABEL))
                continue
            compare_json(a[k], b[k], d, sub)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            d.add(key, f"{len(a)} items vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            compare_json(x, y, d, f"{key}/{i}")
    else:
        compare_scalars(a, b, d, key)


def compare_scalars(a: Any, b: Any, d: Diffs, key: str) -> None:
    """Two JSON scalars: strings, bools and null exactly, numbers within float32 rounding."""
    if a == b and type(a) is type(b):
        return
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers and numbers_close(float(a), float(b), repr(a), repr(b)):
        d.close = True
    else:
        d.add(key, f"{str(a)[:60]!r} vs {str(b)[:60]!r}")


def compare_csv(pa: Path, pb: Path, d: Diffs) -> None:
    ra = list(csv.DictReader(pa.open(newline="")))
    rb = list(csv.DictReader(pb.open(newline="")))
    if len(ra) != len(rb):
        d.add("rows", f"{len(ra)} vs {len(rb)}")
        return
    for i, (x, y) in enumerate(zip(ra, rb)):
        for col in sorted(set(x) | set(y)):
            if _match(col, IGNORED_KEYS):
                d.ignored.append(col)
                continue
            u, v = x.get(col), y.get(col)
            if u == v:
                continue
            try:
                if numbers_close(float(u), float(v), u or "", v or ""):  # type: ignore[arg-type]
                    d.close = True
                    continue
            except (TypeError, ValueError):
                pass
            d.add(col, f"row {i}: {u!r} vs {v!r}")


def compare_arrays(name: str, a: np.ndarray, b: np.ndarray, d: Diffs) -> None:
    if a.shape != b.shape or a.dtype != b.dtype:
        d.add(name, f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
        return
    if a.dtype.kind in "fc":
        if np.array_equal(a, b, equal_nan=True):
            return
        scale = float(np.nanmax(np.abs(np.where(np.isfinite(a), a, 0)))) if a.size else 0.0
        same_nan = np.array_equal(np.isnan(a), np.isnan(b))
        err = float(np.nanmax(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
        if same_nan and err <= 1e-5 * max(scale, 1e-12) + 1e-9:
            d.close = True
        else:
            d.add(name, f"max |diff| {err:.3g} (largest value {scale:.3g})")
    elif not np.array_equal(a, b):
        n = int(np.sum(a != b)) if a.shape == b.shape else -1
        d.add(name, f"{n} of {a.size} elements differ")


def compare_npz(pa: Path, pb: Path, d: Diffs) -> None:
    with np.load(pa, allow_pickle=False) as za, np.load(pb, allow_pickle=False) as zb:
        for k in sorted(set(za.files) | set(zb.files)):
            if k not in za.files or k not in zb.files:
                d.add(k, "only in " + ("HEAD" if k in zb.files else BASE_LABEL))
            else:
                compare_arrays(k, za[k], zb[k], d)


def compare_pixels(name: str, fa: np.ndarray, fb: np.ndarray, d: Diffs, stats: dict) -> None:
    if fa.shape != fb.shape:
        d.add(name, f"size {fa.shape} vs {fb.shape}")
        return
    diff = np.abs(fa.astype(np.int16) - fb.astype(np.int16))
    stats["max"] = max(stats.get("max", 0), int(diff.max()) if diff.size else 0)
    stats["sum"] = stats.get("sum", 0) + int(diff.sum())
    stats["n"] = stats.get("n", 0) + diff.size
    stats["differ"] = stats.get("differ", 0) + int(np.count_nonzero(diff))


def compare_video(pa: Path, pb: Path, d: Diffs) -> None:
    from rlviz.media.decode import read_video

    stats: dict = {}
    na = nb = 0
    fb = iter(read_video(pb))
    for na, x in enumerate(read_video(pa), 1):  # streamed: one frame of each at a time
        y = next(fb, None)
        if y is None:
            break
        nb += 1
        compare_pixels(f"frame {na - 1}", np.asarray(x), np.asarray(y), d, stats)
    nb += sum(1 for _ in fb)
    if na != nb:
        d.add("frames", f"{na} vs {nb}")
    if stats.get("differ"):
        share = stats["differ"] / stats["n"]
        d.add("pixels", f"{share:.3%} of pixels differ, max {stats['max']}, mean {stats['sum'] / stats['n']:.4f}"
              f" over {nb} frames")


def compare_png(pa: Path, pb: Path, d: Diffs) -> None:
    import matplotlib.image as mpimg

    stats: dict = {}
    a = (np.asarray(mpimg.imread(pa)) * 255).round().astype(np.uint8)
    b = (np.asarray(mpimg.imread(pb)) * 255).round().astype(np.uint8)
    compare_pixels("image", a, b, d, stats)
    if stats.get("differ"):
        d.add("pixels", f"{stats['differ'] / stats['n']:.3%} of pixels differ, max {stats['max']}")


def compare_folders(job: str, a: Path, b: Path) -> list[Row]:
    files = sorted({p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
                   | {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()})
    rows = []
    for rel in files:
        pa, pb = a / rel, b / rel
        skip = next((why for pat, why in IGNORED_FILES.items() if fnmatch.fnmatch(Path(rel).name, pat)), None)
        if skip is not None:
            rows.append(Row(job, rel, "ignored", skip))
            continue
        d = Diffs(job, rel)
        if not pa.exists() or not pb.exists():
            d.add("file", "only in " + ("HEAD" if pb.exists() else BASE_LABEL))
            rows.append(d.row())
            continue
        suffix = pa.suffix.lower()
        try:
            if suffix == ".json":
                compare_json(json.loads(pa.read_text()), json.loads(pb.read_text()), d)
            elif suffix == ".csv":
                compare_csv(pa, pb, d)
            elif suffix == ".npz":
                compare_npz(pa, pb, d)
            elif suffix == ".mp4":
                compare_video(pa, pb, d)
            elif suffix == ".png":
                compare_png(pa, pb, d)
            elif pa.read_bytes() != pb.read_bytes():
                d.add("bytes", "the files differ")
        except Exception as exc:  # noqa: BLE001 - a file one side cannot read is a difference to show
            d.add("read", f"{type(exc).__name__}: {exc}")
        rows.append(d.row())
    return rows


def print_table(rows: list[Row]) -> None:
    wj = max([len(r.job) for r in rows] + [3])
    wp = min(max([len(r.path) for r in rows] + [4]), 58)
    print(f"{'job':<{wj}}  {'file':<{wp}}  {'result':<8}  detail")
    print(f"{'-' * wj}  {'-' * wp}  {'-' * 8}  {'-' * 30}")
    for r in rows:
        path = r.path if len(r.path) <= wp else "..." + r.path[-(wp - 3):]
        print(f"{r.job:<{wj}}  {path:<{wp}}  {r.status:<8}  {r.detail}")


def load_allow(path: Path) -> None:
    """Intended differences from a file: one per line, ``job-glob file-glob key-glob reason...``."""
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            job, file, key, *why = line.split()
            INTENDED[(job, file, key)] = " ".join(why) or "listed in " + path.name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma list of {', '.join(JOBS)}")
    ap.add_argument("--baseline-rev", default=BASELINE_REV)
    ap.add_argument("--keep", type=Path, help="keep the trees' outputs in this folder (default: a temporary one)")
    ap.add_argument("--allow", type=Path, help="a file of intended differences (job file key reason)")
    args = ap.parse_args(argv)
    names = [j for j in args.jobs.split(",") if j]
    unknown = [j for j in names if j not in JOBS]
    if unknown:
        ap.error(f"unknown job(s) {unknown}; choose from {list(JOBS)}")
    if args.allow:
        load_allow(args.allow)
    work = args.keep or Path(tempfile.mkdtemp(prefix="rlviz-identity-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        base = baseline_tree(args.baseline_rev, work / "baseline-tree")
        head = head_tree(work / "head-tree")
        sac = train_sac(work / "sac_pendulum.zip") if "sac" in names else None
        rows: list[Row] = []
        for name in names:
            outs = {}
            for side, tree in ((BASE_LABEL, base), ("HEAD", head)):
                out = work / side / name
                out.parent.mkdir(parents=True, exist_ok=True)
                secs = run_job(tree, JOBS[name], out, sac, work / f"{side}-{name}.log")
                print(f"{name:>15} on {side:<6} {secs:6.1f} s", flush=True)
                outs[side] = out
            rows += compare_folders(name, outs[BASE_LABEL], outs["HEAD"])
        print()
        print_table(rows)
        bad = [r for r in rows if r.status == "DIFFERS"]
        counts = {s: sum(r.status == s for r in rows) for s in ("equal", "close", "intended", "ignored", "DIFFERS")}
        print("\n" + ", ".join(f"{n} {s}" for s, n in counts.items()))
        if args.keep:
            print(f"outputs kept in {work}")
        return 1 if bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
