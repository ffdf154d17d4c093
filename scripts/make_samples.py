"""Regenerate the outputs shipped in samples/ with the README's main command (library form).

    python scripts/make_samples.py                 # all three agents (ALE: --ale-episodes, default 100)
    python scripts/make_samples.py --only minatar  # one of: minatar, noent, ale, ale_attention, compare

Writes samples/out/<name>/ (summary.json with attention, episodes.csv, heatmap.png/.npz, attention_at_failure.png,
videos/*.mp4) and the README
stills samples/still.png (ALE Breakout with the perturbation overlay) and samples/still_minatar.png;
``compare``: samples/out/compare/ (healthy vs no-entropy MinAtar agent) and samples/still_compare.png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import numpy as np
from PIL import Image

from rlviz import CompareConfig, RenderConfig, compare, read_video, render

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path("samples")  # relative, run from ROOT (main() changes there): the outputs record no machine's paths


def still(video: Path, dest: Path, at: float = 0.6) -> None:
    """Save the frame at fraction ``at`` of ``video`` as a PNG."""
    frames = list(read_video(video)) if video.stat().st_size < 50_000_000 else []
    if frames:
        Image.fromarray(frames[int(at * (len(frames) - 1))]).save(dest)


def run(name: str, checkpoint: str, episodes: int, saliency: str, videos: str, attention=None) -> Path:
    out = SAMPLES / "out" / name
    if out.exists():
        shutil.rmtree(out)
    t = time.time()
    result = render(RenderConfig(checkpoint=SAMPLES / checkpoint, episodes=episodes, heatmap=True, videos=videos,
                                 saliency=saliency, out=out, seed=0, progress=False, attention=attention))
    for p in out.glob("videos/*.npz"):  # per-step numbers: useful locally, not needed in git
        p.unlink()
    print(f"== {name}: {episodes} episodes in {time.time() - t:.0f} s -> {out}")
    print(result.table)
    return out


def run_compare(episodes: int) -> Path:
    out = SAMPLES / "out" / "compare"
    if out.exists():
        shutil.rmtree(out)
    t = time.time()
    result = compare(CompareConfig(a=SAMPLES / "minatar_breakout_ppo.pt2", b=SAMPLES / "minatar_breakout_ppo_noent.pt2",
                                   episodes=episodes, heatmap=True, videos="worst:1", saliency="gradient", out=out,
                                   seed=0, progress=False))
    for side in ("a", "b"):  # the single videos: the side-by-side one holds both
        shutil.rmtree(out / "videos" / side)
    print(f"== compare: {episodes} episodes in {time.time() - t:.0f} s -> {out}")
    print(result.table)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["minatar", "noent", "ale", "ale_attention", "compare"], action="append")
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--ale-episodes", type=int, default=100)
    args = ap.parse_args()
    os.chdir(ROOT)
    which = args.only or ["minatar", "noent", "ale", "ale_attention", "compare"]
    if "minatar" in which:
        out = run("minatar", "minatar_breakout_ppo.pt2", args.episodes, "gradient", "first:1,worst:1")
        still(sorted(out.glob("videos/first-*.mp4"))[0], SAMPLES / "still_minatar.png")
    if "noent" in which:
        run("minatar_noent", "minatar_breakout_ppo_noent.pt2", args.episodes, "gradient", "first:1")
    if "ale" in which:
        # gradient attention on every step beside the perturbation videos (perturbation on every step: ~290
        # forwards per step)
        out = run("ale", "ale_breakout_ppo.pt2", args.ale_episodes, "perturbation", "best:1", attention="gradient")
        still(sorted(out.glob("videos/best-*.mp4"))[0], SAMPLES / "still.png", at=0.3)
    if "ale_attention" in which:  # attention on 100 ALE episodes: the first 100 of "ale", a gradient video
        run("ale_attention", "ale_breakout_ppo.pt2", 100, "gradient", "worst:1")
    if "compare" in which:
        out = run_compare(args.episodes)
        still(sorted(out.glob("videos/worst-*.mp4"))[0], SAMPLES / "still_compare.png", at=0.5)
    np.set_printoptions()


if __name__ == "__main__":
    main()
