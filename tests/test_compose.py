"""Compositor: canvas geometry, the numbers per frame, and the drawn panel read back from the pixels."""

from __future__ import annotations

import numpy as np
import pytest

from rlviz.agent.policy import relative_entropy
from rlviz.draw.compose import COLORS, ComposeOptions, Compositor, fast_blend
from rlviz.draw.overlay import ACTOR_COLOR, blend, saliency_to_frame
from rlviz.draw.video import write_episode_video
from rlviz.episode import EpisodeInternals, EpisodeTrace, returns_to_go
from rlviz.errors import UsageError
from rlviz.media.video import probe_video, read_video

NAMES = ("NOOP", "FIRE", "RIGHT", "LEFT")


def episode(T=5, hw=(10, 10), A=4, kind="actor_critic", probs=None, logits=None, value="random", rewards=None,
            saliency=None, frames=None, gamma=0.5, seed=0):
    """A hand-built EpisodeTrace + EpisodeInternals (no env, no recorder)."""
    rng = np.random.default_rng(seed)
    if frames is None:
        frames = rng.integers(0, 256, (T + 1, *hw, 3), dtype=np.uint8)
    if logits is None:
        logits = rng.normal(size=(T + 1, A)).astype(np.float32)
    if probs is None:
        e = np.exp(logits - logits.max(1, keepdims=True))
        probs = (e / e.sum(1, keepdims=True)).astype(np.float32)
    rewards = np.zeros(T, np.float32) if rewards is None else np.asarray(rewards, np.float32)
    if isinstance(value, str):
        value = None if kind == "logits" else rng.normal(size=T + 1).astype(np.float32)
    names = NAMES if A == 4 else tuple(f"ACTION{i}" for i in range(A))
    trace = EpisodeTrace(
        frames=frames, observations=np.zeros((T + 1, 2), np.float32), actions=(np.arange(T) % A).astype(np.int64),
        rewards=rewards, lives=np.arange(T + 1, 0, -1).astype(np.int32), terminated=True, truncated=False,
        action_names=names, episode_id=0, seed=1, fps=15.0, env_id="Hand-v0",
    )
    internals = EpisodeInternals(
        logits=np.asarray(logits, np.float32), probs=np.asarray(probs, np.float32), value=value,
        entropy=relative_entropy(probs), returns_to_go=returns_to_go(rewards, gamma), gamma=gamma, kind=kind,
        saliency=saliency, saliency_label="gradient (actor)" if saliency is not None else "",
    )
    return trace, internals


def row_pixels(img, comp, a):
    """The pixels along the middle line of action a's bar track."""
    L = comp.layout
    y = L.bar_rows[a] + L.bar_h // 2
    return img[y, L.bar_x0 : L.bar_x0 + L.bar_len]


def run_of(row, color):
    """(start, length) of the pixels equal to color; asserts they form one contiguous run."""
    idx = np.flatnonzero((row == np.array(color, np.uint8)).all(-1))
    if idx.size == 0:
        return 0, 0
    assert idx[-1] - idx[0] + 1 == idx.size, "bar pixels are not contiguous"
    return int(idx[0]), int(idx.size)


@pytest.mark.parametrize("hw, scale", [((10, 10), 48), ((210, 160), 2), ((400, 600), 1)])
def test_canvas_is_a_multiple_of_16(hw, scale):
    trace, internals = episode(T=3, hw=hw)
    comp = Compositor(trace, internals)
    w, h = comp.size
    assert w % 16 == 0 and h % 16 == 0
    assert comp.layout.scale == scale
    assert w >= hw[1] * scale + ComposeOptions().panel_width and h >= hw[0] * scale
    img = comp.render(3)
    assert img.shape == (h, w, 3) and img.dtype == np.uint8


def test_many_actions_grow_the_canvas_and_keep_16():
    trace, internals = episode(T=3, hw=(210, 160), A=18)
    comp = Compositor(trace, internals)
    w, h = comp.size
    assert h > 480 and h % 16 == 0 and w % 16 == 0
    assert comp.layout.bar_rows[-1] + comp.layout.bar_h < comp.layout.plot[1]  # bars do not overlap the plot


