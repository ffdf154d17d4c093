"""rlviz's rebuild of envpool's Atari observations (rlviz/envs/envpool_atari.py) against the preprocessing it
documents, computed here independently from the game's RGB frames on a second env restored to the same ALE state:
ALE's grey palette = round(0.2989 R + 0.5870 G + 0.1140 B), the max of the last two of 4 repeated frames, an
INTER_AREA resize to 84x84, 4 frames stacked oldest first. envpool itself does not run here."""

from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np

from rlviz.envs.envpool_atari import ENVPOOL_KWARGS, EnvpoolAtari
from rlviz.envs.recipe import make_env, register_envs
from rlviz.sources.cleanrl.jax_files import envpool_recipe

GAME = "ALE/Breakout-v5"


def _raw():
    register_envs(GAME)
    return gym.make(GAME, render_mode="rgb_array", **ENVPOOL_KWARGS)


def grey(rgb: np.ndarray) -> np.ndarray:
    return np.round(rgb.astype(np.float64) @ np.array([0.2989, 0.5870, 0.1140])).astype(np.uint8)


def small(g: np.ndarray) -> np.ndarray:
    return cv2.resize(g, (84, 84), interpolation=cv2.INTER_AREA)


def test_recipe_is_envpools_settings():
    env = make_env(envpool_recipe("Breakout-v5"), render_mode=None)
    try:
        assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
        u = env.unwrapped
        assert u.spec.id == GAME
        assert float(u.ale.getFloat("repeat_action_probability")) == 0.0
        assert env.action_space.n == 4  # the minimal action set
    finally:
        env.close()


def test_reset_fills_the_stack_with_the_fired_frame():
    env = EnvpoolAtari(_raw())
    obs, info = env.reset(seed=3)
    frame = env.unwrapped.render()
    assert grey(frame).shape == (210, 160)
    assert np.array_equal(env.unwrapped.ale.getScreenGrayscale(), grey(frame))  # the grey weights
    for k in range(4):
        assert np.array_equal(obs[k], small(grey(frame)))
    assert info["lives"] == 5


def test_step_observation_matches_the_documented_preprocessing():
    env, twin = EnvpoolAtari(_raw()), _raw()
    twin.reset(seed=0)
    obs, _ = env.reset(seed=7)
    rng = np.random.default_rng(0)
    checked = 0
    for t in range(60):
        action = int(rng.integers(0, 4))
        state = env.unwrapped.ale.cloneState()
        lives = env.unwrapped.ale.lives()
        prev = obs
        obs, _, terminated, truncated, info = env.step(action)
        if info["lives"] < lives or terminated or truncated:
            break  # a life-loss reset follows: checked in the next test
        twin.unwrapped.ale.restoreState(state)
        frames = []
        for _ in range(4):  # frame skip 4, the action repeated
            twin.step(action)
            frames.append(grey(twin.render()))
        expected = small(np.maximum(frames[2], frames[3]))  # max-pool of the last two
        assert np.array_equal(obs[-1], expected), t
        assert np.array_equal(obs[:-1], prev[1:])  # oldest first, newest last
        checked += 1
    assert checked >= 20


def test_a_lost_life_is_followed_by_noops_and_fire_and_the_game_goes_on():
    env = EnvpoolAtari(_raw())
    obs, info = env.reset(seed=1)
    lives, steps, terminated, truncated = [info["lives"]], 0, False, False
    while not (terminated or truncated) and steps < 27000:
        obs, _, terminated, truncated, info = env.step(0)  # NOOP only: the ball is served by the resets' FIRE
        lives.append(info["lives"])
        steps += 1
    assert terminated and not truncated and lives[-1] == 0
    assert sorted(set(lives), reverse=True) == [5, 4, 3, 2, 1, 0]
    assert steps < 5000


class _Continuing(EnvpoolAtari):
    """As envpool's pool env: a game over's reset (no seed) keeps drawing NOOP counts from the same generator."""

    def _seed_noops(self, seed):
        if seed is not None:
            super()._seed_noops(seed)


def test_observations_equal_envpools_own():
    """envpool's observations, recorded by scripts/compare_envpool_atari.py (envpool 1.2.5, ``Breakout-v5`` made
    as CleanRL makes it with seed 5, 400 random actions through 13 resets: the first, between lives, after a game
    over): rlviz's wrapper reset with the same seed returns the same [4, 84, 84] stacks, byte for byte (its NOOP
    counts drawn as envpool draws them)."""
    from pathlib import Path

    trace = np.load(Path(__file__).resolve().parent / "fixtures" / "cleanrl_jax" / "envpool_breakout_trace.npz")
    assert str(trace["game"]) == "Breakout-v5" and len(trace["calls"]) > 300 and trace["calls"][1:, 0].sum() >= 1
    env = _Continuing(_raw())
    for i, ((reset, action), expected) in enumerate(zip(trace["calls"], trace["obs"])):
        if reset:
            obs = env.reset(seed=int(trace["seed"]) if i == 0 else None)[0]
        else:
            obs = env.step(int(action))[0]
        assert np.array_equal(obs, expected), f"call {i}"


def test_envpools_noop_counts_for_a_seed():
    """envpool's NOOP counts for seed 5 (Breakout has FIRE: 0..29 NOOPs), which the trace above shows it drew."""
    env = EnvpoolAtari(_raw())
    env._seed_noops(5)
    assert [env._noop_draw() for _ in range(13)] == [6, 1, 26, 24, 6, 10, 27, 29, 14, 2, 18, 11, 22]
