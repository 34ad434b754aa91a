"""The explorer's web server: an ASGI app (Starlette) serving one page, its asset files and the
JSON actions of `api.py`; and `make_server`, which binds it to a port under uvicorn.

Routes:
    GET  /                      the explorer page (assets/explorer.html)
    GET  /assets/NAME           the front end's files, from the package: report.css and
                                heatmap.js (the static report's own), explorer.css, explorer.js
    GET  /api/models            the models this server may open, by id
    GET  /api/views?model=ID    a model folder's training time-lapse (`explain.timelapse`)
    POST /api/ACTION            load, run, step, attention, heads, neuron, cross, tile, generate,
                                intervene, fidelity, overview, store, top (a unit's top examples
                                over `serve --store DIR`): a JSON body in, strict JSON out
    POST /api/report, /api/trace   the run as the self-contained HTML report / its trace as JSON

Safe by default: bound to 127.0.0.1 unless told otherwise; bound to any spelling of a loopback
address (`is_loopback`: 127.1, LOCALHOST, [::1], ...), the Host header must name this machine
(no DNS rebinding); a body must be JSON (Content-Type application/json: a page elsewhere cannot
post a form here without the browser asking first) and over MAX_BODY it is refused (413) before
it is read in full; every error is a JSON {"error": message} with a 4xx status, and an
unexpected one is a 500 with a one-line message (the traceback goes to the log once, never to
the page); a client that goes away mid-request is no error at all. Model folders are
addressed only by the ids the registry made. The page loads nothing from anywhere else (its
Content-Security-Policy says so). Computation runs in worker threads so that the server keeps
answering while a model runs. Nothing here prints; uvicorn logs warnings and errors.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import re
import socket
import threading
import time

from starlette.applications import Starlette
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from glassformer.errors import GlassformerError, param
from glassformer.explain.html_pieces import asset
from glassformer.serve.api import Explorer, dumps
from glassformer.serve.deadlines import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    BodyDeadline,
    header_deadline,
)
from glassformer.serve.fields import RequestError
from glassformer.serve.sessions import NotFound, Unavailable

log = logging.getLogger("uvicorn.error")

MAX_BODY = 512 * 1024  # bytes of a request body
MODULES = (  # the page's JavaScript: explorer.js and the ES modules it imports
    "explorer.js", "page.js", "run.js", "attention.js", "steps.js", "generate.js", "beam.js",
    "intervene.js", "compare.js", "overview.js", "tour.js", "training.js", "timelapse.js",
    "heatmap.js", "dom.js", "numbers.js", "rows.js", "readable.js", "neuron.js",
    "timelapse-chart.js", "timelapse-data.js", "modelview.js", "minimap.js", "choice.js",
    "steer.js", "corpus.js",
)  # fmt: skip
ASSETS = {  # name -> content type: the files of explain/assets the page may fetch
    "report.css": "text/css; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
    "timelapse.css": "text/css; charset=utf-8",
    **dict.fromkeys(MODULES, "text/javascript; charset=utf-8"),
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
REPORT_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
)
ACTIONS = (
    "load", "run", "step", "attention", "heads", "neuron", "cross", "tile", "generate", "intervene",
    "fidelity", "overview", "model_view", "choice", "store", "top",
)  # fmt: skip
INET_ATON = re.compile(r"[0-9a-fA-FxX.]+")  # the old forms inet_aton reads: 127.1, 0x7f.1


def address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address that `host` spells, read without the network, or None for another name:
    an IPv4 or IPv6 literal (in [brackets] too), an old IPv4 form (127.1, 0x7f.1) and the name
    localhost in any case, with or without its final dot (RFC 6761: always this machine)."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.lower() in ("localhost", "localhost."):
        return ipaddress.IPv4Address("127.0.0.1")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not INET_ATON.fullmatch(host):  # inet_aton stops at a space: read nothing else
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def is_loopback(host: str) -> bool:
    """Whether `host` spells a loopback address (this machine only), decided by parsing it:
    127.0.0.0/8 in any form, ::1 in any form, IPv4-mapped loopback (::ffff:127.0.0.1), localhost.
    0.0.0.0, :: and every other address or name are not."""
    a = address(host)
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return a is not None and a.is_loopback


def host_of(header: str) -> str:
    """The host of a Host header value, without its port ("[::1]:8000" -> "[::1]")."""
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    if header.count(":") == 1:
        return header.partition(":")[0]
    return header  # no port, or a bare IPv6 address


class HostCheck:
    """Refuse a request whose Host header does not name this machine (DNS rebinding: a page
    from elsewhere whose name was pointed at 127.0.0.1 sends its own name): allowed are every
    spelling of a loopback address and the names given (as the server was bound); "*": any."""

    def __init__(self, app, names: list[str]):
        self.app = app
        self.any = "*" in names
        self.names = {n.lower().removesuffix(".") for n in names}

    def allows(self, header: str) -> bool:
        host = host_of(header)
        return self.any or is_loopback(host) or host.lower().removesuffix(".") in self.names

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not self.allows(header):
                shown = header[:60] or "(none)"
                response = error(
                    400,
                    f"the Host header {shown!r} does not name this machine; the explorer "
                    "answers only requests to its own address (open the URL it printed)",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def json_response(data, status: int = 200) -> Response:
    return Response(dumps(data), status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def read_json(request: Request) -> dict:
    """The body as a JSON object: sent as application/json, refused beyond MAX_BODY bytes
    (before reading it in full), strict (no NaN, no number beyond float64, no key twice)."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        shown = f"{kind[:40]!r}" if kind else "none"
        raise RequestError(
            415, f"the body must be sent as Content-Type: application/json (it was {shown})"
        )
    declared = request.headers.get("content-length")
    if declared is not None and not declared.isdigit():
        raise RequestError(400, f"the Content-Length {declared[:20]!r} is not a number of bytes")
    if declared is not None and int(declared) > MAX_BODY:
        raise RequestError(413, _too_large(int(declared)))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise RequestError(413, _too_large(None))
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(
            raw.decode("utf-8"),
            parse_constant=_no_constant,
            parse_float=_finite,
            object_pairs_hook=_no_repeats,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RequestError(400, f"the body must be a JSON object ({str(e)[:120]})") from None
    if not isinstance(body, dict):
        raise RequestError(400, 'the body must be a JSON object, e.g. {"model": ..., "text": ...}')
    return body


def query(request: Request) -> dict:
    """The query string of a GET as the fields of a request (each given once)."""
    pairs = request.query_params.multi_items()
    body = dict(pairs)
    if len(body) < len(pairs):
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise RequestError(400, f"the field {twice[:40]!r} is given twice")
    return body


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite(raw: str) -> float:
    x = float(raw)
    if x in (float("inf"), float("-inf")):
        raise ValueError(f"{raw[:30]} is beyond the largest float64 number")
    return x


def _no_repeats(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice[:40]!r} is given twice")
    return out


def _too_large(size: int | None) -> str:
    told = f" is {size / 1e6:.1f} MB;" if size else " is too large;"
    return (
        f"the request{told} the explorer takes at most {MAX_BODY // 1024} KB "
        "(a prompt longer than the model's context cannot run anyway: shorten it)"
    )


def create_app(
    explorer: Explorer, hosts: list[str] | None = None, body_timeout: float = BODY_TIMEOUT
) -> Starlette:
    """The ASGI app over an Explorer. hosts: the Host header names allowed besides every
    spelling of a loopback address (None: those only; ["*"]: any); body_timeout: the seconds a
    request's body has to arrive in (`BodyDeadline`)."""
    return Starlette(
        routes=_routes(explorer),
        middleware=[
            Middleware(BodyDeadline, seconds=body_timeout),
            Middleware(HostCheck, names=hosts or []),
        ],
        exception_handlers={
            RequestError: _on_request_error,
            GlassformerError: _on_library_error,
            HTTPException: _on_http,
            ClientDisconnect: _on_disconnect,
            Exception: _on_anything,
        },
    )


def _routes(explorer: Explorer) -> list[Route]:
    """The page, its assets and the JSON actions, each answered by `explorer`."""

    async def models(request: Request) -> Response:
        return json_response(explorer.models())

    async def action(request: Request) -> Response:
        name = request.path_params["action"]
        if name == "views":
            return error(405, "the views are read with GET /api/views?model=ID")
        if name not in ACTIONS:
            return error(404, f"no action {name[:40]!r}; the actions are {', '.join(ACTIONS)}")
        body = await read_json(request)
        explorer.check(name, body)
        call = getattr(explorer, "summary" if name == "run" else name)
        return json_response(await run_in_threadpool(call, body))

    async def recorded_views(request: Request) -> Response:
        body = query(request)
        explorer.check("views", body)
        return json_response(await run_in_threadpool(explorer.views, body))

    async def report(request: Request) -> Response:
        body = await read_json(request)
        explorer.check("report", body)
        html = await run_in_threadpool(explorer.report, body)
        return Response(
            html,
            media_type="text/html; charset=utf-8",
            headers={
                "Content-Disposition": 'attachment; filename="glassformer-report.html"',
                "Content-Security-Policy": REPORT_CSP,
            },
        )

    async def trace(request: Request) -> Response:
        body = await read_json(request)
        explorer.check("trace", body)
        chunks = await run_in_threadpool(lambda: _first(explorer.trace_json(body)))
        return StreamingResponse(
            iterate_in_threadpool(chunks),
            media_type="application/json",
            headers={"Content-Disposition": 'attachment; filename="glassformer-trace.json"'},
        )

    return [
        Route("/", _page),
        Route("/assets/{name}", _asset_file),
        Route("/api/models", models),
        Route("/api/views", recorded_views),
        Route("/api/report", report, methods=["POST"]),
        Route("/api/trace", trace, methods=["POST"]),
        Route("/api/{action}", action, methods=["POST"]),
    ]


async def _page(request: Request) -> Response:
    """GET /: the explorer page."""
    return Response(
        asset("explorer.html"),
        media_type="text/html; charset=utf-8",
        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-cache"},
    )


async def _asset_file(request: Request) -> Response:
    """GET /assets/NAME: one of the front end's files (ASSETS), or 404."""
    name = request.path_params["name"]
    if name not in ASSETS:
        return error(404, f"no asset {name[:60]!r}")
    return Response(asset(name), media_type=ASSETS[name], headers={"Cache-Control": "no-cache"})


# -- errors as JSON {"error": message} ------------------------------------------------------------


async def _on_request_error(request: Request, e: RequestError) -> Response:
    """A bad request, with the status it names."""
    return error(e.status, str(e))


async def _on_library_error(request: Request, e: GlassformerError) -> Response:
    """A library error: 404 for what this server lacks, 422 for a model it cannot load, else 400."""
    status = 404 if isinstance(e, NotFound) else 422 if isinstance(e, Unavailable) else 400
    return error(status, str(e))


async def _on_http(request: Request, e: HTTPException) -> Response:
    """Starlette's own refusals (no route, wrong method), as JSON."""
    return error(e.status_code, e.detail or "request refused")


async def _on_disconnect(request: Request, e: ClientDisconnect) -> Response:
    """The client went away before its body arrived: nobody reads an answer, nothing failed."""
    log.info("glassformer explorer: %s %s: the client went away", request.method, request.url.path)
    return Response(status_code=400)


async def _on_anything(request: Request, e: Exception) -> Response:
    """An unexpected error: a 500 with one line (the traceback goes to the log, once)."""
    # One line here; the traceback follows once, from uvicorn (Starlette re-raises it).
    log.error(
        "glassformer explorer: %s %s failed (%s)",
        request.method,
        request.url.path,
        type(e).__name__,
    )
    return error(500, f"internal error ({type(e).__name__}); the server log has the details")


def _first(chunks):
    """Start a generator (so that a bad request fails before the response starts)."""
    first = next(chunks)

    def all_chunks():
        yield first
        yield from chunks

    return all_chunks()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port), or one clear error. An address
    is read here (`address`: 127.1, [::1], localhost.); only another name is looked up."""
    a = address(host)
    target = str(a) if a is not None else host
    family = socket.AF_INET6 if ":" in target else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the connections of a socket of that proto
    # only, and without it each small answer waited ~40 ms for a delayed acknowledgement.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((target, port))
    except OSError as e:
        sock.close()
        raise GlassformerError(
            f"cannot listen on {host}:{port} ({e.strerror or e}); choose another {param('port')} "
            "(0 picks a free one)"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def make_server(
    explorer: Explorer,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level="warning",
    body_timeout: float = BODY_TIMEOUT,
    header_timeout: float = HEADER_TIMEOUT,
):
    """(uvicorn.Server, bound socket, URL): call `server.run(sockets=[sock])` to serve; set
    `server.should_exit = True` to stop. body_timeout, header_timeout: the seconds a request's
    body and headers have to arrive in (`deadlines`)."""
    import uvicorn

    sock = bind(host, port)
    bound, actual = sock.getsockname()[:2]
    a = address(host)
    # Bound to this machine only (as the socket says, whatever the spelling): check the Host
    # header, allowing a name the server was bound by (it resolved to loopback); else any.
    hosts = ([] if a is not None else [host]) if is_loopback(bound) else ["*"]
    config = uvicorn.Config(
        create_app(explorer, hosts, body_timeout),
        http=header_deadline(header_timeout),
        log_level=log_level,
        access_log=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    shown = host if a is None else f"[{a}]" if a.version == 6 else str(a)
    return server, sock, f"http://{shown}:{actual}/"


@contextlib.contextmanager
def serving(
    explorer: Explorer,
    host: str = "127.0.0.1",
    port: int = 0,
    body_timeout: float = BODY_TIMEOUT,
    header_timeout: float = HEADER_TIMEOUT,
):
    """The explorer served from a background thread while the block runs: yields its URL (port
    0: a free one); stopped at the end. For tests and screenshots; `glassformer serve` runs
    `make_server` in the foreground."""
    server, sock, url = make_server(
        explorer, host, port, body_timeout=body_timeout, header_timeout=header_timeout
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
