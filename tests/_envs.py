"""Tiny deterministic probe envs for tests (importable as ``_envs`` from tests/).

``rlviz-probe/Probe-v0``: obs float32 [3] = (t, L, fate); actions Discrete(2); reward = action.
On reset(seed) the env draws an episode length L in 3..6 and a fate: "lose" (terminated on step L)
or "timeout" (runs on until the TimeLimit of 8 steps truncates it). The rgb_array frame is
16x16 black with one red pixel, the object: at (t, 0) normally, at PROBE_PIXEL on the frame
before the losing step (t = L - 1 of a "lose" episode).
``rlviz-probe/Lives-v0``: same, plus info["lives"] starting at 3, one life lost at step 2 and
at step 4 and the last at step 5, when it terminates (each preceded by the object at PROBE_PIXEL).
``rlviz-probe/Vanish-v0``: like Probe-v0 but the object is at PROBE_PIXEL two frames before the losing
step and invisible on the frame just before it (as an ALE Breakout ball that has left the screen).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

PROBE_PIXEL = (5, 7)
TIME_LIMIT = 8


class ProbeEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None, lives: bool = False, vanish: bool = False):
        self.render_mode = render_mode
        self.vanish = vanish
        self.lives_mode = lives
        self.observation_space = gym.spaces.Box(-1.0, 100.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.L, self.lose = 0, 3, True

    def _obs(self):
        return np.array([self.t, self.L, float(self.lose)], dtype=np.float32)

    def _lives(self):
        return 3 - (self.t >= 2) - (self.t >= 4) - (self.t >= 5)

    def _info(self):
        return {"lives": self._lives()} if self.lives_mode else {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.L = int(self.np_random.integers(3, 7))
        self.lose = bool(self.np_random.random() < 0.5)
        if self.lives_mode:
            self.L, self.lose = 5, True
        return self._obs(), self._info()

    def step(self, action):
        self.t += 1
        terminated = self.lose and self.t >= self.L
        return self._obs(), float(action), terminated, False, self._info()

    def object_pixel(self):
        about_to_fail = self.lose and self.t == self.L - 1
        if self.lives_mode:
            about_to_fail = self.t in (1, 3, 4)
        return PROBE_PIXEL if about_to_fail else (self.t % 16, 0)

    def render(self):
        f = np.zeros((16, 16, 3), dtype=np.uint8)
        if self.vanish and self.lose and self.t >= self.L - 2:
            if self.t == self.L - 2:
                f[PROBE_PIXEL] = (255, 0, 0)
            return f  # gone on the frame before the loss
        f[self.object_pixel()] = (255, 0, 0)
        return f


def probe_objects(frame, env):
    """The probe's extractor: the red pixel is the object."""
    return {"obj": (frame[..., 0] == 255) & (frame[..., 1] == 0)}


def register() -> None:
    if "rlviz-probe/Probe-v0" not in gym.registry:
        gym.register("rlviz-probe/Probe-v0", entry_point=ProbeEnv, max_episode_steps=TIME_LIMIT)
        gym.register("rlviz-probe/Lives-v0", entry_point=ProbeEnv, max_episode_steps=TIME_LIMIT, kwargs={"lives": True})
        gym.register("rlviz-probe/Vanish-v0", entry_point=ProbeEnv, max_episode_steps=TIME_LIMIT,
                     kwargs={"vanish": True})


register()


class DictProbeEnv(gym.Env):
    """``rlviz-probe/Dict-v0``: a goal-conditioned toy with Dict observations {"pos": Box [2], "goal": Discrete(3)}
    (gymnasium orders the keys: goal, pos). Actions Discrete(2): 1 steps right; the episode terminates (a
    failure) when pos[0] passes 4 and truncates after 8 steps. Frames: 16x16, the agent a red pixel at (0, pos)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Dict(
            {"pos": gym.spaces.Box(0.0, 16.0, (2,), np.float32), "goal": gym.spaces.Discrete(3)}
        )
        self.action_space = gym.spaces.Discrete(2)
        self.pos, self.goal = 0, 0

    def _obs(self):
        return {"pos": np.array([self.pos, 1.0], dtype=np.float32), "goal": self.goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = 0, int(self.np_random.integers(3))
        return self._obs(), {}

    def step(self, action):
        self.pos += int(action)
        return self._obs(), float(action), self.pos > 4, False, {}

    def render(self):
        f = np.zeros((16, 16, 3), dtype=np.uint8)
        f[0, min(self.pos, 15)] = (255, 0, 0)
        return f


if "rlviz-probe/Dict-v0" not in gym.registry:
    gym.register("rlviz-probe/Dict-v0", entry_point=DictProbeEnv, max_episode_steps=TIME_LIMIT)


class MaskedProbeEnv(gym.Env):
    """``rlviz-probe/Masked-v0``: a corridor with invalid actions (sb3-contrib's ``action_masks()`` convention).

    obs float32 [3] = (pos, t, t % 2); actions Discrete(4): 0 left, 1 right, 2 stay, 3 jump (+2). Masks, True =
    allowed: left not at pos 0, jump not on odd steps, right not when t % 3 == 2; stay always. Taking a masked
    action raises ValueError. Reset(seed) draws the start in 0..2; reaching pos >= 7 terminates with +1, each step
    costs 0.05; TimeLimit 12. Frames: 16x16, the agent a red pixel at (0, pos)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 20.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.pos, self.t = 0, 0

    def action_masks(self) -> np.ndarray:
        return np.array([self.pos > 0, self.t % 3 != 2, True, self.t % 2 == 0])

    def _obs(self):
        return np.array([self.pos, self.t, self.t % 2], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = int(self.np_random.integers(3)), 0
        return self._obs(), {}

    def step(self, action):
        if not self.action_masks()[int(action)]:
            raise ValueError(f"masked action {int(action)} taken at pos {self.pos}, step {self.t}")
        self.pos = max(0, self.pos + (-1, 1, 0, 2)[int(action)])
        self.t += 1
        done = self.pos >= 7
        return self._obs(), (1.0 if done else 0.0) - 0.05, done, False, {}

    def render(self):
        f = np.zeros((16, 16, 3), dtype=np.uint8)
        f[0, min(self.pos, 15)] = (255, 0, 0)
        return f


if "rlviz-probe/Masked-v0" not in gym.registry:
    gym.register("rlviz-probe/Masked-v0", entry_point=MaskedProbeEnv, max_episode_steps=12)


def seeded_mlp(n_in: int, n_act: int):
    """A tiny actor-critic (torch.manual_seed(0) weights): x [B, n_in] -> (logits [B, n_act], value [B])."""
    import torch

    class SeededMlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.pi, self.v = torch.nn.Linear(n_in, n_act), torch.nn.Linear(n_in, 1)

        def forward(self, x):
            return self.pi(x), self.v(x)[:, 0]

    return SeededMlp()


def played_frames(env: gym.Env, actions, seed: int) -> list:
    """``env.render()`` after the seeded reset and after each of ``actions``; the env is closed after."""
    env.reset(seed=seed)
    out = [env.render()]
    for a in actions:
        env.step(a)
        out.append(env.render())
    env.close()
    return out
