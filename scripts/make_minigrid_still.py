"""docs/img/minigrid_dict_view.png: one frame of an SB3 MultiInputPolicy agent on MiniGrid (docs/bodies.md).

An SB3 PPO ``MultiInputPolicy`` trained here for seconds on ``MiniGrid-Empty-5x5-v0`` through the suite's wrapper
(tests/_dict_envs.py: MiniGrid's Dict without ``mission``, its image as float32 so that SB3 flattens it), rendered with
``rlviz render --wrapper _dict_envs:ImageDirection --videos first:1 --saliency gradient``, the video decoded back and
one frame saved: the full render with the view's saliency projected onto it, the agent's own view tinted by its
saliency, the direction key's bars.

    python scripts/make_minigrid_still.py [--out docs/img/minigrid_dict_view.png] [--frame T] [--steps 4096]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # rlviz from this tree; the suite's wrapper (tests/_dict_envs.py)

from _dict_envs import ImageDirection  # noqa: E402

from rlviz import read_video  # noqa: E402
from rlviz.cli import main as rlviz_main  # noqa: E402

ENV = "MiniGrid-Empty-5x5-v0"


def main() -> None:
    import minigrid  # noqa: F401  (registers the ids)
    from stable_baselines3 import PPO

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "img" / "minigrid_dict_view.png"))
    ap.add_argument("--frame", type=int, default=-1, help="the frame to save (default: the view's most salient)")
    ap.add_argument("--steps", type=int, default=4096)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model = PPO("MultiInputPolicy", ImageDirection(gym.make(ENV)), seed=0, n_steps=256, batch_size=64,
                    device="cpu")
        model.learn(args.steps)
        model.save(Path(folder) / "ppo_dict.zip")
        out = Path(folder) / "run"
        code = rlviz_main(["render", str(Path(folder) / "ppo_dict.zip"), "--env", ENV, "--wrapper",
                           "_dict_envs:ImageDirection", "--episodes", "1", "--videos", "first:1", "--saliency",
                           "gradient", "--out", str(out), "--no-progress"])
        if code:
            raise SystemExit(code)
        (video,) = (out / "videos").glob("*.mp4")
        with np.load(video.with_suffix(".npz")) as data:  # (read back: each key's saliency, the view's as a map)
            peak = int(data["saliency_key_image"][:-1].sum(axis=(1, 2)).argmax())  # (not the end, on the goal)
        at = peak if args.frame < 0 else args.frame
        frame = next(f for t, f in enumerate(read_video(video)) if t == at)
    cv2.imwrite(args.out, cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(args.out, Path(args.out).stat().st_size // 1024, "KB")


if __name__ == "__main__":
    main()
