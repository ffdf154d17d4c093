"""Dict-observation envs and wrappers for the tests (named by ``--wrapper _dict_envs:Class``: pytest puts tests/ on
sys.path)."""

from __future__ import annotations

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
