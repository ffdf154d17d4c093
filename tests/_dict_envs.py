"""Dict-observation envs and wrappers for the tests (named by ``--wrapper _dict_envs:Class``: pytest puts tests/ on
sys.path)."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class ImageDirection(gym.ObservationWrapper):
    """MiniGrid's Dict without ``mission`` (SB3 cannot take text), its image as float32 so that SB3's
    ``CombinedExtractor`` flattens it (a uint8 7x7 image would go to NatureCNN, whose 8x8 kernel does not fit)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        image = env.observation_space["image"]
        self.observation_space = spaces.Dict({"image": spaces.Box(0.0, 255.0, image.shape, np.float32),
                                              "direction": env.observation_space["direction"]})

    def observation(self, observation):
        return {"image": np.asarray(observation["image"], np.float32), "direction": observation["direction"]}


def check_agent_cell_heatmap(out: Path, episodes: int = 20) -> dict:
    """The checks of a ``render --heatmap`` of ``episodes`` episodes of MiniGrid-Empty-5x5-v0 written to ``out``: the
    agent's cell (a 32x32 tile of the 160x160 render) counted on the frame each failing (goal-reaching) action was
    chosen on, i.e. a neighbour of the goal at cell (3, 3): cell (2, 3) or (3, 2). Returns summary.json's dict."""
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == episodes
    with np.load(out / "heatmap.npz") as hm:
        assert list(hm["object_names"]) == ["agent"]
        counts, failures = hm["counts"][0], int(hm["failures"])
    terminated = round(summary["terminated_rate"] * episodes)
    assert counts.shape == (160, 160) and failures == terminated and counts.sum() == terminated * 32 * 32
    assert counts[96:128, 64:96].sum() + counts[64:96, 96:128].sum() == counts.sum()
    return summary
