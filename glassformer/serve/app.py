"""The explorer's web server: an ASGI app (Starlette) serving one page, its asset files and the
JSON actions of `api.py`; and `make_server`, which binds it to a port under uvicorn.

Routes:
    GET  /                      the explorer page (assets/explorer.html)
    GET  /assets/NAME           the front end's files, from the package: report.css and
                                heatmap.js (the static report's own), explorer.css, explorer.js
    GET  /api/models            the models this server may open, by id
    POST /api/ACTION            load, run, step, attention, heads, neuron, cross, tile, generate,
                                intervene, fidelity: a JSON body in, strict JSON out
    POST /api/report, /api/trace   the run as the self-contained HTML report / its trace as JSON

Safe by default: bound to 127.0.0.1 unless told otherwise; the Host header must name this
machine (no DNS rebinding); a request body over MAX_BODY is refused (413) before it is read in
full; every error is a JSON {"error": message} with a 4xx status, and an unexpected one is a 500
with a one-line message (the traceback goes to the log, never to the page). Model folders are
addressed only by the ids the registry made. The page loads nothing from anywhere else (its
Content-Security-Policy says so). Computation runs in worker threads so that the server keeps
answering while a model runs. Nothing here prints; uvicorn logs warnings and errors.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
from importlib import resources

from starlette.applications import Starlette
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from glassformer.errors import GlassformerError
from glassformer.serve.api import Explorer, RequestError, dumps
from glassformer.serve.sessions import NotFound, Unavailable

log = logging.getLogger("uvicorn.error")

MAX_BODY = 512 * 1024  # bytes of a request body
ASSETS = {  # name -> (package, content type)
    "report.css": ("glassformer.explain", "text/css; charset=utf-8"),
    "heatmap.js": ("glassformer.explain", "text/javascript; charset=utf-8"),
    "explorer.css": ("glassformer.explain", "text/css; charset=utf-8"),
    "explorer.js": ("glassformer.explain", "text/javascript; charset=utf-8"),
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
    "fidelity",
)  # fmt: skip
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@functools.cache
def asset(name: str) -> bytes:
    return (resources.files(ASSETS[name][0]) / "assets" / name).read_bytes()


def json_response(data, status: int = 200) -> Response:
    return Response(dumps(data), status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def read_json(request: Request) -> dict:
    """The body as a JSON object, refused beyond MAX_BODY bytes (before reading it in full)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise RequestError(413, _too_large(int(declared) if declared.isdigit() else None))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise RequestError(413, _too_large(None))
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RequestError(400, f"the body must be a JSON object ({str(e)[:120]})") from None
    if not isinstance(body, dict):
        raise RequestError(400, 'the body must be a JSON object, e.g. {"model": ..., "text": ...}')
    return body


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _too_large(size: int | None) -> str:
    told = f" is {size / 1e6:.1f} MB;" if size else " is too large;"
    return (
        f"the request{told} the explorer takes at most {MAX_BODY // 1024} KB "
        "(a prompt longer than the model's context cannot run anyway: shorten it)"
    )


def create_app(explorer: Explorer, hosts: list[str] | None = None) -> Starlette:
    """The ASGI app over an Explorer. hosts: the Host header values allowed (None: this
    machine's loopback names; ["*"]: any)."""

    async def page(request: Request) -> Response:
        return Response(
            asset_text("explorer.html"),
            media_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-cache"},
        )

    async def asset_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return error(404, f"no asset {name[:60]!r}")
        return Response(
            asset(name), media_type=ASSETS[name][1], headers={"Cache-Control": "no-cache"}
        )

    async def models(request: Request) -> Response:
        return json_response(explorer.models())

    async def action(request: Request) -> Response:
        name = request.path_params["action"]
        if name not in ACTIONS:
            return error(404, f"no action {name[:40]!r}; the actions are {', '.join(ACTIONS)}")
        body = await read_json(request)
        call = getattr(explorer, "summary" if name == "run" else name)
        return json_response(await run_in_threadpool(call, body))

    async def report(request: Request) -> Response:
        body = await read_json(request)
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
        chunks = await run_in_threadpool(lambda: _first(explorer.trace_json(body)))
        return StreamingResponse(
            iterate_in_threadpool(chunks),
            media_type="application/json",
            headers={"Content-Disposition": 'attachment; filename="glassformer-trace.json"'},
        )

    async def on_request_error(request: Request, e: RequestError) -> Response:
        return error(e.status, str(e))

    async def on_library_error(request: Request, e: GlassformerError) -> Response:
        status = 404 if isinstance(e, NotFound) else 422 if isinstance(e, Unavailable) else 400
        return error(status, str(e))

    async def on_http(request: Request, e: HTTPException) -> Response:
        return error(e.status_code, e.detail or "request refused")

    async def on_anything(request: Request, e: Exception) -> Response:
        log.exception("glassformer explorer: %s %s failed", request.method, request.url.path)
        return error(500, f"internal error ({type(e).__name__}); the server log has the details")

    routes = [
        Route("/", page),
        Route("/assets/{name}", asset_file),
        Route("/api/models", models),
        Route("/api/report", report, methods=["POST"]),
        Route("/api/trace", trace, methods=["POST"]),
        Route("/api/{action}", action, methods=["POST"]),
    ]
    allowed = hosts if hosts is not None else list(LOOPBACK) + ["[::1]"]
    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed)],
        exception_handlers={
            RequestError: on_request_error,
            GlassformerError: on_library_error,
            HTTPException: on_http,
            Exception: on_anything,
        },
    )


def _first(chunks):
    """Start a generator (so that a bad request fails before the response starts)."""
    first = next(chunks)

    def all_chunks():
        yield first
        yield from chunks

    return all_chunks()


@functools.cache
def asset_text(name: str) -> str:
    return (resources.files("glassformer.explain") / "assets" / name).read_text(encoding="utf-8")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port), or one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise GlassformerError(
            f"cannot listen on {host}:{port} ({e.strerror or e}); choose another --port "
            "(0 picks a free one)"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def make_server(explorer: Explorer, host: str = "127.0.0.1", port: int = 8000, log_level="warning"):
    """(uvicorn.Server, bound socket, URL): call `server.run(sockets=[sock])` to serve; set
    `server.should_exit = True` to stop."""
    import uvicorn

    sock = bind(host, port)
    hosts = None if host in LOOPBACK else ["*"]
    config = uvicorn.Config(
        create_app(explorer, hosts), log_level=log_level, access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return server, sock, f"http://{shown}:{actual}/"
