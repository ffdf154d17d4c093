"""Saliency drawn in the multi-agent video's columns: each agent's observation thumbnail tinted by its saliency map
(rlviz.draw.panels_agents, rlviz.record.agents.video, ``rlviz render --saliency`` on a PettingZoo env id)."""

from __future__ import annotations

import numpy as np
import pytest

from rlviz.draw.overlay import ACTOR_COLOR, blend, saliency_to_frame
from rlviz.draw.panels_agents import AgentsCompositor, AgentTimeline


def _timeline(name: str, thumbs: np.ndarray, saliency: np.ndarray | None) -> AgentTimeline:
    k = len(thumbs) - 1
    frames = k + 1
    return AgentTimeline(name, None, np.zeros(k, np.int64), ("a", "b", "c"), np.arange(frames),
                         np.r_[np.ones(k, bool), False], np.zeros(frames), -1, thumbs, saliency)


def test_each_columns_thumbnail_is_tinted_by_its_own_saliency_and_nothing_else_changes():
    rng = np.random.default_rng(0)
    thumbs = [rng.integers(0, 200, (4, 96, 96, 3), dtype=np.uint8) for _ in range(3)]
    maps = [rng.random((4, 16, 16)).astype(np.float32) for _ in range(3)]
    maps[1][:] = 0.0  # an agent whose saliency is zero everywhere: its thumbnail is untouched
    frame = rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)
    plain = AgentsCompositor((60, 80), [_timeline(f"p{i}", t, None) for i, t in enumerate(thumbs)])
    tinted = AgentsCompositor((60, 80), [_timeline(f"p{i}", t, m) for i, (t, m) in enumerate(zip(thumbs, maps))])
    for t in range(4):
        a, b = plain.render(t, frame), tinted.render(t, frame)
        changed = np.zeros(a.shape[:2], bool)
        for i, cell in enumerate(tinted.cells):
            x, y = cell.x, cell.thumb_y
            box = (slice(y, y + 96), slice(x, x + 96))
            assert np.array_equal(a[box], thumbs[i][t])
            expected = blend(thumbs[i][t], saliency_to_frame(maps[i][t], (96, 96)), ACTOR_COLOR)
            assert np.array_equal(b[box], expected)
            changed[box] = True
        assert np.array_equal(a[~changed], b[~changed])  # the frame, the text, the other columns: the same pixels
        assert not np.array_equal(a, b)


def test_render_with_saliency_tints_every_agents_thumbnail_in_the_decoded_video(tmp_path):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pymunk")
    pytest.importorskip("supersuit")
    torch = pytest.importorskip("torch")
    from test_render_agents import AGENTS, Agent, _recipe, _rows

    from rlviz.jobs.render import render
    from rlviz.media import read_video
    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(1)
    ckpt = save_checkpoint(tmp_path / "agent.pt2", Agent(), env=_recipe())
    runs = {}
    for name, saliency in (("plain", None), ("saliency", "gradient")):
        render(checkpoint=str(ckpt), episodes=1, videos="first:1", saliency=saliency, out=str(tmp_path / name))
        runs[name] = [f.astype(np.int16) for f in read_video(tmp_path / name / "videos" / "first-episode-0.mp4")]
    steps = int(_rows(tmp_path / "plain" / "episodes.csv")[0]["steps"])
    assert len(runs["plain"]) == len(runs["saliency"]) == steps + 1
    game_w = 80 + 40 * len(AGENTS)  # pistonball's frame (shown at scale 1), then a 220-pixel column per agent
    for a, b in zip(runs["plain"], runs["saliency"]):
        diff = np.abs(a - b).max(axis=2)
        assert diff[:, :game_w].mean() < 1.0  # the shared frame: the same (up to the codec)
        for i in range(len(AGENTS)):
            col = diff[:, game_w + 220 * i: game_w + 220 * (i + 1)]
            ys, xs = np.nonzero(col > 48)
            assert ys.size > 0, f"column {i}: no tint"
            # the change is the thumbnail's (16x16 observations at 6x: 96 x 96, 8 px in), not the rest of the column
            assert ys.max() - ys.min() < 96 + 8 and xs.min() >= 8 - 4 and xs.max() < 8 + 96 + 4
            box = (slice(ys.min(), ys.min() + 96), slice(game_w + 220 * i + 8, game_w + 220 * i + 104))
            amber_a, amber_b = (float((f[box][..., 0] - f[box][..., 2]).mean()) for f in (a, b))
            assert amber_b > amber_a + 5  # tinted towards amber (red up, blue down)


