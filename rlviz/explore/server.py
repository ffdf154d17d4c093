"""The explorer's web server: the page, its assets, and the run's data as JSON; nothing else.

The standard library's WSGI server (:mod:`wsgiref`, one thread per request) runs :class:`ExploreApp`; Werkzeug
(the ``rlviz[explore]`` extra) parses the API's requests and sends the videos (Range and conditional requests).
Werkzeug loads after the first page (its import is most of the start-up otherwise): the page, its assets and the
run's data are answered from bytes read at start.

No route takes a path: the routes are a fixed table, episodes are whole numbers in ASCII digits (no sign, no dot,
no leading zero), assets and video variants come from fixed lists, and every file served is resolved inside the
run folder first (:func:`~rlviz.explore.index.inside`), so no URL reaches a file outside the folder. Every
request passes :class:`~rlviz.explore.gate.Gate` first (its Host, its origin, the token off the loopback)."""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from ..errors import RlvizError, UsageError, require
from .cache import EpisodeCache
from .gate import HEADERS, LOOPBACK_NAMES, Answer, Gate, host_names, json_answer
from .index import RunIndex
from .replay import EpisodeRenderer

__all__ = ["ASSETS", "ExploreApp", "create_app", "make_server", "open_run", "serve"]

#: The page's files: name -> (package folder holding it, beside this one; MIME type). Read by path: the report
#: package is not imported for its files (the first page waits for no import).
ASSETS = {"explore.js": ("explore", "text/javascript"), "explore.css": ("explore", "text/css"),
          "page.js": ("report", "text/javascript"), "page.css": ("report", "text/css")}
_PACKAGE = Path(__file__).resolve().parent.parent
#: /api/episode/<n>/<what>: n in ASCII digits, no leading zero, at most 10 of them.
_EPISODE = re.compile(r"/api/episode/(0|[1-9][0-9]{0,9})/(open|status|trace|video\.mp4)", re.ASCII)
#: Episode numbers above this are answered 404 without a lookup.
_MAX_EPISODE = 10**9


