"""envpool's Atari observations rebuilt on gymnasium's ALE, for agents trained on envpool (CleanRL's
``ppo_atari_envpool_xla_jax_scan.py`` and its other ``*_envpool*`` scripts), which does not install everywhere.

CleanRL makes its envs with ``envpool.make(env_id, env_type="gym", num_envs=N, episodic_life=True,
reward_clip=True, seed=seed)``, every other setting at envpool's default. Each setting, where it comes from
(envpool ``envpool/atari/atari_env.h``, ``AtariEnvFns::DefaultConfig`` and ``AtariEnv``; ids from
``envpool/atari/registration.py``), and how it is rebuilt here:

========================================  ==================================================================
envpool (as CleanRL sets it)              here
========================================  ==================================================================
``Breakout-v5`` = task ``breakout``,      ``ALE/Breakout-v5`` with ``frameskip=1``,
``max_episode_steps=27000``               ``repeat_action_probability=0.0``, ``full_action_space=False``,
                                          ``obs_type="grayscale"``; truncated after 27,000 agent steps
``repeat_action_probability=0``           no sticky actions (ALE v5's own default is 0.25)
``full_action_space=False``               the minimal action set
``gray_scale=True``                       ALE's grey palette (``applyPaletteGrayscale``, gymnasium's
                                          ``obs_type="grayscale"``), not RGB luma weights
``frame_skip=4``                          the action repeated 4 times (fewer if the game ends), rewards summed
max-pool                                  the pixel-wise max of the last two of the 4 frames, only when all 4
                                          were played (else the last frame kept for pooling, as envpool's
                                          ``maxpool_buf_[0]``); the max is kept as that buffer, as envpool does
``img_height=img_width=84``,              ``cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)``
``use_inter_area_resize=True``
``stack_num=4``                           ``[4, 84, 84]`` uint8, oldest first, newest last; a reset fills all 4
                                          with its frame
``noop_max=30``, ``use_fire_reset=True``  reset: ``randint(0, 29) + 1 - fire`` NOOPs (a new game if one ends
                                          meanwhile), then FIRE once when the minimal set has it; the
                                          observation is that frame, not max-pooled. The counts are drawn
                                          as envpool draws them (libstdc++'s ``uniform_int_distribution`` on
                                          ``std::mt19937(seed)``), so ``reset(seed=s)`` starts as
                                          ``envpool.make(..., seed=s, num_envs=1)`` does
``episodic_life=True``                    a lost life (lives fall and stay above 0) ends the *agent's*
                                          episode in envpool and its next reset keeps the game: NOOPs + FIRE
                                          as above and one frame pushed on the stack. Here the game goes on
                                          (rlviz plays whole games) and the same NOOPs + FIRE follow the step
                                          that lost the life, whose frame and the new one are both pushed: the
                                          agent sees the stack envpool gives after its reset; the action
                                          envpool would ignore at that reset is not asked for
``reward_clip=True``                      training only: the rewards here are the game's (envpool's
                                          ``info["reward"]``, which CleanRL's evaluation sums)
``zero_discount_on_life_loss=False``      nothing to rebuild
========================================  ==================================================================

Rewards during the resets' NOOPs are dropped, as envpool's reset reports 0. A reset without a seed (rlviz's own
seeded resets seed the ALE env underneath) seeds the NOOP generator from the env's seeded generator: the same
episode seed gives the same start, though not envpool's start for that number. With ``reset(seed=s)`` the
observations and rewards are envpool's byte for byte (``scripts/compare_envpool_atari.py``; ``tests/
test_envpool_atari.py`` replays a recorded envpool trace).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from ..errors import EnvError
from .families import family_named, family_of

__all__ = ["EnvpoolAtari", "ENVPOOL_KWARGS", "MAX_EPISODE_STEPS", "envpool_frame", "ale_id"]

#: the ALE env's settings envpool's defaults amount to (frames one at a time: the wrapper skips)
ENVPOOL_KWARGS = {"frameskip": 1, "repeat_action_probability": 0.0, "full_action_space": False,
                  "obs_type": "grayscale"}
MAX_EPISODE_STEPS = 27000  # envpool/atari/registration.py


def ale_id(envpool_id: str) -> str:
    """envpool's ``Breakout-v5`` as gymnasium's ``ALE/Breakout-v5`` (ids already ``ALE/...`` are kept)."""
    ale = family_named("ALE")
    return envpool_id if family_of(envpool_id) is ale else f"{ale.prefixes[0]}{envpool_id}"


def envpool_frame(grey: np.ndarray, size: int = 84) -> np.ndarray:
    """A 210x160 grey screen as envpool stores it: ``INTER_AREA`` resized to [size, size] uint8."""
    import cv2  # (here: importing this module, as render does, loads no cv2)

    return cv2.resize(np.ascontiguousarray(grey), (size, size), interpolation=cv2.INTER_AREA)


class EnvpoolAtari(gym.Wrapper):
    """envpool's Atari pipeline on an ALE env made with :data:`ENVPOOL_KWARGS`: observations [stack, 84, 84]."""

    def __init__(self, env: gym.Env, stack_num: int = 4, frame_skip: int = 4, noop_max: int = 30, img_size: int = 84,
                 episodic_life: bool = True, max_episode_steps: int = MAX_EPISODE_STEPS):
        super().__init__(env)
        shape = env.observation_space.shape
        if shape is None or len(shape) != 2:
            raise EnvError(f"envpool's Atari pipeline needs ALE's grey screens [210, 160]; "
                           f"{env.spec.id if env.spec else env} gives {shape}. Make it with obs_type='grayscale'.")
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]  # an ALE env
        self.fire = meanings.index("FIRE") if "FIRE" in meanings else None
        self.stack_num, self.frame_skip, self.noop_max = int(stack_num), max(1, int(frame_skip)), int(noop_max)
        self.size, self.episodic_life, self.max_steps = int(img_size), bool(episodic_life), int(max_episode_steps)
        self._pool = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]
        self._stack = np.zeros((self.stack_num, self.size, self.size), np.uint8)
        self._lives, self._elapsed = 0, 0
        self._mt = np.random.MT19937(0)
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)

    def _push(self, frame: np.ndarray, push_all: bool = False) -> None:
        small = envpool_frame(frame, self.size)
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = small
        if push_all:
            self._stack[:] = small

    def _noops_and_fire(self, obs: np.ndarray) -> tuple[np.ndarray, bool]:
        """envpool's Reset after the game state is set: NOOPs, FIRE; (screen, whether a new game began)."""
        new_game = False
        for _ in range(self._noop_draw() + 1 - (self.fire is not None)):
            obs, _, terminated, _, _ = self.env.step(0)
            if terminated:
                obs, _ = self.env.reset()
                new_game = True
        if self.fire is not None:
            obs = self.env.step(self.fire)[0]
        return obs, new_game

    def _noop_draw(self) -> int:
        """envpool's ``dist_noop_(gen_)``: libstdc++'s ``uniform_int_distribution(0, noop_max - 1)`` on a
        ``std::mt19937`` (32-bit draws; those at or above the largest multiple of the range are redrawn)."""
        span = self.noop_max
        scaling = 0xFFFFFFFF // span
        while True:
            r = int(self._mt.random_raw())
            if r < span * scaling:
                return r // scaling

    def _seed_noops(self, seed: int | None) -> None:
        """envpool seeds its generator with the env's seed (+ its index in the pool: 0 for one env); without a
        seed (rlviz's cheap seeded resets seed the ALE env underneath), one is drawn from the env's generator."""
        noop_seed = seed if seed is not None else int(self.env.unwrapped.np_random.integers(1 << 32))
        self._mt = np.random.MT19937()
        self._mt._legacy_seeding(int(noop_seed) & 0xFFFFFFFF)  # std::mt19937(seed)'s state

    def reset(self, *, seed: int | None = None, options=None):
        self._seed_noops(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        obs, _ = self._noops_and_fire(obs)
        self._pool[0] = np.array(obs, np.uint8)
        self._push(self._pool[0], push_all=True)
        self._lives, self._elapsed = self._ale_lives(), 0
        return self._stack.copy(), {**info, "lives": self._lives}

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action):
        reward, terminated, truncated, info = 0.0, False, False, {}
        played = 0
        for k in range(self.frame_skip, 0, -1):
            obs, r, terminated, trunc, info = self.env.step(action)
            reward, played, truncated = reward + float(r), played + 1, truncated or bool(trunc)
            if k <= min(self.frame_skip, 2):
                self._pool[min(self.frame_skip, 2) - k] = np.array(obs, np.uint8)
            if terminated or trunc:
                break
        if self.frame_skip > 1 and played == self.frame_skip:
            np.maximum(self._pool[0], self._pool[1], out=self._pool[0])
        self._push(self._pool[0])
        self._elapsed += 1
        truncated = truncated or (self._elapsed >= self.max_steps and not terminated)
        lives = self._ale_lives()
        if self.episodic_life and not (terminated or truncated) and 0 < lives < self._lives:
            obs, new_game = self._noops_and_fire(self._pool[0])
            self._pool[0] = np.array(obs, np.uint8)
            self._push(self._pool[0], push_all=new_game)
            lives = self._ale_lives()
        self._lives = lives
        return self._stack.copy(), reward, bool(terminated), bool(truncated), {**info, "lives": lives}
