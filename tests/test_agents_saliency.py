"""Saliency drawn in the multi-agent video's columns: each agent's observation thumbnail tinted by its saliency map
(rlviz.draw.panels_agents, rlviz.record.agents_video, ``rlviz render --saliency`` on a PettingZoo env id)."""

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
    from rlviz.record.pettingzoo import RecordParallelEpisode

    env = make_agents_env(pettingzoo_recipe("pistonball_v6", {"n_pistons": 3, "max_cycles": 5}), render_mode="rgb_array")
    with pytest.raises(UsageError, match="takes a policy apart") as err:
        RecordParallelEpisode(env, tmp_path, options=RecordOptions(saliency="gradient"))
    assert "\n" not in str(err.value)
    env.close()