class _Abort(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def open_run(config: Any) -> tuple[RunIndex, EpisodeCache]:
    """The run of an ExploreConfig and its cache (UsageError, one line, for a folder that is not a run)."""
    index = RunIndex(config.out)
    renderer = _renderer(index, config)
    return index, EpisodeCache(index.root, renderer)


def _renderer(index: RunIndex, config: Any) -> Any:
    try:
        return EpisodeRenderer(index.options, config.checkpoint, config.trust_checkpoint, config.device,
                               base=index.root.parent, job=index.job, steps=index.steps, rows=index.episode)
    except RlvizError as exc:  # (a name the run may not use, too) the page still opens; each episode says why
        message, kind = str(exc), type(exc)

        def refuse(n: int, folder: Path) -> Path:
            raise kind(message)

        return refuse


def create_app(index: RunIndex, cache: EpisodeCache, hosts: tuple[str, ...] = (), token: str | None = None) -> Any:
    """The WSGI app serving ``index``'s run behind its gate (:class:`~rlviz.explore.gate.Gate`); ``hosts``: the
    Host names answered (:func:`~rlviz.explore.gate.host_names`; empty: any); ``token``: the token every request
    must carry (None: none, on the loopback)."""
    return Gate(ExploreApp(index, cache), token, hosts)


def _finite(x: Any) -> Any:
    """``x`` with NaN and infinities (a run's JSON may hold them; JSON does not) as None."""
    if isinstance(x, float):
        return x if x - x == 0 else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


class ExploreApp:
    """The explorer as a WSGI application. The first answer of the run's data starts loading Werkzeug and the
    agents in a thread (the renderer's ``warm``), so that the first episode opened waits for its replay only, and
    the first page for nothing."""

    def __init__(self, index: RunIndex, cache: EpisodeCache):
        self.index, self.cache = index, cache
        data = {**index.page_data(), "variants": list(cache.variants) if index.replayable else []}
        self.page = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).encode()
        self._pending = [True]
        self.routes = {"/": ("GET", self.home), "/api/run": ("GET", self.run), "/api/heatmap": ("GET", self.heatmap),
                       "/api/cell": ("GET", self.cell)}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        try:
            response = self.dispatch(environ)
        except _Abort as exc:
            response = json_answer({"error": exc.message}, exc.code)
        except Exception as exc:  # noqa: BLE001 - one request's failure is its answer; the server goes on
            response = json_answer({"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}, 500)
        return response(environ, start_response)

    def dispatch(self, environ: dict[str, Any]) -> Any:
        # PATH_INFO: the URL's path %-decoded into latin-1 (WSGI's rule); its bytes are UTF-8
        path = environ.get("PATH_INFO", "").encode("latin-1", "replace").decode("utf-8", "replace")
        method = environ.get("REQUEST_METHOD", "")
        if path.startswith("/assets/"):
            handler: Any = ("GET", lambda e: self.asset(path[len("/assets/"):]))
        elif (m := _EPISODE.fullmatch(path)) is not None:
            what = m.group(2)
            handler = ("POST" if what == "open" else "GET", lambda e: self.episode(e, int(m.group(1)), what))
        elif path in self.routes:
            handler = self.routes[path]
        else:
            raise _Abort(404, "not found")
        allowed, call = handler
        if method != allowed and not (allowed == "GET" and method == "HEAD"):
            raise _Abort(405, "method not allowed")
        return call(environ)

    # -- the page and the run's data ---------------------------------------------------------------------------
    def home(self, environ: dict[str, Any]) -> Answer:
        return Answer((_PACKAGE / "explore" / "explore.html").read_bytes(), mime="text/html; charset=utf-8")

    def asset(self, name: str) -> Answer:
        if name not in ASSETS:
            raise _Abort(404, "not found")
        package, mime = ASSETS[name]
        return Answer((_PACKAGE / package / name).read_bytes(), mime=mime + "; charset=utf-8")

    def run(self, environ: dict[str, Any]) -> Any:
        answer = Answer(self.page)
        if not self._pending[0]:
            return answer
        self._pending[0] = False

        def then_warm(environ: dict[str, Any], start_response: Any) -> Any:  # (after the answer is sent)
            yield from answer(environ, start_response)
            threading.Thread(target=self._warm, name="rlviz-explore-warm", daemon=True).start()

        return then_warm

    def _warm(self) -> None:  # Werkzeug, the heatmap's cells and the agents: loaded while the user looks at the page
        import werkzeug.utils  # noqa: F401 - (the API's requests and the videos)

        try:
            self.index.heatmap  # noqa: B018 - (read now)
        except UsageError:
            pass  # (each cell asked says so)
        load = getattr(self.cache.renderer, "warm", None)
        if load is not None and self.index.replayable:
            load()

    def heatmap(self, environ: dict[str, Any]) -> Answer:
        """The heatmap's counts as the page draws them."""
        if not self.index.has_heatmap:
            raise _Abort(404, "not found")
        try:
            return json_answer(self.index.heatmap_view())
        except UsageError as exc:
            raise _Abort(409, str(exc)) from None

    def cell(self, environ: dict[str, Any]) -> Answer:
        """The episodes of a heatmap cell."""
        args = _args(environ)
        x, y, layer = args.get("x", ""), args.get("y", ""), args.get("layer") or None
        if not (x.isascii() and y.isascii() and x.isdigit() and y.isdigit() and len(x) < 7 and len(y) < 7):
            raise _Abort(400, "x and y: whole numbers (a heatmap pixel)")
        try:
            rows = self.index.cell(int(x), int(y), layer)
        except UsageError as exc:
            raise _Abort(400, str(exc)) from None
        return json_answer({"columns": self.index.columns, "episodes": rows})

    # -- one episode: open (render on demand), status, per-step trace and video of each variant ------------------
    def episode(self, environ: dict[str, Any], n: int, what: str) -> Any:
        row = self.index.episode(n) if n <= _MAX_EPISODE else None
        if row is None or not self.index.replayable:
            raise _Abort(404, "not found")
        if what == "open":
            return json_answer(self.cache.start(n))
        if what == "status":
            return json_answer(self.cache.status(n))
        variant = _args(environ).get("v", self.cache.variants[0])
        if variant not in self.cache.variants:
            raise _Abort(404, "not found")
        path = self.cache.video(n, variant)
        if what == "trace":
            if path is None:
                raise _Abort(409, "not rendered yet: open the episode first")
            return json_answer(_trace(path, self.cache.npz(n, variant), row, variant.removesuffix("plain").rstrip("-")))
        if path is None:
            raise _Abort(404, "not found")
        from werkzeug.utils import send_file

        resp = send_file(path, environ, mimetype="video/mp4", conditional=True, max_age=0)
        resp.headers.extend(HEADERS)
        resp.headers["Cache-Control"] = "no-cache"
        return resp


def _args(environ: dict[str, Any]) -> Any:
    """The request's query arguments (Werkzeug's parser: a MultiDict, .get gives the first value)."""
    from werkzeug.wrappers import Request

    return Request(environ).args


def _trace(video: Path, npz: Path | None, row: dict[str, Any], side: str) -> dict[str, Any]:
    """The per-step trace of one video (the report's), its failure step and attention shares, and the row."""
    from ..report.data import step_trace  # (numpy and the media reader: loaded with the first episode)

    data = step_trace(video)
    terminated = row.get(f"{side}_terminated") if side else row.get("terminated")
    if terminated is None and npz is not None:  # (a timeline run: no per-episode table; its video's .npz says)
        import numpy as np

        with np.load(npz, allow_pickle=False) as z:
            terminated = "terminated" in z.files and bool(np.asarray(z["terminated"]).any())
    data["failure_step"] = max(int(data["T"]) - 1, 0) if terminated else None
    data["episode"] = row
    data["attention"] = _attention_track(npz)
    return data


def _attention_track(npz: Path | None) -> dict[str, list[Any]]:
    """The per-step attention shares a video's .npz holds ({object: [share per step]}), when attention was on."""
    if npz is None:
        return {}
    import numpy as np

    with np.load(npz, allow_pickle=False) as z:
        return {k.removeprefix("attention ").removeprefix("attention_"): [None if v != v else round(float(v), 4)
                                                                          for v in np.asarray(z[k]).reshape(-1)]
                for k in z.files if k.startswith("attention") and np.asarray(z[k]).ndim == 1}


def make_server(host: str, port: int, app: Any) -> Any:
    """The standard library's WSGI server on (host, port) running ``app``, a thread per request (daemons: Ctrl-C
    does not wait for them), quiet (no access log). OSError when the address cannot be bound."""
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True
        request_queue_size = 64  # (the listen backlog: a page and its videos open many connections at once)

    class Handler(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - (the base class's name)
            pass

    if ":" in host:
        Server.address_family = __import__("socket").AF_INET6
    server = Server((host, port), Handler)
    server.set_app(app)
    return server


def serve(config: Any) -> int:
    """Serve the run of ``config`` (an ExploreConfig) until Ctrl-C (KeyboardInterrupt, with the cache's staging
    folders removed first)."""
    if importlib.util.find_spec("werkzeug") is None:  # (found, not imported: it loads after the first page)
        require("werkzeug", "explore", "rlviz explore")
    index, cache = open_run(config)
    loopback = config.host in LOOPBACK_NAMES
    token = None if loopback or not config.token else secrets.token_urlsafe(24)
    hosts = host_names(config.host)
    try:
        server = make_server(config.host, config.port, create_app(index, cache, hosts=hosts, token=token))
    except OSError as exc:
        raise RlvizError(f"Cannot serve on {config.host}:{config.port} ({exc.strerror}); pick another --port "
                         "(0: any free one).") from None
    if not loopback:
        print(f"rlviz explore: WARNING: serving on {config.host}, off the loopback: anyone who can reach this "
              "machine can open the run and make it render" + (" (with --no-token, without even a token)"
                                                                  if token is None else "; the URL's token is required")
              + (f"; requests must name {config.host} as their Host." if hosts else "; on a wildcard address the "
                 "Host header is not checked (the machine answers to all its names)."), file=sys.stderr, flush=True)
    where = "127.0.0.1" if config.host == "localhost" else config.host
    url = (f"http://{f'[{where}]' if ':' in where else where}:{server.server_port}/"
           + (f"?token={token}" if token else ""))
    print(f"rlviz explore: serving {index.root} at {url} (Ctrl-C stops)", flush=True)
    if config.browser:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.server_close()
        cache.clean()
        sys.stdout.flush()
    raise KeyboardInterrupt  # nothing else ends it: exit 130, nothing half-written left