def test_panel_data_numbers():
    probs = np.tile(np.array([0.1, 0.6, 0.2, 0.1], np.float32), (6, 1))
    value = np.array([0.5, -1.0, 2.0, 0.0, 1.0, 3.0], np.float32)
    trace, internals = episode(T=5, probs=probs, value=value, rewards=[0, 1, 0, 0, 2], gamma=0.5)
    comp = Compositor(trace, internals)
    rtg = [0.625, 1.25, 0.5, 1.0, 2.0, 0.0]
    so_far = [0, 0, 1, 1, 1, 3]
    for t in range(6):
        d = comp.panel_data(t)
        assert (d.t, d.num_steps, d.kind) == (t, 5, "actor_critic")
        assert d.return_to_go == pytest.approx(rtg[t]) and d.return_so_far == so_far[t]
        assert d.value == value[t] and d.lives == 6 - t
        assert d.entropy == pytest.approx(float(relative_entropy(probs[t])))
        np.testing.assert_array_equal(d.probs, probs[t])
        if t < 5:
            assert d.action == t % 4 and d.action_name == NAMES[t % 4]
    last = comp.panel_data(5)
    assert last.action is None and last.action_name is None
    with pytest.raises(UsageError, match="0..5"):
        comp.panel_data(6)


def test_probability_bars_are_drawn_to_scale():
    probs = np.array([[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.0, 0.2], [1, 0, 0, 0]], np.float32)
    trace, internals = episode(T=3, probs=probs)
    comp = Compositor(trace, internals)
    n = comp.layout.bar_len
    for t in range(3):
        img = comp.render(t)
        chosen = int(trace.actions[t])
        for a in range(4):
            row = row_pixels(img, comp, a)
            color = COLORS["chosen"] if a == chosen else COLORS["bar"]
            other = COLORS["bar"] if a == chosen else COLORS["chosen"]
            assert run_of(row, color) == (0, int(round(probs[t, a] * n))) if probs[t, a] > 0 else (0, 0)
            assert run_of(row, other) == (0, 0)
    # the last frame has no action: nothing is highlighted
    img = comp.render(3)
    assert run_of(row_pixels(img, comp, 0), COLORS["bar"]) == (0, n)
    L = comp.layout
    bars = img[L.bar_rows[0] : L.bar_rows[-1] + L.bar_h, L.bar_x0 : L.bar_x0 + L.bar_len]
    assert not (bars == np.array(COLORS["chosen"], np.uint8)).all(-1).any()


def test_q_value_bars_start_at_zero():
    q = np.array([[-1.0, 2.0, 0.5, 0.0]] * 3, np.float32)
    probs = np.eye(4, dtype=np.float32)[q.argmax(1)]
    trace, internals = episode(T=2, kind="q", logits=q, probs=probs, value=q.max(1))
    comp = Compositor(trace, internals)
    n = comp.layout.bar_len
    zero = int(round(1 / 3 * n))  # episode range is [-1, 2]
    img = comp.render(1)  # action 1 chosen
    assert run_of(row_pixels(img, comp, 1), COLORS["chosen"]) == (zero, n - zero)
    assert run_of(row_pixels(img, comp, 0), COLORS["bar"]) == (0, zero)
    assert run_of(row_pixels(img, comp, 2), COLORS["bar"]) == (zero, int(round(1.5 / 3 * n)) - zero)
    assert run_of(row_pixels(img, comp, 3), COLORS["bar"]) == (0, 0)
    assert comp.panel_data(1).value == 2.0


def test_game_frame_is_an_exact_integer_upscale():
    trace, internals = episode(T=2, hw=(210, 160))
    comp = Compositor(trace, internals)
    x, y, w, h = comp.layout.game
    img = comp.render(2)
    expected = np.repeat(np.repeat(trace.frames[2], 2, axis=0), 2, axis=1)
    np.testing.assert_array_equal(img[y : y + h, x : x + w], expected)


def test_saliency_overlay_grid_world_tints_one_cell():
    frames = np.full((3, 10, 10, 3), 100, np.uint8)
    sal = np.zeros((3, 10, 10), np.float32)
    sal[1, 2, 3] = 1.0
    trace, internals = episode(T=2, frames=frames, saliency=sal)
    comp = Compositor(trace, internals)
    x, y, w, h = comp.layout.game
    game = comp.render(1)[y : y + h, x : x + w].astype(int)
    tint = blend(frames[1, :1, :1], np.ones((1, 1), np.float32))[0, 0].astype(int)
    k = 48
    cell = game[2 * k : 3 * k, 3 * k : 4 * k]
    assert np.abs(cell - tint).max() <= 1 and np.abs(tint - 100).max() > 20
    mask = np.ones((10 * k, 10 * k), bool)
    mask[2 * k : 3 * k, 3 * k : 4 * k] = False
    assert (game[mask] == 100).all()
    assert (comp.render(0)[y : y + h, x : x + w] == 100).all()  # zero saliency: untouched


