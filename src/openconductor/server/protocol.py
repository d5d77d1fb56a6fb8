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

The header deadline and the header limits come from the app's lifespan state (``header_timeout_s``,
``header_limits``), so each app carries its own.

Header limits (``HeaderLimits``: total bytes, header lines, bytes per line) are counted on the raw bytes
in ``data_received`` *before* httptools sees them: httptools buffers a header by concatenating its
pieces (quadratic in a long line) and has no limit of its own, so a 50 MB header line would be held in
memory and stall the loop. A head over a limit gets a JSON 431 and is never parsed. After the 431 the
connection reads and drops what the client still sends for a moment (a lingering close), so the client
reads the 431 rather than a reset.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Optional

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .bodies import CLOSE
from .errors import APIError

HEADER_TIMEOUT_S = 10.0
PROTOCOL = "openconductor.server.protocol:GuardedHttpProtocol"  # for uvicorn's ``http=`` (importable in every worker)
LINGER_S = 1.0  # after a 431, how long the rest of what the client sends is read and dropped


@dataclass(frozen=True)
class HeaderLimits:
    """A request head's limits: its bytes (request line and header lines), header lines, bytes per line."""

    max_bytes: int = 32 * 1024
    max_headers: int = 100
    max_line_bytes: int = 16 * 1024


class HeadScan:
    """Counts one request head's bytes and lines as they arrive, holding none of them (O(1) memory)."""

    def __init__(self, limits: HeaderLimits):
        self.limits = limits
        self.reset()

    def reset(self) -> None:
        self.size = self.lines = self.line = 0  # head bytes, complete lines, bytes of the line in progress
        self.cr = False  # the line in progress is exactly "\r" so far (a blank line split across reads)
        self.begun = False  # a non-blank line was seen (blank lines before a request are skipped)

    def feed(self, data: bytes) -> tuple[bool, Optional[str]]:
        """(head complete, what was over a limit) after ``data``; bytes after the head are not looked at."""
        lim, pos, end = self.limits, 0, len(data)
        while pos < end:
            nl = data.find(b"\n", pos)
            stop = end if nl < 0 else nl
            piece = stop - pos
            self.size += piece + (nl >= 0)
            blank = (self.line == 0 and (piece == 0 or (piece == 1 and data[pos] == 13))) or (self.cr and piece == 0)
            self.line += piece
            if self.line > lim.max_line_bytes + 1:  # +1: the line's "\r"
                return False, f"a request header line is longer than {lim.max_line_bytes:,} bytes"
            if self.size > lim.max_bytes:
                return False, f"the request headers are larger than {lim.max_bytes:,} bytes"
            if nl < 0:
                self.cr = self.line == 1 and data[end - 1] == 13
                return False, None
            pos, self.line, self.cr = nl + 1, 0, False
            if blank and self.begun:
                return True, None
            if not blank:
                self.begun, self.lines = True, self.lines + 1
                if self.lines > lim.max_headers + 1:  # +1: the request line
                    return False, f"the request has more than {lim.max_headers} headers"
        return False, None


def error_bytes(status: int, message: str, code: str) -> bytes:
    """A complete HTTP/1.1 response carrying an OpenAI-style JSON error, closing the connection."""
    body = json.dumps(APIError(status, message, code=code).body()).encode()
    head = STATUS_LINE[status] + (b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return head + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and JSON errors for unparsable requests."""

    _header_timer: Optional[asyncio.TimerHandle] = None
    _request_begun = False  # some bytes of a request's head arrived
    _scan: Optional[HeadScan] = None  # counts the bytes of each request's head
    _head_done = False  # the head being counted is complete: the bytes now are its body
    _refused = False  # a 431 was sent: what arrives now is dropped
    _refused_by_parser: Optional[str] = None  # why on_header stopped the parser (answered with a 431)

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits = self.app_state.get("header_limits")
        self._scan = HeadScan(limits if isinstance(limits, HeaderLimits) else HeaderLimits())
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._scan is not None and not self._head_done:
            done, over = self._scan.feed(data)
            if over is not None:
                return self._refuse(over)
            self._head_done = done
        super().data_received(data)

    def on_message_complete(self) -> None:
        self._head_done = False  # the next bytes begin the next request's head
        if self._scan is not None:
            self._scan.reset()
        super().on_message_complete()

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        # A pipelined request's head can begin inside a read that was not counted (at most one read,
        # 256 KiB); the parsed headers are counted too, so its limits hold exactly all the same.
        limits = self._scan.limits if self._scan is not None else HeaderLimits()
        if len(self.headers) > limits.max_headers or len(name) + len(value) + 2 > limits.max_line_bytes:
            self._refused_by_parser = (f"the request has more than {limits.max_headers} headers, or a header line over "
                                       f"{limits.max_line_bytes:,} bytes")
            raise ValueError(self._refused_by_parser)  # httptools stops parsing; send_400_response answers 431

    def _refuse(self, why: str) -> None:
        """431, then read and drop for ``LINGER_S`` before closing (a client still sending gets the answer, not a reset)."""
        self._disarm()
        self._refused = True
        self.transport.write(error_bytes(431, f"{why}; send smaller or fewer headers", "request_headers_too_large"))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

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
        if self._refused_by_parser is not None and not self.transport.is_closing():
            return self._refuse(self._refused_by_parser)
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the next request's headers are due (a pipelined one already has its own)

    def send_400_response(self, msg: str) -> None:
        if self._refused_by_parser is not None:
            if self.cycle is not None and not self.cycle.response_complete:  # a pipelined head: answer after the response in progress
                self._refused = True
                return
            return self._refuse(self._refused_by_parser)
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


__all__ = ["BodyDeadline", "GuardedHttpProtocol", "HEADER_TIMEOUT_S", "HeadScan", "HeaderLimits", "PROTOCOL", "error_bytes"]
