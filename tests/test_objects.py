import numpy as np
import pytest

from rlviz.envs import make_env, to_rgb_frame
from rlviz.errors import UsageError
from rlviz.evaluate.failures.objects import (
    FunctionExtractor,
    MinAtarExtractor,
    MotionExtractor,
    StateExtractor,
    breakout_extractor,
    extractor_for,
    load_extractor,
    pong_extractor,
)

RED = np.array([200, 72, 72], dtype=np.uint8)


def test_minatar_breakout_masks_match_state_channels():
    env = make_env("MinAtar/Breakout-v1")
    ex = extractor_for("MinAtar/Breakout-v1")
    assert isinstance(ex, MinAtarExtractor) and ex.needs_frame is False
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        state = env.unwrapped.game.state()
        frame = to_rgb_frame(env.render())
        m = ex(frame, env)
        assert set(m) == {"ball", "paddle"} and m["ball"].shape == frame.shape[:2] == (10, 10)
        ch = env.unwrapped.game.env.channels
        assert np.array_equal(m["ball"], state[:, :, ch["ball"]])
        assert np.array_equal(m["paddle"], state[:, :, ch["paddle"]])
        assert m["ball"].sum() == 1 and m["paddle"].sum() == 1 and m["paddle"][9].any()
        _, _, term, _, _ = env.step(int(rng.integers(3)))
        if term:
            env.reset()
    # all channels by default for other MinAtar games; integer upscaling to a bigger frame
    full = MinAtarExtractor(frame_shape=(20, 30))
    m = full(None, env)
    assert set(m) == {"paddle", "ball", "trail", "brick"} and m["brick"].shape == (20, 30)
    assert m["ball"].sum() == 6


def _ram_positions(env):
    ram = env.unwrapped.ale.getRAM()
    return int(ram[101]) + 9, int(ram[99]) - 49, int(ram[72]) - 47


def test_breakout_ball_and_paddle_land_on_their_pixels():
    env = make_env("ALE/Breakout-v5")
    ex = breakout_extractor()
    env.reset(seed=4)
    rng = np.random.default_rng(1)
    seen_ball = agree = 0
    for _ in range(150):
        frame = env.render()
        m = ex(frame, env)
        assert np.array_equal(m["ball"], ex(None, env)["ball"])  # screen read == render
        for name in ("ball", "paddle"):
            assert (frame[m[name]] == RED).all()
        assert not (m["ball"] & m["paddle"]).any()
        ys, xs = np.nonzero(m["paddle"])
        assert ys.min() == 189 and ys.max() == 192 and xs.max() - xs.min() + 1 >= 4
        row, col, pcol = _ram_positions(env)
        assert xs.min() == max(pcol, 8)
        if m["ball"].any():
            seen_ball += 1
            by, bx = np.nonzero(m["ball"])
            agree += (by.min(), bx.min()) == (row, col) and m["ball"].sum() <= 8
        _, _, term, trunc, _ = env.step(int(rng.integers(4)))
        if term or trunc:
            env.reset()
    assert seen_ball > 50 and agree >= 0.9 * seen_ball  # a few frames: ball half drawn


def test_pong_ball_and_own_paddle():
    env = make_env("ALE/Pong-v5")
    ex = extractor_for("ALE/Pong-v5")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(120):
        frame = env.render()
        m = ex(frame, env)
        assert (frame[m["ball"]] == (236, 236, 236)).all() and (frame[m["paddle"]] == (92, 186, 92)).all()
        ys, xs = np.nonzero(m["paddle"])
        assert len(xs) and xs.min() == 140 and xs.max() == 143  # own paddle, right side; no score digits
        if m["ball"].any():
            seen += 1
            by, bx = np.nonzero(m["ball"])
            assert bx.min() == int(env.unwrapped.ale.getRAM()[49]) - 49
        env.step(int(rng.integers(6)))
    assert seen > 30
    assert isinstance(pong_extractor(), type(ex))


def test_motion_extractor_marks_the_moved_object():
    ex = MotionExtractor()
    env = object()
    f0 = np.zeros((8, 8, 3), np.uint8)
    f0[2, 2] = 255
    f1 = np.zeros((8, 8, 3), np.uint8)
    f1[2, 3] = 255
    assert not ex(f0, env)["moving"].any()  # first frame: nothing known to move
    m = ex(f1, env)["moving"]
    assert m[2, 3] and m.sum() == 1
    ex.begin_episode(env)
    assert not ex(f1, env)["moving"].any()


def test_packed_pixels_are_rgb_integers():
    from rlviz.evaluate.failures.objects import _packed

    f = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    want = (f[..., 0].astype(np.int64) << 16) | (f[..., 1].astype(np.int64) << 8) | f[..., 2]
    assert np.array_equal(_packed(f).astype(np.int64), want)


def test_load_extractor_and_errors():
    ex = load_extractor("_envs:probe_objects")
    assert isinstance(ex, FunctionExtractor)
    f = np.zeros((16, 16, 3), np.uint8)
    f[1, 2] = (255, 0, 0)
    assert np.argwhere(ex(f, None)["obj"]).tolist() == [[1, 2]]
    with pytest.raises(UsageError, match="module:function"):
        load_extractor("nocolon")
    with pytest.raises(UsageError, match="Cannot load"):
        load_extractor("_envs:nope")
    assert isinstance(extractor_for("BipedalWalker-v3"), MotionExtractor)  # no exact extractor: pixels
    assert isinstance(extractor_for("CartPole-v1"), StateExtractor)
