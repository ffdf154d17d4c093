"""samples/still_pendulum.png: one frame of a Pendulum-v1 video with the Gaussian panel (README).

A hand-written torch actor (no training): mean = -0.9 sin(theta) - 0.15 thetadot,
std = 0.3 + 0.3 |sin(theta)|, value = cos(theta); recorded by RecordEpisode, decoded back, frame 40 saved.

    python scripts/make_still_pendulum.py [--out samples/still_pendulum.png] [--frame 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlviz import RecordEpisode, RecordOptions, read_video  # noqa: E402


class HandActor(torch.nn.Module):
    def forward(self, x):
        cos, sin, dot = x[:, 0], x[:, 1], x[:, 2]
        return {"mean": (-0.9 * sin - 0.15 * dot)[:, None], "std": (0.3 + 0.3 * sin.abs())[:, None], "value": cos}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "samples" / "still_pendulum.png"))
    ap.add_argument("--frame", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = RecordEpisode(gym.make("Pendulum-v1", render_mode="rgb_array"), folder, HandActor(),
                            options=RecordOptions(preset="medium", crf=18))
        obs, _ = env.reset(seed=1)
        rng = np.random.default_rng(1)
        for _ in range(80):
            action, _ = env.policy.act(obs[None], rng)
            env.annotate(torque_sq=float(action[0, 0] ** 2))  # a curve of the user's own
            obs, *_ = env.step(action[0])
        env.finish_episode()
        frame = next(f for t, f in enumerate(read_video(env.last_video_path)) if t == args.frame)
    cv2.imwrite(args.out, cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(args.out, Path(args.out).stat().st_size // 1024, "KB")


if __name__ == "__main__":
    main()
