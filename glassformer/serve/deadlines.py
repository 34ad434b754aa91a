"""How long a client of the explorer may take to send a request: its headers, then its body.

A client that opens a connection and sends part of a request, then nothing (a dropped laptop, a
slow-loris attack), would otherwise hold a connection, and for a body a task, for ever: uvicorn
times out only keep-alive connections that are idle between requests. Two bounds close them:

- `HeaderDeadline`, the HTTP protocol the server runs (uvicorn's h11 protocol, timed): a request
  whose headers have not all arrived `header_timeout` seconds after its first byte, or after the
  connection opened, is closed; one that had sent part of its headers is answered 408 Request
  Timeout and said in the log in one line, a connection that never sent a byte is closed without
  a word (browsers open spare connections that they may never use);
- `BodyDeadline`, ASGI middleware: a request whose body has not arrived in full `body_timeout`
  seconds after its headers is answered 408 (when no answer has started) and said in one line.

Neither bound covers the work or the answer: once the request is in, a slow model and a streamed
trace take the time they need. Not here: the limits on what a request may hold (`app.read_json`,
MAX_BODY) and the Host check (`app.create_app`).
"""

from __future__ import annotations

import asyncio
import json
import logging

import h11
from starlette.responses import Response
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("uvicorn.error")

# Seconds a request's whole body has to arrive in, from its headers on: the explorer's largest
# body (app.MAX_BODY) takes a fraction of a second even on a slow link.
BODY_TIMEOUT = 10.0
# Seconds a request's headers have to arrive in, from its first byte (or the connection's
# opening): a few hundred bytes, sent at once by every browser and HTTP library.
HEADER_TIMEOUT = 10.0


def timeout_response(message: str) -> Response:
    """408 Request Timeout with the explorer's JSON error body, and Connection: close."""
    body = json.dumps({"error": message})
    return Response(body, 408, media_type="application/json", headers={"Connection": "close"})


# -- the headers ----------------------------------------------------------------------------------


def header_deadline(seconds: float) -> type[H11Protocol]:
    """The HTTP protocol class for uvicorn.Config(http=...) with this header deadline."""
    return type("HeaderDeadline", (HeaderDeadline,), {"seconds": seconds})


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (see the module's
    docstring): armed when the connection opens and when the first bytes of a request come on an
    idle connection, disarmed once h11 has read the whole head (the body's deadline takes over)."""

    seconds = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # a request's head has begun (or is still coming): from its first byte
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self.header_timer is None:
            self.header_timer = self.loop.call_later(self.seconds, self._late)

    def _disarm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _late(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:  # part of a request's head: answered and said
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            log.warning(
                "glassformer explorer: a request from %s: its headers did not arrive within %g s; "
                "closed with 408 Request Timeout",
                client,
                self.seconds,
            )
            message = f"the request's headers did not arrive within {self.seconds:g} s"
            response = timeout_response(message)
            head = [b"HTTP/1.1 408 Request Timeout"] + [
                b"%s: %s" % (k, v) for k, v in response.raw_headers
            ]
            self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + response.body)
        self.transport.close()


# -- the body -------------------------------------------------------------------------------------


class BodyTimeout(Exception):
    """The body of a request did not arrive within its deadline (raised from `receive`)."""


class BodyDeadline:
    """Close a request whose body has not arrived in full `seconds` after its headers: a client
    that announces a body (a Content-Length, or chunks) and then sends part of it, nothing, too
    slowly, or chunks without end would otherwise hold its connection and a task for ever. The
    answer is 408 Request Timeout with Connection: close (when no answer has started), and one
    line in the log. The deadline covers the body only: once the last of it has come, the work
    and the answer take the time they need."""

    def __init__(self, app, seconds: float = BODY_TIMEOUT):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        body_done = answered = False

        async def timed_receive():
            nonlocal body_done
            if body_done:  # after the body: only the disconnect that a response listens for
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except TimeoutError:
                raise BodyTimeout from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def watched_send(message):
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except BodyTimeout:
            client = scope.get("client")
            log.warning(
                "glassformer explorer: %s %s from %s: the body did not arrive within %g s; "
                "closed with 408 Request Timeout",
                scope["method"],
                scope["path"][:80],
                f"{client[0]}:{client[1]}" if client else "a client",
                self.seconds,
            )
            if answered:  # an answer under way cannot change: uvicorn closes the connection
                return
            response = timeout_response(
                f"the request's body did not arrive within {self.seconds:g} s of its headers; "
                "send the whole body at once"
            )
            await response(scope, receive, send)