def test_a_recorder_with_saliency_and_no_policy_is_refused_in_one_line(tmp_path):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pymunk")
    from rlviz.envs.pettingzoo_envs import make_agents_env
    from rlviz.envs.recipe import pettingzoo_recipe
    from rlviz.errors import UsageError
    from rlviz.record import RecordOptions
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode

    env = make_agents_env(pettingzoo_recipe("pistonball_v6", {"n_pistons": 3, "max_cycles": 5}), render_mode="rgb_array")
    with pytest.raises(UsageError, match="takes a policy apart") as err:
        RecordParallelEpisode(env, tmp_path, options=RecordOptions(saliency="gradient"))
    assert "\n" not in str(err.value)
    env.close()


def _vector_timeline(name: str, saliency: np.ndarray | None) -> AgentTimeline:
    frames = len(saliency) if saliency is not None else 4
    k = frames - 1
    return AgentTimeline(name, None, np.zeros(k, np.int64), ("a", "b", "c"), np.arange(frames),
                         np.r_[np.ones(k, bool), False], np.zeros(frames), -1, None, saliency)


def _check_feature_bars(img: np.ndarray, features, row: np.ndarray, tol: int = 0) -> None:
    """Each feature's bar in ``img``: round(saliency * bar_len) pixels from bar_x0 (the largest in the chosen
    colour, the others in the bar colour), the rest of its track in the track colour (``tol``: pixels the codec may
    blur at the bar's end; colours within 40 levels)."""
    from rlviz.draw.style import COLORS

    top = int(np.argmax(row))
    bh = max(1, features.row_h - 4) if features.labels else max(1, features.row_h - 1)
    for i, v in enumerate(row):
        y = features.y + i * features.row_h + bh // 2
        line = img[y, features.bar_x0: features.bar_x0 + features.bar_len].astype(int)
        n = int(round(float(v) * features.bar_len))
        color = np.array(COLORS["chosen"] if i == top else COLORS["bar"])
        near = lambda px, c: np.abs(px - np.asarray(c)).max(axis=-1) <= (40 if tol else 0)  # noqa: E731
        assert near(line[: max(0, n - tol)], color).all(), (i, v)
        assert near(line[n + tol:], COLORS["track"]).all(), (i, v)


def test_vector_saliency_is_a_bar_per_feature_in_each_column():
    """An agent whose observation is a vector (MPE) gets its saliency as one bar per feature where an image agent's
    thumbnail is: each bar round(saliency * length) pixels, the largest in the chosen colour."""
    rng = np.random.default_rng(3)
    maps = [rng.random((5, 6)).astype(np.float32) for _ in range(2)]
    maps[1][:, 1:] = 0.0  # only feature 0 matters to this agent
    comp = AgentsCompositor((60, 80), [_vector_timeline(f"p{i}", m) for i, m in enumerate(maps)])
    plain = AgentsCompositor((60, 80), [_vector_timeline(f"p{i}", None) for i in range(2)])
    assert all(c.features is not None for c in comp.cells) and all(c.features is None for c in plain.cells)
    assert comp.size[1] >= plain.size[1]
    frame = rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)
    for t in range(5):
        img = comp.render(t, frame)
        for cell, m in zip(comp.cells, maps):
            assert cell.features.d == 6 and cell.features.y >= cell.thumb_y
            _check_feature_bars(img, cell.features, m[t])


