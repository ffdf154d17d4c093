"""``rlviz explore`` on a compare run (A and B on the same seed, each video equal to the one ``rlviz compare
--videos episode:N`` writes under videos/a and videos/b), on a timeline run (the same seed at each checkpoint,
each video equal to ``rlviz render <checkpoint> --videos episode:N``'s) and on a run rendered with ``--saliency``
(the episode served with its overlay and without it, each equal to ``rlviz render --videos episode:N`` with and
without ``--saliency``): through the server's HTTP answers, then in headless Chromium."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _explore import SAMPLE, serving, wait_until

from rlviz.cli import main
from rlviz.media import read_video

pytest.importorskip("werkzeug")

B_SAMPLE = SAMPLE.with_name("minatar_breakout_ppo_noent.pt2")
EPISODES, N = 12, 3
TIMELINE_STEPS = (401408, 4792320)


def _cli(*args: str) -> None:
    assert main([*args, "--no-progress"]) == 0, args


@pytest.fixture(scope="module")
def compare_runs(tmp_path_factory):
    """(the run opened in the explorer: --videos none, the same run with --videos episode:N)."""
    base = tmp_path_factory.mktemp("explore-compare")
    for name, videos in (("run", "none"), ("ref", f"episode:{N}")):
        _cli("compare", str(SAMPLE), str(B_SAMPLE), "--episodes", str(EPISODES), "--videos", videos,
             "--out", str(base / name))
    return base / "run", base / "ref"


@pytest.fixture(scope="module")
def saliency_runs(tmp_path_factory):
    """(a --saliency gradient run, its --videos episode:N, the same episode without --saliency)."""
    base = tmp_path_factory.mktemp("explore-saliency")
    _cli("render", str(SAMPLE), "--episodes", "6", "--saliency", "gradient", "--videos", "none",
         "--out", str(base / "run"))
    _cli("render", str(SAMPLE), "--episodes", "6", "--saliency", "gradient", "--videos", f"episode:{N}",
         "--out", str(base / "ref"))
    _cli("render", str(SAMPLE), "--episodes", "6", "--videos", f"episode:{N}", "--out", str(base / "plain"))
    return base / "run", base / "ref", base / "plain"


@pytest.fixture(scope="module")
def timeline_runs(tmp_path_factory):
    """(a timeline run over two checkpoints, {step: the checkpoint's render with --videos episode:N})."""
    base = tmp_path_factory.mktemp("explore-timeline")
    files = {s: SAMPLE.parent / "runs" / "minatar_ppo" / f"step_{s}.pt2" for s in TIMELINE_STEPS}
    _cli("timeline", *map(str, files.values()), "--episodes", "4", "--videos", "none", "--out", str(base / "run"))
    for s, f in files.items():
        _cli("render", str(f), "--episodes", "4", "--videos", f"episode:{N}", "--out", str(base / f"ref{s}"))
    return base / "run", {s: base / f"ref{s}" for s in TIMELINE_STEPS}


def _get(srv, path: str, method: str = "GET") -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        json_body = {"data": b"{}", "headers": {"Content-Type": "application/json"}} if method == "POST" else {}
        with urllib.request.urlopen(urllib.request.Request(srv.base + path, method=method, **json_body),
                                    timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _open(srv, n: int) -> dict:
    assert _get(srv, f"/api/episode/{n}/open", "POST")[0] == 200
    return wait_until(lambda: (s := json.loads(_get(srv, f"/api/episode/{n}/status")[1]))["state"] != "rendering" and s)


def _same_video(served: bytes, tmp_path, ref) -> None:
    """The served MP4 decodes to the reference's frames, pixel for pixel, and its .npz holds the same numbers."""
    path = tmp_path / "served.mp4"
    path.write_bytes(served)
    got, want = list(read_video(path)), list(read_video(ref))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


def _same_npz(a, b) -> None:
    with np.load(a) as za, np.load(b) as zb:
        assert za.files == zb.files and all(np.array_equal(za[k], zb[k]) for k in za.files)


def test_a_compare_episode_is_a_and_b_on_its_seed_as_compare_videos_writes_them(compare_runs, tmp_path):
    run, ref = compare_runs
    with serving(run) as srv:
        page = json.loads(_get(srv, "/api/run")[1])
        assert page["job"] == "compare" and page["replayable"] and page["variants"] == ["a", "b"]
        assert _open(srv, N) == {"state": "done"}
        row = srv.index.episode(N)
        for side in "ab":
            code, body = _get(srv, f"/api/episode/{N}/video.mp4?v={side}")
            assert code == 200
            _same_video(body, tmp_path, ref / "videos" / side / f"episode-{N}-episode-0.mp4")
            _same_npz(srv.cache.npz(N, side), ref / "videos" / side / f"episode-{N}-episode-0.npz")
            trace = json.loads(_get(srv, f"/api/episode/{N}/trace?v={side}")[1])
            assert trace["T"] == row[f"{side}_length"]
            assert trace["failure_step"] == (trace["T"] - 1 if row[f"{side}_terminated"] else None)
        assert _get(srv, f"/api/episode/{N}/video.mp4")[1] == _get(srv, f"/api/episode/{N}/video.mp4?v=a")[1]
        for bad in ("plain", "c", "a-plain", "..%2fa", "", "A"):
            assert _get(srv, f"/api/episode/{N}/video.mp4?v={bad}")[0] == 404, bad
        assert srv.cache.renders == {N: 1}
    names = sorted(p.name for p in srv.cache.folder.iterdir())
    assert names == sorted(f"{s}-episode-{N}-episode-0.{e}" for s in "ab" for e in ("mp4", "npz"))


def test_a_timeline_episode_is_its_seed_at_each_checkpoint_as_render_writes_it(timeline_runs, tmp_path):
    run, refs = timeline_runs
    with serving(run) as srv:
        page = json.loads(_get(srv, "/api/run")[1])
        assert page["job"] == "timeline" and page["replayable"]
        assert page["variants"] == [f"step{s}" for s in TIMELINE_STEPS] and page["rows"] == [[0], [1], [2], [3]]
        assert _open(srv, N) == {"state": "done"}
        for s in TIMELINE_STEPS:
            code, body = _get(srv, f"/api/episode/{N}/video.mp4?v=step{s}")
            assert code == 200
            ref = refs[s] / "videos" / f"episode-{N}-episode-0.mp4"
            _same_video(body, tmp_path, ref)
            _same_npz(srv.cache.npz(N, f"step{s}"), ref.with_suffix(".npz"))
            trace = json.loads(_get(srv, f"/api/episode/{N}/trace?v=step{s}")[1])
            with np.load(ref.with_suffix(".npz")) as z:
                failed = bool(z["terminated"])
            assert trace["failure_step"] == (trace["T"] - 1 if failed else None)
        assert _get(srv, "/api/episode/4/open", "POST")[0] == 404


def test_a_saliency_run_serves_the_episode_with_and_without_its_overlay(saliency_runs, tmp_path):
    run, ref, plain = saliency_runs
    with serving(run) as srv:
        assert json.loads(_get(srv, "/api/run")[1])["variants"] == ["", "plain"]
        assert _open(srv, N) == {"state": "done"}
        on, off = _get(srv, f"/api/episode/{N}/video.mp4")[1], _get(srv, f"/api/episode/{N}/video.mp4?v=plain")[1]
        _same_video(on, tmp_path, ref / "videos" / f"episode-{N}-episode-0.mp4")
        _same_video(off, tmp_path, plain / "videos" / f"episode-{N}-episode-0.mp4")
        _same_npz(srv.cache.npz(N, "plain"), plain / "videos" / f"episode-{N}-episode-0.npz")
        (tmp_path / "on.mp4").write_bytes(on)
        (tmp_path / "off.mp4").write_bytes(off)
        assert any(not np.array_equal(a, b) for a, b in zip(read_video(tmp_path / "on.mp4"),
                                                            read_video(tmp_path / "off.mp4")))  # the overlay
        t_on = json.loads(_get(srv, f"/api/episode/{N}/trace")[1])
        t_off = json.loads(_get(srv, f"/api/episode/{N}/trace?v=plain")[1])
        assert t_on["T"] == t_off["T"] == srv.index.episode(N)["length"]


# -- in headless Chromium (as tests/test_explore_browser.py): the page's videos, frame t of each --------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from test_report import _browser

    driver = _browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def _at_step(browser, t: int) -> list[np.ndarray]:
    """Seek the page to step t (as the slider does) and grab every side's frame, once each video shows step t."""
    from test_explore_browser import _grab
    from test_report import _wait

    browser.execute_script("explore.seek(arguments[0])", t)
    videos = browser.find_elements("css selector", "#viewer video")
    for k, video in enumerate(videos):
        _wait(browser, "const v = arguments[0], b = explore.boxes[arguments[2]]; return !v.seeking && v.readyState >= 2 "
                       "&& b.trace.t === arguments[1] && Math.abs(v.currentTime - (arguments[1] + 0.5) / b.tl.fps) < 1e-3",
              60, video, t, k)
    return [_grab(browser, v) for v in videos]


def _shows(shown: np.ndarray, frames: list[np.ndarray], t: int) -> None:
    """``shown`` is frame t within the codec's tolerance (tests/test_explore_browser.py's), and nearer to it than
    to any other frame of the episode that differs from it."""
    from test_explore_browser import MEAN_TOLERANCE, PIXEL_SHARE, _close

    mean, share = _close(shown, frames[t])
    assert mean <= MEAN_TOLERANCE and share >= PIXEL_SHARE, (mean, share)
    others = [_close(shown, f)[0] for f in frames if not np.array_equal(f, frames[t])]
    assert not others or min(others) > mean


def _open_in_page(browser, srv, n: int) -> None:
    from test_report import _wait

    browser.get(srv.base + "/")
    _wait(browser, "return window.exploreReady === true", 60)
    browser.execute_script("explore.open(arguments[0])", n)
    _wait(browser, "return window.exploreEpisodeReady === true", 600)


def test_the_page_plays_a_and_b_side_by_side_scrubbed_in_sync(compare_runs, browser):
    run, ref = compare_runs
    frames = {s: list(read_video(ref / "videos" / s / f"episode-{N}-episode-0.mp4")) for s in "ab"}
    with serving(run) as srv:
        _open_in_page(browser, srv, N)
        assert browser.execute_script("return explore.boxes.map(b => b.side)") == ["a", "b"]
        lengths = browser.execute_script("return explore.boxes.map(b => b.tl.T)")
        assert lengths == [srv.index.episode(N)[f"{s}_length"] for s in "ab"]
        for t in (0, min(lengths) // 2, min(lengths) - 1):
            for side, shown in zip("ab", _at_step(browser, t)):
                _shows(shown, frames[side], t)


def test_the_saliency_overlay_turns_off_and_on_at_the_step_shown(saliency_runs, browser):
    run, ref, plain = saliency_runs
    on = list(read_video(ref / "videos" / f"episode-{N}-episode-0.mp4"))
    off = list(read_video(plain / "videos" / f"episode-{N}-episode-0.mp4"))
    T = len(on) - 1
    t = int(np.argmax([np.abs(a.astype(np.int16) - b).mean() for a, b in zip(on[:T], off[:T])]))  # overlay's most
    from test_explore_browser import MEAN_TOLERANCE, _close

    assert _close(on[t], off[t])[0] > 2 * MEAN_TOLERANCE  # (the two are told apart beyond the codec's tolerance)
    with serving(run) as srv:
        _open_in_page(browser, srv, N)
        assert browser.execute_script("return !document.getElementById('saliency-box').hidden")
        _shows(_at_step(browser, t)[0], on, t)
        browser.find_element("css selector", "#saliency").click()
        from test_report import _wait

        _wait(browser, "return window.exploreEpisodeReady === true", 60)
        assert browser.execute_script("return explore.boxes[0].video.currentSrc").endswith("?v=plain")
        assert browser.execute_script("return explore.trace.t") == t  # the same step, now without the overlay
        _shows(_at_step(browser, t)[0], off, t)
        browser.execute_script("explore.setSaliency(true)")
        _wait(browser, "return window.exploreEpisodeReady === true", 60)
        _shows(_at_step(browser, t)[0], on, t)


def test_the_page_plays_the_seed_at_each_checkpoint_in_sync(timeline_runs, browser):
    run, refs = timeline_runs
    frames = [list(read_video(refs[s] / "videos" / f"episode-{N}-episode-0.mp4")) for s in TIMELINE_STEPS]
    with serving(run) as srv:
        _open_in_page(browser, srv, N)
        assert browser.execute_script("return explore.boxes.map(b => b.side)") == [f"step{s}" for s in TIMELINE_STEPS]
        titles = browser.execute_script("return explore.boxes.map(b => b.box.querySelector('.side-title').textContent)")
        assert [t.split(":")[0] for t in titles] == [f"step {s}" for s in TIMELINE_STEPS]
        t = min(browser.execute_script("return explore.boxes.map(b => b.tl.T)")) - 1
        for shown, want in zip(_at_step(browser, t), frames):
            _shows(shown, want, t)