def test_saliency_overlay_atari_matches_overlay_blend():
    rng = np.random.default_rng(3)
    sal = rng.random((3, 84, 84)).astype(np.float32)
    trace, internals = episode(T=2, hw=(210, 160), saliency=sal)
    comp = Compositor(trace, internals)
    x, y, w, h = comp.layout.game
    ref = blend(trace.frames[2], saliency_to_frame(sal[2], (210, 160), "linear"))
    ref = np.repeat(np.repeat(ref, 2, axis=0), 2, axis=1)
    got = comp.render(2)[y : y + h, x : x + w]
    assert np.abs(got.astype(int) - ref).max() <= 1
    assert np.abs(got.astype(int) - np.repeat(np.repeat(trace.frames[2], 2, 0), 2, 1)).mean() > 10


def test_fast_blend_matches_overlay_blend():
    rng = np.random.default_rng(4)
    frame = rng.integers(0, 256, (21, 16, 3), dtype=np.uint8)
    heat = rng.random((21, 16)).astype(np.float32) * 1.4 - 0.2  # also out of [0, 1]
    color = np.empty_like(frame)
    color[:] = ACTOR_COLOR
    assert np.abs(fast_blend(frame, heat, color, 0.65).astype(int) - blend(frame, heat, ACTOR_COLOR, 0.65)).max() <= 1


def test_value_traces_are_revealed_up_to_t_and_rewards_marked():
    T = 40
    rewards = np.zeros(T, np.float32)
    rewards[[9, 29]] = 1.0
    value = np.linspace(-1, 2, T + 1).astype(np.float32)
    trace, internals = episode(T=T, value=value, rewards=rewards, gamma=0.9)
    comp = Compositor(trace, internals)
    px, py, pw, ph = comp.layout.plot
    start, mid, end = comp.render(0), comp.render(20), comp.render(T)
    xt = comp.x_of(20)
    band = slice(py, py + ph + 8)
    # right of the cursor (and its dot) nothing has been drawn yet; left of it the traces are there
    np.testing.assert_array_equal(mid[band, xt + 5 : px + pw], start[band, xt + 5 : px + pw])
    assert (mid[band, px + 4 : xt - 4] != start[band, px + 4 : xt - 4]).any(-1).sum() > 40
    value_px = (mid[band, px : px + pw] == np.array(COLORS["value"], np.uint8)).all(-1)
    assert value_px.any() and not value_px[:, xt + 5 - px :].any()
    # reward ticks at frames 10 and 30 (the reward arrives with the next frame), only once reached
    tick_y = py + ph + 4
    green = np.array(COLORS["reward"], np.uint8)
    assert (end[tick_y, comp.x_of(10)] == green).all() and (end[tick_y, comp.x_of(30)] == green).all()
    assert (mid[tick_y, comp.x_of(10)] == green).all() and not (mid[tick_y, comp.x_of(30)] == green).all()
    assert (end[tick_y, px:px + pw] == green).all(-1).sum() == 2


def test_no_value_head_renders_return_to_go_only():
    trace, internals = episode(T=4, kind="logits", rewards=[0, 1, 0, 1])
    comp = Compositor(trace, internals)
    assert comp.panel_data(2).value is None
    img = comp.render(4)
    px, py, pw, ph = comp.layout.plot
    assert not (img[py : py + ph, px : px + pw] == np.array(COLORS["value"], np.uint8)).all(-1).any()


def test_inconsistent_inputs_are_refused():
    trace, internals = episode(T=5)
    short = EpisodeInternals(internals.logits[:5], internals.probs[:5], internals.value, "actor_critic",
                             entropy=internals.entropy, returns_to_go=internals.returns_to_go, gamma=0.5)
    with pytest.raises(UsageError, match="6 entries"):
        Compositor(trace, short)
    comp = Compositor(trace, internals)
    with pytest.raises(UsageError, match="out="):
        comp.render(0, out=np.zeros((10, 10, 3), np.uint8))


