"""The explorer's readers survive a fuzzer (as tests/test_fuzz.py's): a run folder whose rlviz-run.json,
episodes.csv, summary.json or heatmap.npz (with its per-episode contributions) is mutated either opens (its page
data and every heatmap cell answer) or is refused with exactly one one-line RlvizError; never another exception."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from _mutate import mutate_file

from rlviz.errors import RlvizError
from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.explore.index import RunIndex


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A small run folder written by hand as render writes one (marker, csv, summary, heatmap with contributions)."""
    out = tmp_path_factory.mktemp("fuzz-run")
    h = FailureHeatmap((6, 5), ("ball", "paddle"), "probe")
    rng = np.random.default_rng(0)
    for e in range(8):
        h.add({"ball": rng.random((6, 5)) < 0.2, "paddle": rng.random((6, 5)) < 0.3}, episode=e)
    h.episodes = 10
    h.save(out / "heatmap.npz")
    rows = "\n".join(f"{e},{100 + e},{e * 1.5},{20 + e},{int(e < 8)},{e < 8},False,,0.5" for e in range(10))
    (out / "episodes.csv").write_text("episode,seed,return,length,failures,terminated,truncated,is_success,"
                                      f"mean_entropy\n{rows}\n")
    (out / "summary.json").write_text('{"env_id": "probe", "episodes": 10, "returns": {"mean": 6.75}}')
    (out / "rlviz-run.json").write_text('{"job": "render", "options": {"checkpoint": "x.pt2", "episodes": 10}, '
                                        '"files": ["episodes.csv", "heatmap.npz", "summary.json"]}')
    return out


def _open(folder) -> None:
    index = RunIndex(folder)
    index.page_data()
    if index.has_heatmap:
        index.heatmap_view()
    if index.heatmap is not None:
        H, W = index.heatmap.frame_shape
        for y in range(min(H, 8)):
            for x in range(min(W, 8)):
                index.cell(x, y)


def test_mutated_run_folders_open_or_are_refused_in_one_line(folder, tmp_path):
    count = int(os.environ.get("RLVIZ_FUZZ_COUNT", "400"))
    names = ["rlviz-run.json", "episodes.csv", "summary.json", "heatmap.npz"]
    tally = {"ok": 0, "refused": 0}
    for i in range(count):
        rng = np.random.default_rng([7, i])
        work = tmp_path / f"in{i}"
        shutil.copytree(folder, work)
        victim = work / names[i % len(names)]
        how = mutate_file(victim, rng, tmp_path / "marker")
        try:
            _open(work)
            tally["ok"] += 1
        except RlvizError as exc:
            assert len(str(exc).splitlines()) == 1, (i, how, str(exc))
            tally["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - the failure to report
            raise AssertionError(f"input {i} ({victim.name}: {how}) raised {type(exc).__name__}: {exc}") from exc
        finally:
            shutil.rmtree(work)
    assert not (tmp_path / "marker").exists()
    assert tally["ok"] and tally["refused"], tally


@pytest.fixture(scope="module")
def timeline_folder(tmp_path_factory):
    """A timeline run folder as ``rlviz timeline`` writes one (its marker and timeline.json; no episodes.csv)."""
    out = tmp_path_factory.mktemp("fuzz-timeline")
    rows = ", ".join(f'{{"step": {s}, "checkpoint": "step_{s}.pt2", "episodes": 4, "return": {{"mean": 1.5}}}}'
                     for s in (1000, 2000, 3000))
    (out / "timeline.json").write_text(f'{{"env_id": "probe", "episodes": 4, "seed": NaN, "checkpoints": [{rows}], '
                                       '"first_seen": {}, "regressions": 0}')  # (NaN: Python's JSON writes it)
    (out / "rlviz-run.json").write_text('{"job": "timeline", "options": {"run": "ckpts", "episodes": 4, "seed": 0}, '
                                        '"files": ["timeline.json"]}')
    return out


def test_mutated_timeline_folders_open_or_are_refused_in_one_line(timeline_folder, tmp_path):
    from rlviz.config import ExploreConfig
    from rlviz.explore.server import create_app, open_run

    count = int(os.environ.get("RLVIZ_FUZZ_COUNT", "400")) // 2
    tally = {"ok": 0, "refused": 0}
    for i in range(count):
        rng = np.random.default_rng([11, i])
        work = tmp_path / f"in{i}"
        shutil.copytree(timeline_folder, work)
        victim = work / ("timeline.json", "rlviz-run.json")[i % 2]
        how = mutate_file(victim, rng, tmp_path / "marker")
        try:
            index, cache = open_run(ExploreConfig(out=work, port=0, browser=False))
            create_app(index, cache)  # (the page's data: JSON of what was read)
            assert all(type(s) is int for s in index.steps)
            assert index.rows == [[e] for e in range(len(index.rows))]
            tally["ok"] += 1
        except RlvizError as exc:
            assert len(str(exc).splitlines()) == 1, (i, how, str(exc))
            tally["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - the failure to report
            raise AssertionError(f"input {i} ({victim.name}: {how}) raised {type(exc).__name__}: {exc}") from exc
        finally:
            shutil.rmtree(work)
    assert not (tmp_path / "marker").exists()
    assert tally["ok"] and tally["refused"], tally


# -- the server's guard: cross-origin, content type, Host, token (#60 item 2) ----------------------------------------
def _guarded(folder, token=None, host="127.0.0.1"):
    """The app on ``folder`` as ``--host host`` gates it, with a renderer that records every call (a render that
    starts is the failure)."""
    from rlviz.explore.cache import EpisodeCache
    from rlviz.explore.gate import host_names
    from rlviz.explore.server import create_app

    calls: list[int] = []

    def render(n, where):
        calls.append(n)
        raise RuntimeError("no render in this test")

    index = RunIndex(folder)
    app = create_app(index, EpisodeCache(index.root, render), hosts=host_names(host), token=token)
    return app, calls


def _answer(app, method: str, path: str, headers: dict | None = None, query: str = "") -> tuple[int, bytes]:
    import io

    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "HTTP_HOST": "127.0.0.1:8765",
               "wsgi.input": io.BytesIO(b"{}"), "CONTENT_LENGTH": "2"}
    environ.update(headers or {})
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h: status.append(s)))
    return int(status[0].split()[0]), body