def test_render_on_mpe_draws_each_agents_vector_saliency_in_its_column(tmp_path):
    """A policy that reads only feature J of its 18: its gradient saliency is |w[a]| at J (a: the action taken) and
    exactly 0 elsewhere; the .npz holds that, and the decoded video shows feature J's bar alone in each column."""
    pytest.importorskip("mpe2")
    torch = pytest.importorskip("torch")
    from rlviz.envs.recipe import pettingzoo_recipe
    from rlviz.jobs.render import render
    from rlviz.media import read_video
    from rlviz.sources.pt2.saving import save_checkpoint

    J, w = 4, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])

    class OneFeature(torch.nn.Module):
        def forward(self, obs):
            return obs[:, J: J + 1] * w, obs[:, J] * 0.0

    recipe = pettingzoo_recipe("simple_spread_v3", {"max_cycles": 6})
    ckpt = save_checkpoint(tmp_path / "mpe.pt2", OneFeature(), env=recipe)
    out = tmp_path / "run"
    render(checkpoint=str(ckpt), episodes=1, videos="first:1", saliency="gradient", out=str(out))
    video = out / "videos" / "first-episode-0.mp4"
    frames = list(read_video(video))
    with np.load(video.with_suffix(".npz")) as data:
        agents = [str(a) for a in data["agents"]]
        sal = {a: data[f"{a}/saliency"] for a in agents}
        acts = {a: data[f"{a}/actions"] for a in agents}
    assert len(agents) == 3 and len(frames) == 7
    for a in agents:
        s = sal[a]
        assert s.shape == (7, 18)
        assert np.all(s[:, np.arange(18) != J] == 0.0) and np.all(s[:, J] > 0)
        # |w[a_t]| over the episode's scale (clipped at 1): a larger weight never gets a smaller bar
        wa, sj = w.numpy()[acts[a]], s[:-1, J]
        assert np.all((wa[:, None] <= wa[None, :]) <= (sj[:, None] <= sj[None, :] + 1e-6))
    timelines = [_vector_timeline(a, sal[a]) for a in agents]  # the cells' geometry: the recorder's
    comp = AgentsCompositor((700, 700), timelines, label="simple_spread_v3")
    for t, img in enumerate(frames):
        for cell, a in zip(comp.cells, agents):
            _check_feature_bars(img, cell.features, sal[a][t], tol=3)


def test_frames_drawn_into_the_last_frames_array_equal_fresh_ones():
    """The compositor redraws only what moves when it draws into the array of its last frame (the recorder's loop):
    every frame equals the one drawn from scratch, with an agent that leaves (its state text right-aligned in its
    cell, greyed out), a long name, thumbnails with saliency and vector saliency bars, in one row and grouped."""
    from rlviz.draw.panels_agents import AgentsLayout

    rng = np.random.default_rng(7)
    frames = 6
    k = frames - 1

    def tl(name, gone, thumbs, sal):
        return AgentTimeline(name, None, np.zeros(k, np.int64), ("left", "right", "noop"), np.arange(frames),
                             np.r_[np.ones(k, bool), False], rng.normal(size=frames), gone, thumbs, sal)

    timelines = [tl("agent_0", -1, rng.integers(0, 255, (frames, 48, 48, 3), dtype=np.uint8),
                    rng.random((frames, 12, 12)).astype(np.float32)),
                 tl("a_very_long_agent_name_indeed", 2, None, None),
                 tl("x", 3, None, rng.random((frames, 5)).astype(np.float32))]
    game = [rng.integers(0, 255, (40, 50, 3), dtype=np.uint8) for _ in range(frames)]
    for layout in (AgentsLayout(), AgentsLayout(max_columns=2)):
        comp = AgentsCompositor((40, 50), timelines, layout, "tag_v0")
        buf = np.zeros((comp.size[1], comp.size[0], 3), np.uint8)
        for t in list(range(frames)) + [0, 4, 1]:  # forwards, then jumps back and forth
            fresh = AgentsCompositor((40, 50), timelines, layout, "tag_v0").render(t, game[t])
            assert comp.render(t, game[t], out=buf) is buf
            assert np.array_equal(buf, fresh), t
        outside = np.ones(buf.shape[:2], bool)  # nothing is drawn outside the cells and the game (no text runs over)
        for x, y, w, h in [cell.box for cell in comp.cells] + [comp.game]:
            outside[y: y + h, x: x + w] = False
        for t in range(frames):
            img = comp.render(t, game[t], out=buf)
            assert np.array_equal(img[outside], comp._background[outside]), t
