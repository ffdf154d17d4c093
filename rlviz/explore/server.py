"""The explorer's web server (Flask): the page, its assets, and the run's data as JSON; nothing else.

No route takes a path: episodes are whole numbers (Flask's ``int`` converter: no sign, no dots), assets come from
a fixed list, and every file served is resolved inside the run folder first (:func:`~rlviz.explore.index.inside`),
so no URL reaches a file outside the folder. Requests naming another host are refused (a page elsewhere cannot
reach the server through a DNS name pointing at 127.0.0.1)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import webbrowser
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RlvizError, UsageError, require
from .cache import EpisodeCache
from .index import RunIndex
from .replay import EpisodeRenderer

__all__ = ["create_app", "open_run", "serve", "ASSETS"]

#: The page's files: name -> (package holding it, MIME type).
ASSETS = {"explore.js": ("rlviz.explore", "text/javascript"), "explore.css": ("rlviz.explore", "text/css"),
          "page.js": ("rlviz.report", "text/javascript"), "page.css": ("rlviz.report", "text/css")}
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
        "connect-src 'self'")
#: Episode numbers above this are answered 404 without a lookup.
_MAX_EPISODE = 10**9


def open_run(config: Any) -> tuple[RunIndex, EpisodeCache]:
    """The run of an ExploreConfig and its cache (UsageError, one line, for a folder that is not a run)."""
    index = RunIndex(config.out)
    renderer = _renderer(index, config)
    return index, EpisodeCache(index.root, renderer)


def _renderer(index: RunIndex, config: Any) -> Any:
    try:
        return EpisodeRenderer(index.options, config.checkpoint, config.trust_checkpoint, config.device,
                               base=index.root.parent)
    except UsageError as exc:  # the page still opens; each episode says why it cannot render
        message = str(exc)

        def refuse(n: int, folder: Path) -> Path:
            raise UsageError(message)

        return refuse


def create_app(index: RunIndex, cache: EpisodeCache, hosts: tuple[str, ...] = ()) -> Any:
    """The Flask app serving ``index``'s run; ``hosts``: the Host header values accepted (empty: any). The first
    answer of the run's data starts loading the agent in a thread (the renderer's ``warm``), so that the first
    episode opened waits for its replay only, and the first page for nothing."""
    flask = require("flask", "explore", "rlviz explore")
    app = flask.Flask(__name__, static_folder=None, template_folder=None)
    app.config.update(MAX_CONTENT_LENGTH=1024)
    _guards(app, flask, hosts)
    _page_routes(app, flask, index, cache)
    _heatmap_routes(app, flask, index)
    _episode_routes(app, flask, index, cache)
    return app


def _fail(flask: Any, code: int, message: str) -> Any:
    return flask.make_response(flask.jsonify(error=message), code)


def _guards(app: Any, flask: Any, hosts: tuple[str, ...]) -> None:
    """The Host check, the security headers, and JSON answers for 400/404/405."""

    @app.before_request
    def check_host() -> Any:
        if hosts and flask.request.host not in hosts:
            return _fail(flask, 400, "unexpected Host header")
        return None

    @app.after_request
    def headers(resp: Any) -> Any:
        resp.headers["Content-Security-Policy"] = _CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers.setdefault("Cache-Control", "no-store")
        return resp

    for code, text in ((400, "bad request"), (404, "not found"), (405, "method not allowed")):
        app.register_error_handler(code, lambda _, c=code, t=text: _fail(flask, c, t))


def _page_routes(app: Any, flask: Any, index: RunIndex, cache: EpisodeCache) -> None:
    """The page, its assets, the run's data and the heatmap's cells."""
    page = json.dumps(index.page_data(), separators=(",", ":"), allow_nan=False).encode()
    pending = [True]

    def warm() -> None:  # the heatmap's cells and the agent: loaded while the user looks at the first page
        try:
            index.heatmap  # noqa: B018 - (read now)
        except UsageError:
            pass  # (each cell asked says so)
        load = getattr(cache.renderer, "warm", None)
        if load is not None and index.replayable:
            load()

    @app.get("/")
    def home() -> Any:
        html = resources.files(__package__).joinpath("explore.html").read_bytes()
        return flask.Response(html, mimetype="text/html")

    @app.get("/assets/<name>")
    def asset(name: str) -> Any:
        if name not in ASSETS:
            flask.abort(404)
        package, mime = ASSETS[name]
        return flask.Response(resources.files(package).joinpath(name).read_bytes(), mimetype=mime)

    @app.get("/api/run")
    def run() -> Any:
        resp = flask.Response(page, mimetype="application/json")
        if pending[0]:  # (after the answer is sent, once, in a thread of its own)
            pending[0] = False
            resp.call_on_close(lambda: threading.Thread(target=warm, name="rlviz-explore-warm", daemon=True).start())
        return resp



def _heatmap_routes(app: Any, flask: Any, index: RunIndex) -> None:
    """The heatmap's counts as the page draws them, and the episodes of a cell."""

    @app.get("/api/heatmap")
    def heatmap() -> Any:
        if not index.has_heatmap:
            flask.abort(404)
        try:
            return flask.jsonify(index.heatmap_view())
        except UsageError as exc:
            return _fail(flask, 409, str(exc))

    @app.get("/api/cell")
    def cell() -> Any:
        args = flask.request.args
        x, y, layer = args.get("x", ""), args.get("y", ""), args.get("layer") or None
        if not (x.isdigit() and y.isdigit() and len(x) < 7 and len(y) < 7):
            return _fail(flask, 400, "x and y: whole numbers (a heatmap pixel)")
        try:
            rows = index.cell(int(x), int(y), layer)
        except UsageError as exc:
            return _fail(flask, 400, str(exc))
        return flask.jsonify(columns=index.columns, episodes=rows)


