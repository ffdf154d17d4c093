"""``--videos episode:N[,M...]`` and ``--videos failed-at:X,Y``: the episodes selected are exactly the ones named, or
exactly those whose failures put an object on that heatmap pixel (read from the heatmap's own per-episode data),
and an episode's video equals the one any other selection writes for it."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from rlviz.config import parse_video_spec
from rlviz.errors import UsageError
from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.jobs.render import render
from rlviz.jobs.videos import select_episodes
from rlviz.media import read_video


def test_parse_episode_and_failed_at_items():
    assert parse_video_spec("episode:4,9,12,worst:1") == [("episode", 4), ("episode", 9), ("episode", 12),
                                                          ("worst", 1)]
    assert parse_video_spec("failed-at:3,7,episode:2") == [("failed-at", (3, 7)), ("episode", 2)]
    for bad in ("episode:-1", "failed-at:3", "failed-at:a,b", "episode:", "first:1,2", "failed-at:1,-2"):
        with pytest.raises(UsageError):
            parse_video_spec(bad)


def test_select_episode_items_and_range():
    returns = np.array([3.0, 1.0, 5.0, 2.0, 4.0])
    assert select_episodes(returns, [("episode", 4), ("worst", 1), ("episode", 1)]) == [("episode", 4),
                                                                                         ("worst", 1)]
    with pytest.raises(UsageError, match="has 5 episodes"):
        select_episodes(returns, [("episode", 5)])
    with pytest.raises(UsageError, match="--heatmap"):
        select_episodes(returns, [("failed-at", (0, 0))])


def test_heatmap_contributions_add_up_and_survive_save(tmp_path):
    h = FailureHeatmap((4, 5), ("ball", "paddle"))
    rng = np.random.default_rng(0)
    for e in (3, 1, 3, 0):
        h.add({"ball": rng.random((4, 5)) < 0.3, "paddle": rng.random((4, 5)) < 0.5}, episode=e)
    back = FailureHeatmap.load(h.save(tmp_path / "h.npz"))
    for name in h.object_names:
        assert np.array_equal(sum(back.contribution(e)[name] for e in (0, 1, 3)), h.counts[name])
    for r in range(4):
        for c in range(5):
            want = sorted(e for e in (0, 1, 3) if any(h.contribution(e)[n][r, c] for n in h.object_names))
            assert back.episodes_at(r, c) == h.episodes_at(r, c) == want
    with pytest.raises(UsageError, match="outside"):
        back.episodes_at(4, 0)


@pytest.fixture(scope="module")
def run(minatar_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("sel") / "run"
    render(checkpoint=str(minatar_ckpt), episodes=40, num_envs=8, heatmap=True, videos="none", out=out)
    return out


def test_saved_contributions_are_the_heatmap_counts(run):
    h = FailureHeatmap.load(run / "heatmap.npz")
    rows = list(csv.DictReader((run / "episodes.csv").open()))
    failed = {int(r["episode"]) for r in rows if int(r["failures"]) > 0}
    assert {e for e, _, _ in h.contributions} == failed and failed
    for name in h.object_names:
        assert np.array_equal(sum(h.contribution(e)[name] for e in failed), h.counts[name])


def test_failed_at_renders_exactly_the_episodes_of_that_cell(run, minatar_ckpt, tmp_path):
    h = FailureHeatmap.load(run / "heatmap.npz")
    total = h.total()
    # the warmest cell that few episodes share (a handful of videos)
    cells = [(int(total[r, c]), r, c) for r, c in zip(*np.nonzero(total)) if len(h.episodes_at(r, c)) <= 3]
    _, row, col = max(cells)
    want = [e for e in range(40) if any(h.contribution(e)[n][row, col] for n in h.object_names)]
    assert want == h.episodes_at(row, col)
    out = tmp_path / "cell"
    render(checkpoint=str(minatar_ckpt), episodes=40, num_envs=8, heatmap=True, videos=f"failed-at:{col},{row}",
           out=out)
    got = sorted(int(p.name.split("-")[1]) for p in (out / "videos").glob("failed-*-episode-0.mp4"))
    assert got == want


def test_episode_video_equals_the_one_another_selection_writes(run, minatar_ckpt, tmp_path):
    rows = list(csv.DictReader((run / "episodes.csv").open()))
    worst = min(range(len(rows)), key=lambda i: (float(rows[i]["return"]), i))
    a, b = tmp_path / "a", tmp_path / "b"
    kw = dict(checkpoint=str(minatar_ckpt), episodes=40, num_envs=8, saliency="gradient")
    render(videos="worst:1", out=a, **kw)
    render(videos=f"episode:{worst}", out=b, **kw)
    va, vb = a / "videos" / f"worst-{worst}-episode-0.mp4", b / "videos" / f"episode-{worst}-episode-0.mp4"
    frames = 0
    for fa, fb in zip(read_video(va), read_video(vb), strict=True):
        assert np.array_equal(fa, fb)
        frames += 1
    assert frames >= int(rows[worst]["length"]) + 1
    with np.load(va.with_suffix(".npz")) as za, np.load(vb.with_suffix(".npz")) as zb:
        assert za.files == zb.files
        for k in za.files:
            assert np.array_equal(za[k], zb[k]), k


def test_contributions_are_the_same_for_any_worker_count(minatar_ckpt, tmp_path):
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        render(checkpoint=str(minatar_ckpt), episodes=24, num_envs=4, heatmap=True, videos="none", out=out,
               workers=workers)
        outs.append(out / "heatmap.npz")
    with np.load(outs[0]) as a, np.load(outs[1]) as b:
        assert a.files == b.files and "contrib_runs" in a.files
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k