def _call(app, method: str, path: str, headers: dict | None = None, query: str = "") -> int:
    return _answer(app, method, path, headers, query)[0]


_JSON = {"CONTENT_TYPE": "application/json"}
_CROSS = [  # (headers of a request another site's page can make the browser send, the answer)
    ({"HTTP_ORIGIN": "http://evil.example", "CONTENT_TYPE": "application/x-www-form-urlencoded"}, 403),
    ({"HTTP_ORIGIN": "http://evil.example", **_JSON}, 403),
    ({"HTTP_ORIGIN": "null", **_JSON}, 403),
    ({"HTTP_ORIGIN": "http://127.0.0.1:8766", **_JSON}, 403),  # another port is another origin
    ({"HTTP_SEC_FETCH_SITE": "cross-site", **_JSON}, 403),
    ({"HTTP_SEC_FETCH_SITE": "same-site", **_JSON}, 403),
    ({"HTTP_ORIGIN": "http://127.0.0.1:8765", "CONTENT_TYPE": "application/x-www-form-urlencoded"}, 415),
    ({"HTTP_ORIGIN": "http://127.0.0.1:8765", "CONTENT_TYPE": "text/plain"}, 415),
    ({"HTTP_ORIGIN": "http://127.0.0.1:8765", "CONTENT_TYPE": "multipart/form-data; boundary=x"}, 415),
    ({}, 415),
]
#: (--host, the Host header, answered) : a DNS name of another site pointing at the address (rebinding) is refused.
_HOSTS = [
    ("127.0.0.1", "127.0.0.1:8765", True), ("127.0.0.1", "localhost:8765", True), ("127.0.0.1", "[::1]:8765", True),
    ("127.0.0.1", "LOCALHOST", True), ("localhost", "127.0.0.1:8765", True), ("::1", "[::1]:8765", True),
    ("127.0.0.1", "evil.example:8765", False), ("127.0.0.1", "127.0.0.1.nip.io:8765", False),
    ("127.0.0.1", "", False), ("127.0.0.1", "::1", False), ("127.0.0.1", "127.0.0.1:x", False),
    ("127.0.0.1", "127.0.0.1@evil.example", False),
    ("192.0.2.1", "192.0.2.1:8765", True), ("192.0.2.1", "192.0.2.1", True),
    ("192.0.2.1", "127.0.0.1:8765", False), ("192.0.2.1", "localhost:8765", False),
    ("192.0.2.1", "192.0.2.1.nip.io:8765", False), ("192.0.2.1", "evil.example:8765", False),
    ("192.0.2.1", "192.0.2.10:8765", False), ("192.0.2.1", "", False),
    ("mybox.LAN", "MYBOX.lan:8765", True), ("mybox.lan", "mybox.lan.evil.example", False),
    ("2001:db8::1", "[2001:db8::1]:8765", True), ("[2001:db8::1]", "[2001:DB8::1]", True),
    ("2001:db8::1", "[2001:db8::2]:8765", False), ("2001:db8::1", "2001:db8::1", False),
    ("0.0.0.0", "evil.example:8765", True), ("::", "evil.example", True), ("", "anything", True),  # (wildcard)
]


@pytest.mark.parametrize("headers, code", _CROSS)
def test_an_open_from_another_origin_or_not_as_json_is_refused(folder, headers, code):
    app, calls = _guarded(folder)
    assert _call(app, "POST", "/api/episode/3/open", headers) == code
    assert calls == [] and app.cache.status(3)["state"] == "none"