def _episode_routes(app: Any, flask: Any, index: RunIndex, cache: EpisodeCache) -> None:
    """Open (render on demand), status, per-step trace and video of one episode."""

    def episode_or_404(n: int) -> dict[str, Any]:
        row = index.episode(n) if n <= _MAX_EPISODE else None
        if not flask.request.path.startswith(f"/api/episode/{n}/"):  # ASCII digits only (not a fullwidth "１")
            row = None
        if row is None or not index.replayable:
            flask.abort(404)
        return row  # type: ignore[return-value]  # (abort raises)

    @app.post("/api/episode/<int:n>/open")
    def open_episode(n: int) -> Any:
        episode_or_404(n)
        return flask.jsonify(cache.start(n))

    @app.get("/api/episode/<int:n>/status")
    def status(n: int) -> Any:
        episode_or_404(n)
        return flask.jsonify(cache.status(n))

    @app.get("/api/episode/<int:n>/trace")
    def trace(n: int) -> Any:
        row = episode_or_404(n)
        video = cache.video(n)
        if video is None:
            return _fail(flask, 409, "not rendered yet: open the episode first")
        from ..report.data import step_trace  # (numpy and the media reader: loaded with the first episode)

        data = step_trace(video)
        data["failure_step"] = max(int(data["T"]) - 1, 0) if row.get("terminated") else None
        data["episode"] = row
        data["attention"] = _attention_track(cache.npz(n))
        return flask.jsonify(data)

    @app.get("/api/episode/<int:n>/video.mp4")
    def video(n: int) -> Any:
        episode_or_404(n)
        path = cache.video(n)
        if path is None:
            flask.abort(404)
        resp = flask.send_file(path, mimetype="video/mp4", conditional=True, max_age=0)
        resp.headers["Cache-Control"] = "no-cache"
        return resp


def _attention_track(npz: Path | None) -> dict[str, list[Any]]:
    """The per-step attention shares a video's .npz holds ({object: [share per step]}), when attention was on."""
    if npz is None:
        return {}
    import numpy as np

    with np.load(npz, allow_pickle=False) as z:
        return {k.removeprefix("attention ").removeprefix("attention_"): [None if v != v else round(float(v), 4)
                                                                          for v in np.asarray(z[k]).reshape(-1)]
                for k in z.files if k.startswith("attention") and np.asarray(z[k]).ndim == 1}


def serve(config: Any) -> int:
    """Serve the run of ``config`` (an ExploreConfig) until Ctrl-C (KeyboardInterrupt, with the cache's staging
    folders removed first)."""
    require("flask", "explore", "rlviz explore")
    from werkzeug.serving import make_server

    index, cache = open_run(config)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    loopback = config.host in ("127.0.0.1", "localhost", "::1")
    try:
        server = make_server(config.host, config.port, create_app(index, cache), threaded=True)
    except OSError as exc:
        raise RlvizError(f"Cannot serve on {config.host}:{config.port} ({exc.strerror}); pick another --port "
                         "(0: any free one).") from None
    port = server.server_port
    if loopback:
        server.app = create_app(index, cache, hosts=(f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"))
    url = f"http://{'127.0.0.1' if loopback else config.host}:{port}/"
    print(f"rlviz explore: serving {index.root} at {url} (Ctrl-C stops)", flush=True)
    if config.browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()  # (werkzeug's returns on Ctrl-C, its KeyboardInterrupt swallowed)
    finally:
        server.server_close()
        cache.clean()
        sys.stdout.flush()
    raise KeyboardInterrupt  # nothing else ends it: exit 130, nothing half-written left
