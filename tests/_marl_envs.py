"""A small PettingZoo ParallelEnv whose every number is known in advance, for the multi-agent recorder tests.

``Tag(n, leave=..., length=6)``: agents ``agent_0`` .. ``agent_{n-1}``, ``Discrete(3)`` actions; agent i receives
``(i + 1) * action`` per step; agent ``leave[0]`` terminates at step ``leave[1]`` (it is then gone while the others
play on); everyone is truncated at step ``length``. Observations are 8x8x3 uint8 images filled with
``10 * step + i`` (mod 256; so a policy's numbers are derivable from them); ``render()`` is a 24x32 image filled with
``20 * step`` (mod 256).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Tag(ParallelEnv):
    metadata = {"render_modes": ["rgb_array"], "name": "tag_v0", "render_fps": 10, "is_parallelizable": True}

    def __init__(self, n: int = 3, leave: tuple[int, int] | None = (1, 3), length: int = 6,
                 render_mode: str | None = "rgb_array"):
        self.possible_agents = [f"agent_{i}" for i in range(n)]
        self.leave, self.length, self.render_mode = leave, length, render_mode
        self.agents: list[str] = []
        self.t = 0
        self._obs_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)
        self._act_space = spaces.Discrete(3)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def _obs(self, agent):
        return np.full((8, 8, 3), (10 * self.t + self.possible_agents.index(agent)) % 256, np.uint8)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards = {a: float((self.possible_agents.index(a) + 1) * int(actions[a])) for a in self.agents}
        term = {a: self.leave is not None and a == self.possible_agents[self.leave[0]] and self.t == self.leave[1]
                for a in self.agents}
        trunc = {a: self.t >= self.length for a in self.agents}
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos

    def render(self):
        return np.full((24, 32, 3), (20 * self.t) % 256, np.uint8)

    def close(self):
        pass