@pytest.mark.parametrize("host, header, answered", _HOSTS)
def test_a_request_naming_another_host_is_refused_on_the_loopback_and_on_one_address(folder, host, header,
                                                                                     answered):
    """``--host`` one address or name: a Host header (its port aside) naming another is 403 (one line naming both),
    on every route, with the token too; on a wildcard address any Host is answered (the token stands guard)."""
    token = None if host in ("127.0.0.1", "localhost", "::1") else "s3cret-token"
    app, calls = _guarded(folder, token=token, host=host)
    for path in ("/api/run", "/api/episode/3/status"):
        code, body = _answer(app, "GET", path, {"HTTP_HOST": header}, "token=s3cret-token")
        assert code == (200 if answered else 403), (path, body)
        assert answered or b"is refused: this explorer answers " + host.strip("[]").lower().encode() in body
    if not answered:
        assert _call(app, "POST", "/api/episode/3/open", {"HTTP_HOST": header, **_JSON}, "token=s3cret-token") == 403
    assert calls == [] and app.cache.status(3)["state"] == "none"


def test_a_wrong_host_is_refused_even_with_the_right_token(folder):
    """Off the loopback on one address: the token does not stand in for the Host check (a page reached through a
    rebinding name that somehow holds the token is still refused), and the Host does not stand in for the token."""
    app, calls = _guarded(folder, token="s3cret-token", host="192.0.2.1")
    cookie = {"HTTP_COOKIE": "rlviz_explore_token=s3cret-token"}
    for query, headers in (("token=s3cret-token", {}), ("", cookie)):
        code, body = _answer(app, "GET", "/api/run", {"HTTP_HOST": "evil.example:8765", **headers}, query)
        assert code == 403 and b"'evil.example:8765' is refused" in body and b"192.0.2.1 only" in body
        code, body = _answer(app, "POST", "/api/episode/3/open",
                             {"HTTP_HOST": "evil.example:8765", "HTTP_ORIGIN": "http://evil.example:8765", **_JSON,
                              **headers}, query)
        assert code == 403 and b"evil.example:8765" in body
        assert _call(app, "GET", "/api/run", {"HTTP_HOST": "192.0.2.1:8765", **headers}, query) == 200
    code, body = _answer(app, "GET", "/api/run", {"HTTP_HOST": "192.0.2.1:8765"})
    assert code == 403 and b"token" in body
    assert calls == [] and app.cache.status(3)["state"] == "none"


def test_off_the_loopback_the_token_does_not_switch_the_cross_origin_guard_off(folder):
    """The app as ``--host 0.0.0.0`` serves it (any Host name, the token required): a request carrying the token's
    cookie is still refused from another origin or not as JSON, as on the loopback."""
    app, calls = _guarded(folder, token="s3cret-token", host="0.0.0.0")
    cookie = {"HTTP_COOKIE": "rlviz_explore_token=s3cret-token"}
    for headers, code in _CROSS:
        assert _call(app, "POST", "/api/episode/3/open", {**headers, **cookie}) == code, headers
        assert _call(app, "POST", "/api/episode/3/open", headers, "token=s3cret-token") == code, headers
    assert calls == [] and app.cache.status(3)["state"] == "none"


def test_a_same_origin_json_open_starts_the_render(folder):
    app, calls = _guarded(folder)
    for headers in ({"HTTP_ORIGIN": "http://127.0.0.1:8765", "HTTP_SEC_FETCH_SITE": "same-origin", **_JSON}, _JSON):
        assert _call(app, "POST", "/api/episode/2/open", headers) == 200
    import time

    end = time.monotonic() + 30
    while app.cache.status(2)["state"] == "rendering" and time.monotonic() < end:
        time.sleep(0.05)
    assert calls and set(calls) == {2}


@pytest.mark.parametrize("path", ["/", "/api/run", "/api/heatmap", "/api/cell?x=1&y=1", "/assets/explore.js",
                                  "/api/episode/1/status", "/api/episode/1/open"])
def test_with_a_token_every_route_needs_it(folder, path):
    app, calls = _guarded(folder, token="s3cret-token")
    path, _, query = path.partition("?")
    method = "POST" if path.endswith("/open") else "GET"
    for bad in ("", "token=wrong", "token=", "tok=s3cret-token", "token=s3cret-token2"):
        assert _call(app, method, path, _JSON, "&".join(q for q in (query, bad) if q)) == 403, bad
    assert _call(app, method, path, {**_JSON, "HTTP_COOKIE": "rlviz_explore_token=nope"}, query) == 403
    assert _call(app, method, path, {**_JSON, "HTTP_COOKIE": "a=b; rlviz_explore_token=s3cret-token"}, query) != 403
    assert _call(app, method, path, {**_JSON, "HTTP_HOST": "evil.example"}, "token=s3cret-token") == 403
