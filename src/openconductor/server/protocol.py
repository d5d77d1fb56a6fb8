"""Connections that a slow or broken client cannot hold: header and body read deadlines, JSON errors.

uvicorn closes a connection idle between requests (``timeout_keep_alive``) but has no deadline for
a request's headers or body once its first byte arrived: a client that sends one byte every few
seconds holds a connection (and, for the body, a request task) for as long as it likes.

- ``GuardedHttpProtocol`` (uvicorn's httptools protocol, ``http=`` in uvicorn's config): the
  headers of each request must be complete within ``header_timeout_s`` of the connection opening or
  the previous response ending, else a JSON 408 and the connection closes. A request uvicorn cannot
  parse (a wrong ``Content-Length``, a broken request line) gets a JSON 400 instead of plain text.
- ``BodyDeadline`` (ASGI middleware): a request's body must arrive within ``body_timeout_s`` of its
  headers, else a JSON 408 that closes the connection.

The header deadline comes from the app's lifespan state (``header_timeout_s``), so each app carries
its own.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .bodies import CLOSE
from .errors import APIError

HEADER_TIMEOUT_S = 10.0
PROTOCOL = "openconductor.server.protocol:GuardedHttpProtocol"  # for uvicorn's ``http=`` (importable in every worker)


def error_bytes(status: int, message: str, code: str) -> bytes:
    """A complete HTTP/1.1 response carrying an OpenAI-style JSON error, closing the connection."""
    body = json.dumps(APIError(status, message, code=code).body()).encode()
    head = STATUS_LINE[status] + (b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return head + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and JSON errors for unparsable requests."""

    _header_timer: Optional[asyncio.TimerHandle] = None
    _request_begun = False  # some bytes of a request's head arrived

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        self._request_begun = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._request_begun = False
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the next request's headers are due (a pipelined one already has its own)

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        self.transport.write(error_bytes(400, f"{msg.rstrip('.')}: the request is not valid HTTP/1.1 (check Content-Length "
                                              "and the request line)", "invalid_http"))
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        timeout = float(self.app_state.get("header_timeout_s", HEADER_TIMEOUT_S))
        self._header_timer = self.loop.call_later(timeout, self._headers_late, timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self, timeout: float) -> None:
        self._header_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        if self._request_begun:
            self.transport.write(error_bytes(408, f"the request headers did not arrive within {timeout:g} s", "header_timeout"))
        self.transport.close()


class BodyDeadline:
    """ASGI middleware: the body must be read within ``timeout_s`` of the request's start (408 after)."""

    def __init__(self, app: Any, timeout_s: float):
        self.app, self.timeout_s = app, timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        complete = False

        async def timed_receive() -> dict:
            nonlocal complete
            if complete:  # the body is in; later calls wait for a disconnect (streams), with no deadline
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise APIError(408, f"the request body did not arrive within {self.timeout_s:g} s", code="body_timeout",
                               headers=CLOSE) from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed_receive, send)


__all__ = ["BodyDeadline", "GuardedHttpProtocol", "HEADER_TIMEOUT_S", "PROTOCOL", "error_bytes"]
