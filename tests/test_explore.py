"""``rlviz explore``: the cells' episodes against the heatmap's own per-episode data, episodes rendered on demand
equal to ``--videos episode:N``'s, one render per episode under concurrent requests, a crashed render answered as
an error while the server goes on, 200 crafted URLs answered 4xx without reading a file outside the run, and
Ctrl-C: exit 130 with nothing half-written left."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from _explore import ROOT, minatar_run, reference_video, serving, wait_until

from rlviz.cli import main
from rlviz.errors import UsageError
from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.explore.index import RunIndex
from rlviz.media import read_video

pytest.importorskip("werkzeug")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return minatar_run(tmp_path_factory)


def _get(base: str, path: str, method: str = "GET") -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)  # the path exactly as written
        conn.putheader("Host", f"{host}:{port}")
        body = b"{}" if method == "POST" else None  # as the page sends it: JSON (a form's POST is refused)
        if body is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _json(base: str, path: str, method: str = "GET") -> dict:
    code, body = _get(base, path, method)
    assert code == 200, (path, code, body[:200])
    return json.loads(body)


def _open(base: str, n: int) -> dict:
    _json(base, f"/api/episode/{n}/open", "POST")
    return wait_until(lambda: (s := _json(base, f"/api/episode/{n}/status"))["state"] != "rendering" and s)


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(UsageError, match="not an rlviz run"):
        RunIndex(tmp_path)
    assert main(["explore", str(tmp_path), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not an rlviz run" in err and len(err.splitlines()) == 1


def test_each_cell_lists_exactly_the_episodes_whose_failures_put_an_object_there(run):
    h = FailureHeatmap.load(run / "heatmap.npz")
    failed = sorted({e for e, _, _ in h.contributions})
    parts = {e: h.contribution(e) for e in failed}
    for name in h.object_names:  # the contributions are the counts, exactly
        assert np.array_equal(sum(p[name] for p in parts.values()), h.counts[name])
    with serving(run) as srv:
        H, W = h.frame_shape
        for layer in (None, *h.object_names):
            grid = h.total() if layer is None else h.counts[layer]
            for y in range(H):
                for x in range(W):
                    q = f"/api/cell?x={x}&y={y}" + (f"&layer={layer}" if layer else "")
                    got = [r["episode"] for r in _json(srv.base, q)["episodes"]]
                    want = [e for e in failed if any(parts[e][n][y, x] for n in ([layer] if layer else h.object_names))]
                    assert got == want, (layer, x, y)
                    assert bool(got) == bool(grid[y, x])


def test_an_opened_episode_is_the_video_of_videos_episode_n(run, tmp_path_factory):
    h = FailureHeatmap.load(run / "heatmap.npz")
    n = h.episodes_at(*np.unravel_index(int(np.argmax(h.total())), h.frame_shape))[0]
    ref = reference_video(tmp_path_factory, n)
    with serving(run) as srv:
        assert _open(srv.base, n) == {"state": "done"}
        code, data = _get(srv.base, f"/api/episode/{n}/video.mp4")
        assert code == 200
        cached = srv.cache.video(n)
        assert cached is not None and data == cached.read_bytes()
        for a, b in zip(read_video(cached), read_video(ref), strict=True):
            assert np.array_equal(a, b)
        with np.load(cached.with_suffix(".npz")) as za, np.load(ref.with_suffix(".npz")) as zb:
            assert za.files == zb.files and all(np.array_equal(za[k], zb[k]) for k in za.files)
        trace = _json(srv.base, f"/api/episode/{n}/trace")
        assert trace["T"] == trace["episode"]["length"] and trace["failure_step"] == trace["T"] - 1


def test_concurrent_clients_get_their_episodes_and_each_renders_once(run):
    from rlviz.explore.cache import RENDER_SLOTS

    episodes = [11, 12, 13, 14]  # twice the renders that run at once: half of them wait in the queue
    assert len(episodes) == 2 * RENDER_SLOTS
    with serving(run) as srv:
        got: dict = {}

        def client(n: int, k: int) -> None:
            got[(n, k)] = _open(srv.base, n)["state"], _get(srv.base, f"/api/episode/{n}/video.mp4")[0]

        threads = [threading.Thread(target=client, args=(n, k)) for n in episodes for k in range(2)]
        threads += [threading.Thread(target=client, args=(episodes[0], k)) for k in range(2, 6)]  # one episode, 6 clients
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert set(got.values()) == {("done", 200)} and len(got) == len(threads)
        assert srv.cache.renders == {n: 1 for n in episodes}
        left = {p.name for p in srv.cache.folder.iterdir()}  # (other tests' episodes may be cached too)
        assert left >= {f"episode-{n}-episode-0.{ext}" for n in episodes for ext in ("mp4", "npz")}
        assert all(name.startswith("episode-") for name in left)


def test_a_crashed_render_is_an_error_in_the_page_and_the_server_goes_on(run, tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a checkpoint")
    with serving(run, checkpoint=str(bad)) as srv:
        state = _open(srv.base, 3)
        assert state["state"] == "error" and "bad.pt2" in state["message"] and "\n" not in state["message"]
        assert _json(srv.base, "/api/run")["job"] == "render"  # still serving
        assert _get(srv.base, "/api/episode/3/video.mp4")[0] == 404
        assert srv.cache.video(3) is None
        assert not [p for p in srv.cache.folder.iterdir() if p.name.startswith((".partial", "episode-3-"))]


def _crafted_urls() -> list[str]:
    dots = ["..", "%2e%2e", "%2E%2E", ".%2e", "%252e%252e", "%c0%ae%c0%ae", "....", "..%00", "%2e%2e%5c", "..\\"]
    seps = ["/", "%2f", "%2F", "%252f", "\\", "%5c"]
    targets = ["canary.txt", "etc/passwd", "rlviz-run.json"]
    urls = []
    for d in dots:
        for s in seps:
            urls.append(f"/assets/{d}{s}{d}{s}{targets[len(urls) % 3]}")
            urls.append(f"/{d}{s}{d}{s}canary.txt")
    ids = ["-1", "-0", "1e3", "0x10", "999999999999999999999999999999", "200", "1000000001", "%2d1", "1.0", "%00",
           "%ff", "..", "%2e%2e", "7%2f..%2f..", "%201", "1%20", "+1", "%ef%bc%91"]
    for i in ids:
        for tail in ("open", "status", "trace", "video.mp4"):
            urls.append(f"/api/episode/{i}/{tail}")
    urls += ["/api/episode/7/video.mp4", "/api/episode/7/trace", "/link.txt", "/.rlviz-cache/explore/",
             "/heatmap.npz", "/episodes.csv", "/rlviz-run.json", "//etc/passwd", "/api/run/../../canary.txt",
             "/assets/", "/assets/explore.html", "/assets/%00", "/assets/page.py", "/api/cell", "/api/cell?x=-1&y=0",
             "/api/cell?x=1", "/api/cell?x=9999999&y=0", "/api/cell?x=10&y=0", "/api/cell?x=%ff&y=1",
             "/api/cell?x=1&y=1&layer=..%2f..%2fcanary", "/api/cell?x=1e1&y=1", "/api/episode/", "/api/episode/5",
             "/%ff%fe", "/%c0%af", "/api/%2e%2e/api/run/..", "/api/episode/5/video.mp4/..%2f..%2fcanary.txt",
             "/api/episode/7/video.mp4?v=..%2f..%2fcanary.txt", "/api/episode/7/video.mp4?v=plain",
             "/api/episode/7/trace?v=a", "/api/episode/7/video.mp4?v=%00", "/api/episode/7/video.mp4?v=/etc/passwd",
             "/api/episode/07/trace", "/api/episode/7/trace?v="]
    while len(urls) < 200:
        urls.append(f"/api/episode/{-len(urls)}/open")
    return urls[:200]


def test_crafted_urls_get_4xx_and_read_nothing_outside_the_folder(run, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    canary = outside / "canary.txt"
    canary.write_text("CANARY-SECRET")
    (run / "link.txt").unlink(missing_ok=True)
    os.symlink(canary, run / "link.txt")
    opened: list[str] = []
    watching = [True]

    def audit(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(args[0]))

    sys.addaudithook(audit)  # (hooks stay for the process; this one records only while watching)
    try:
        with serving(run) as srv:
            cache = srv.cache.folder
            cache.mkdir(parents=True, exist_ok=True)
            os.symlink(canary, cache / "episode-7-episode-0.mp4")  # a cached "video" that leads out of the folder
            os.symlink(canary, cache / "episode-7-episode-0.npz")
            try:
                urls = _crafted_urls()
                assert len(set(urls)) == 200
                for url in urls:
                    code, body = _get(srv.base, url, "POST" if url.endswith("/open") else "GET")
                    assert 400 <= code < 500, (url, code)
                    assert b"CANARY" not in body, url
                code, _ = _get(srv.base.replace("127.0.0.1", "localhost"), "/api/run")  # localhost: same server
                assert code == 200
            finally:
                os.unlink(cache / "episode-7-episode-0.mp4")
                os.unlink(cache / "episode-7-episode-0.npz")
    finally:
        watching[0] = False
        os.unlink(run / "link.txt")
    root = os.path.realpath(run)
    read = {os.path.realpath(p) for p in opened}
    assert str(canary.resolve()) not in read
    assert not [p for p in read if p.startswith(str(outside.resolve()))]
    assert not [p for p in read if os.path.dirname(root) in p and not p.startswith(root)]


def test_a_page_elsewhere_cannot_reach_the_server_by_another_host_name(run):
    with serving(run) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/api/run", headers={"Host": "evil.example:80"})
        assert conn.getresponse().status == 403
        conn.close()


def test_ctrl_c_exits_130_and_leaves_nothing_half_written(run):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rlviz", "explore", str(run), "--no-browser", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert "serving" in line, line + proc.stderr.read()
        base = line.split(" at ")[1].split()[0].rstrip("/")
        req = urllib.request.Request(f"{base}/api/episode/40/open", method="POST", data=b"{}",
                                     headers={"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(req, timeout=60).read())["state"] in ("rendering", "done")
        cache = Path(run) / ".rlviz-cache" / "explore"
        wait_until(lambda: cache.is_dir() and any(p.name.startswith(".partial-") for p in cache.iterdir())
                   or (cache / "episode-40-episode-0.mp4").exists())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    names = {p.name for p in cache.iterdir()}
    assert not [n for n in names if n.startswith(".partial-") or "partial" in n]
    assert all(n.endswith((".mp4", ".npz")) for n in names)
    assert {n[:-4] for n in names if n.endswith(".mp4")} <= {n[:-4] for n in names if n.endswith(".npz")}


def test_without_werkzeug_the_error_names_the_extra(run, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "werkzeug", None)
    assert main(["explore", str(run), "--no-browser"]) == 1
    err = capsys.readouterr().err.strip()
    assert 'pip install "rlviz[explore]"' in err and len(err.splitlines()) == 1


def test_bad_options_are_usage_errors(run, capsys):
    for args in (["--port", "99999"], ["--port", "-1"], ["--port", "x"], ["--host", " "]):
        assert main(["explore", str(run), "--no-browser", *args]) == 2, args
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_cache_area_is_the_runs_own_and_goes_with_it(run, tmp_path):
    import shutil

    from rlviz.jobs.outdir import foreign_files, remove_run

    copy = tmp_path / "copy"
    shutil.copytree(run, copy, symlinks=True)
    (copy / ".rlviz-cache" / "explore").mkdir(parents=True, exist_ok=True)
    (copy / ".rlviz-cache" / "explore" / "episode-1-episode-0.mp4").write_bytes(b"x")
    assert foreign_files(copy) == []  # --overwrite may replace the run
    (copy / "mine.txt").write_text("a user's file")
    assert foreign_files(copy) == ["mine.txt"]
    remove_run(copy)
    assert sorted(p.name for p in copy.iterdir()) == ["mine.txt"]


def test_the_pages_heatmap_is_the_heatmaps_counts(run):
    h = FailureHeatmap.load(run / "heatmap.npz")
    assert RunIndex(run).page_data()["heatmap"] is True
    view = RunIndex(run).heatmap_view()
    assert view["shape"] == list(h.frame_shape) and view["per_episode"]
    assert view["layers"] == {n: h.counts[n].tolist() for n in h.object_names}
    assert view["total"] == h.total().tolist()
    assert view["background"] == h.background.reshape(-1).tolist()
    assert (view["failures"], view["episodes"]) == (h.failures, h.episodes) == (h.failures, 200)
