"""docs/img/memory_cue.png: one frame of a recorded episode of the planted memory probe (tests/_memory_probe.py: the
cue shown at t = 0 only, acted on at t = 8), the decision step, with the memory saliency strip (its mass on the cue
step, 8 observations back) and the memory plot under the game.

    python scripts/make_memory_sample.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _memory_probe import CUE_ID, K, TinyMemory  # noqa: E402

from rlviz.draw.compose import ComposeOptions  # noqa: E402
from rlviz.media import read_video  # noqa: E402
from rlviz.record import RecordEpisode, RecordOptions, run_episode  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = RecordEpisode(gym.make(CUE_ID, render_mode="rgb_array"), tmp, TinyMemory("cue"),
                            options=RecordOptions(saliency="gradient", background=False,
                                                  compose_options=ComposeOptions(display_height=320)))
        result = run_episode(env, seed=3, greedy=True)
        env.close()
        frame = np.asarray(list(read_video(result.video_path))[K])
    out = ROOT / "docs" / "img" / "memory_cue.png"
    cv2.imwrite(str(out), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(out, frame.shape, out.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
