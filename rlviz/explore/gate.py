"""What every request to the explorer passes before the app (:class:`Gate`), and the whole answers it and the app
send (:class:`Answer`).

The Host check: a server on one address (``--host 127.0.0.1``, ``--host 192.168.1.5``, ``--host mybox.lan``)
answers requests naming that address only, and on the loopback its other names (``localhost``, ``::1``); a page
elsewhere cannot reach it through a DNS name of its own pointing at the address (DNS rebinding). On a wildcard
(``0.0.0.0``, ``::``) the machine has as many names as it has addresses: no Host is checked there, and the token
stands guard alone."""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from typing import Any

__all__ = ["HEADERS", "LOOPBACK_NAMES", "TOKEN_COOKIE", "Answer", "Gate", "cross_site", "host_names", "host_refused",
           "json_answer"]

_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
        "connect-src 'self'")
#: The headers of every answer (the videos' too).
HEADERS = [("Content-Security-Policy", _CSP), ("X-Content-Type-Options", "nosniff"),
           ("Referrer-Policy", "no-referrer")]
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 415: "Unsupported Media Type", 500: "Internal Server Error"}
#: The cookie that carries the token after the page was opened with ``?token=``.
TOKEN_COOKIE = "rlviz_explore_token"
#: The loopback's names: a server on a loopback address answers a Host naming any of them.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: A Host header: a name or IPv4 address, or an IPv6 address in brackets; then an optional port.
_HOST = re.compile(r"(?:\[([0-9A-Za-z:.%_-]+)\]|([0-9A-Za-z._-]+))(?::[0-9]{1,5})?", re.ASCII)
#: The most of a request's body the server reads (the page's POSTs send ``{}``); more is refused with the rest.
_MAX_BODY = 64 << 10


class Answer:
    """A whole answer in bytes (the app's own: JSON, the page and its assets)."""

    def __init__(self, body: bytes, code: int = 200, mime: str = "application/json"):
        self.body, self.code, self.mime = body, code, mime

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response(f"{self.code} {_REASONS.get(self.code, '')}".strip(),
                       [("Content-Type", self.mime), ("Content-Length", str(len(self.body))), *HEADERS,
                        ("Cache-Control", "no-store")])
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.body]


def json_answer(data: Any, code: int = 200) -> Answer:
    return Answer(json.dumps(data, separators=(",", ":")).encode(), code)


def host_names(host: str) -> tuple[str, ...]:
    """The Host names (lower case, no port, IPv6 without brackets) a server bound to ``host`` (``--host``) answers:
    ``host`` itself, with the loopback's names when it is a loopback address; none on a wildcard (``0.0.0.0``,
    ``::``, empty), where any name is answered."""
    name = host.strip().removeprefix("[").removesuffix("]").lower()
    if name in ("", "0.0.0.0", "::"):
        return ()
    try:
        loopback = ipaddress.ip_address(name).is_loopback
    except ValueError:
        loopback = name == "localhost"
    return tuple(dict.fromkeys((name, *LOOPBACK_NAMES))) if loopback else (name,)


def host_refused(environ: dict[str, Any], names: tuple[str, ...]) -> tuple[int, str] | None:
    """(403, why) when the request's Host header (its port aside) is none of ``names``; None when it is one of them
    or ``names`` is empty (a wildcard address: no Host check)."""
    if not names:
        return None
    header = environ.get("HTTP_HOST", "")
    m = _HOST.fullmatch(header)
    if m is not None and (m.group(1) or m.group(2)).lower() in names:
        return None
    return 403, (f"a request for host {header[:80]!r} is refused: this explorer answers "
                 f"{' / '.join(names)} only (a name of another site pointing here is not one of them)")


def cross_site(environ: dict[str, Any]) -> tuple[int, str] | None:
    """(status, why) when a state-changing request did not come from the explorer's own page; None when it did."""
    site = environ.get("HTTP_SEC_FETCH_SITE")
    if site is not None and site not in ("same-origin", "none"):
        return 403, f"a {site} request is refused: only the explorer's own page may open episodes"
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None and origin != f"{environ.get('wsgi.url_scheme', 'http')}://{environ.get('HTTP_HOST', '')}":
        return 403, "a request from another origin is refused: only the explorer's own page may open episodes"
    if environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower() != "application/json":
        return 415, "expected a JSON request (Content-Type: application/json)"
    return None


class Gate:
    """What every request passes before the app, in this order. Its Host (:func:`host_refused`: one of ``hosts``,
    any when empty; 403). A request that changes state (any method but GET and HEAD) must come from the explorer's
    own page: ``Sec-Fetch-Site`` same-origin (when the browser sends it), ``Origin`` this server's own (when sent)
    and a JSON body type, which a form or a page elsewhere cannot send without a CORS preflight this server never
    grants (403 / 415). With a ``token`` (``--host`` off the loopback), the token in the URL (``?token=``, as
    Jupyter's) or in the cookie it sets, compared in constant time (403 without). Each refusal: one line of JSON."""

    def __init__(self, app: Any, token: str | None = None, hosts: tuple[str, ...] = ()):
        self.app, self.token, self.hosts = app, token, hosts

    def __getattr__(self, name: str) -> Any:  # the app's own attributes (index, cache) through the gate
        return getattr(self.app, name)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        changes = environ.get("REQUEST_METHOD", "") not in ("GET", "HEAD")
        if changes:
            _drain(environ)  # (a body left unread makes the close a TCP reset: the client would lose the answer)
        refused = host_refused(environ, self.hosts) or (cross_site(environ) if changes else None)
        if refused is not None:
            return json_answer({"error": refused[1]}, refused[0])(environ, start_response)
        if self.token is None:
            return self.app(environ, start_response)
        from http.cookies import CookieError, SimpleCookie
        from urllib.parse import parse_qs

        try:
            cookie = SimpleCookie(environ.get("HTTP_COOKIE", "")).get(TOKEN_COOKIE)
        except CookieError:
            cookie = None
        if cookie is not None and hmac.compare_digest(cookie.value.encode(), self.token.encode()):
            return self.app(environ, start_response)
        given = parse_qs(environ.get("QUERY_STRING", "")).get("token", [""])[0]
        if given and hmac.compare_digest(given.encode(), self.token.encode()):
            set_cookie = ("Set-Cookie", f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/")
            return self.app(environ, lambda status, headers, *exc: start_response(status, [*headers, set_cookie], *exc))
        return json_answer({"error": "this explorer serves with a token: open the URL it printed (.../?token=...)"},
                           403)(environ, start_response)


def _drain(environ: dict[str, Any]) -> None:
    """Read the request's body (at most :data:`_MAX_BODY` bytes): no route takes one, but one left unread in the
    socket makes closing it a reset that can arrive before the answer is read."""
    try:
        length = min(max(int(environ.get("CONTENT_LENGTH") or 0), 0), _MAX_BODY)
    except ValueError:
        return
    stream = environ.get("wsgi.input")
    while length > 0 and stream is not None:
        chunk = stream.read(min(length, 8192))
        if not chunk:
            break
        length -= len(chunk)