def test_write_episode_video_streams_every_frame(tmp_path):
    T = 9
    y, x = np.mgrid[0:10, 0:10]
    frames = np.stack([np.stack([x * 20 + t, y * 20, np.full_like(x, 90)], -1) for t in range(T + 1)]).astype(np.uint8)
    trace, internals = episode(T=T, frames=frames)
    out = write_episode_video(trace, internals, tmp_path / "ep.mp4")
    comp = Compositor(trace, internals)
    info = probe_video(out)
    assert (info.codec, info.pix_fmt, info.num_frames) == ("h264", "yuv420p", T + 1)
    assert (info.width, info.height) == comp.size and info.fps == pytest.approx(15.0)
    for t, frame in enumerate(read_video(out)):
        if t in (0, 4, T):
            assert np.abs(frame.astype(int) - comp.render(t)).mean() < 4.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep.mp4"]


def test_short_episodes_play_slower_and_hold_their_last_frame(tmp_path):
    from rlviz.draw.compose import ComposeOptions
    from rlviz.draw.video import video_timing

    assert video_timing(8, 30.0, 2.0) == (7.5, 7)  # 7 steps: down to a quarter of the rate, last frame held to 2 s
    assert video_timing(16, 30.0, 2.0) == (8.0, 0)  # 15 steps: 8 fps is enough
    assert video_timing(61, 30.0, 2.0) == (30.0, 0) and video_timing(8, 30.0) == (30.0, 0)
    T = 7
    trace, internals = episode(T=T)
    out = write_episode_video(trace, internals, tmp_path / "ep.mp4", options=ComposeOptions(min_seconds=2.0),
                              fps=30.0)
    info = probe_video(out)
    assert info.num_frames == 15 and info.fps == pytest.approx(7.5)
    frames = list(read_video(out))
    comp = Compositor(trace, internals)
    for t in (0, T):  # frame t is still step t
        assert np.abs(frames[t].astype(int) - comp.render(t)).mean() < 4.0
    for held in frames[T + 1 :]:
        assert np.abs(held.astype(int) - frames[T]).mean() < 1.0


def test_a_mission_adds_a_band_under_the_header_and_moves_the_panel_down_by_its_height():
    from dataclasses import replace

    trace, internals = episode(T=4)
    plain = Compositor(trace, internals)
    told = Compositor(replace(trace, mission="get to the green goal square"), internals)
    L0, L1 = plain.layout, told.layout
    assert L0.mission is None and L0.mission_lines == ()
    assert L1.mission_lines == ("mission: get to the green goal square",)
    x, y, w, h = L1.mission
    assert (x, y, w) == (L0.panel_x + 12, 12 + 3 * plain._lh, 400 - 24) and h == plain._lh + 4
    assert [r - h for r in L1.bar_rows] == list(L0.bar_rows) and L1.plot[1] - h == L0.plot[1]
    a, b = plain.render(2), told.render(2)
    px = L0.panel_x
    np.testing.assert_array_equal(a[:y, px:], b[:y, px:])  # the header is the same
    band = b[y : y + h, px:]
    assert (band != np.array(COLORS["background"], np.uint8)).any(-1).sum() > 100  # the mission's text
    assert not np.array_equal(band, a[y : y + h, px:])
    end = L0.entropy_bar[1] + L0.entropy_bar[3] + 4  # the bars, the value plot and the entropy bar: moved down by h
    assert end + h < L1.height - 12 - plain._lh  # (above the bottom line, "saliency: off | env")
    np.testing.assert_array_equal(a[y:end, px:], b[y + h : end + h, px:])
    (_, y0, gw, gh), (_, y1, _, _) = L0.game, L1.game  # the game is untouched (centred on a taller canvas)
    np.testing.assert_array_equal(a[y0 : y0 + gh, :gw], b[y1 : y1 + gh, :gw])


def test_a_long_mission_wraps_on_at_most_three_lines():
    from rlviz.draw.style import text_width, wrap_text

    words = "pick up the purple key then open the red door and put the grey ball next to the blue box " * 3
    lines = wrap_text(words, 376, 0.45)
    assert len(lines) == 3 and lines[-1].endswith("...")
    assert all(text_width(s, 0.45) <= 376 for s in lines)
    assert " ".join(lines[:2]).split() == words.split()[: len(" ".join(lines[:2]).split())]
