"""gymnasium 0.29.1 and 1.x behind one set of names (``rlviz.envs.compat``): the wrappers rebuilt for 0.29 give the
observations gymnasium 1.x's own give, bit for bit, on real ALE and classic-control envs. Under 1.x the two are
compared directly; under 0.29 (`.ci/run`'s second venv) the recipes run through the rebuilt ones."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlviz.envs import atari_recipe, make_env, make_vec_env, register_envs
from rlviz.envs.compat import GYMNASIUM_1, FrameStackObservation, GrayscaleObservation, frame_stack, grayscale
from rlviz.errors import UsageError

pytestmark = pytest.mark.compat
register_envs("ALE/Pong-v5")

needs_1x = pytest.mark.skipif(not GYMNASIUM_1, reason="compares with gymnasium 1.x's own wrappers")


def _run(env, seed: int, steps: int, actions: list[int] | None = None):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    rng = np.random.default_rng(seed)
    for t in range(steps):
        a = actions[t] if actions else int(rng.integers(env.action_space.n))
        obs, _, term, trunc, _ = env.step(a)
        out.append(obs)
        if term or trunc:
            out.append(env.reset(seed=seed + 1 + t)[0])
    return out


@needs_1x
@pytest.mark.parametrize("padding_type", ["reset", "zero"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "ALE/Pong-v5"])
def test_frame_stack_equals_gymnasium_1x(env_id, padding_type):
    ours = FrameStackObservation(gym.make(env_id), 4, padding_type=padding_type)
    theirs = gym.wrappers.FrameStackObservation(gym.make(env_id), 4, padding_type=padding_type)
    assert ours.observation_space == theirs.observation_space
    steps = 40 if env_id == "CartPole-v1" else 12
    for a, b in zip(_run(ours, 3, steps), _run(theirs, 3, steps)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@needs_1x
@pytest.mark.parametrize("keep_dim", [False, True])
def test_grayscale_equals_gymnasium_1x(keep_dim):
    ours = GrayscaleObservation(gym.make("ALE/Breakout-v5"), keep_dim=keep_dim)
    theirs = gym.wrappers.GrayscaleObservation(gym.make("ALE/Breakout-v5"), keep_dim=keep_dim)
    assert ours.observation_space == theirs.observation_space
    for a, b in zip(_run(ours, 5, 10), _run(theirs, 5, 10)):
        assert a.dtype == b.dtype == np.uint8
        np.testing.assert_array_equal(a, b)


def test_frame_stack_pads_with_the_reset_observation_and_keeps_the_dtype():
    env = frame_stack(gym.make("CartPole-v1"), stack_size=3)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, 4) and obs.dtype == np.float32 and isinstance(obs, np.ndarray)
    np.testing.assert_array_equal(obs[0], obs[2])
    nxt, *_ = env.step(0)
    np.testing.assert_array_equal(nxt[:2], obs[1:])  # oldest first, rolled by one
    assert not np.array_equal(nxt[2], obs[2])


def test_grayscale_weights_truncate_as_1x_does():
    env = grayscale(gym.make("ALE/Breakout-v5"))
    obs, _ = env.reset(seed=0)
    rgb = env.unwrapped.ale.getScreenRGB()
    want = (rgb[..., 0] * 0.2125 + rgb[..., 1] * 0.7154 + rgb[..., 2] * 0.0721).astype(np.uint8)
    np.testing.assert_array_equal(obs, want)


def test_the_rebuilt_wrappers_refuse_what_they_cannot_take():
    with pytest.raises(UsageError, match="positive"):
        FrameStackObservation(gym.make("CartPole-v1"), 0)
    with pytest.raises(UsageError, match="padding_type"):
        FrameStackObservation(gym.make("CartPole-v1"), 2, padding_type="last")
    with pytest.raises(UsageError, match="RGB"):
        GrayscaleObservation(gym.make("CartPole-v1"))


def test_cleanrl_atari_recipe_gives_84x84x4_uint8_frames_under_this_gymnasium():
    env = make_env(atari_recipe("ALE/Breakout-v5"))
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs[0], obs[3])  # reset padding


def test_make_vec_env_resets_in_the_same_step_under_either_version():
    envs = make_vec_env("CartPole-v1", 2, render_mode=None)
    envs.reset(seed=0)
    for _ in range(500):
        obs, _, term, trunc, info = envs.step(np.zeros(2, np.int64))  # always left: falls within ~10 steps
        if (term | trunc).any():
            i = int(np.flatnonzero(term | trunc)[0])
            final = info["final_obs"][i] if "final_obs" in info else info["final_observation"][i]
            assert final is not None and not np.array_equal(final, obs[i])  # obs[i] is already the next reset
            assert np.all(np.abs(obs[i]) <= 0.05)  # CartPole's reset state
            break
    else:
        pytest.fail("no episode ended in 500 steps")
    envs.close()
