"""Request bodies within limits: read (size), decoded (depth, then JSON), and checked off the event loop.

Every limit is checked before the work it protects: ``Content-Length`` and the bytes read against
``max_bytes``; the nesting depth by a scan of the raw bytes before ``json.loads`` (a 2 KB body nested
~1,000 deep would otherwise end in a RecursionError somewhere in the stack); only then the decoding.
Decoding, request validation and schema checks are Python work proportional to the body (up to a
megabyte: 100 ms and more), so they run on ``Checks``, a small thread pool, while the event loop
keeps serving. Everything here fails as an ``APIError`` with a 4xx status.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .errors import APIError

if TYPE_CHECKING:  # the in-process client uses Checks without the HTTP stack
    from starlette.requests import Request as HTTPRequest

T = TypeVar("T")
CLOSE = {"Connection": "close"}  # a body left unread: the connection cannot carry another request

# A JSON string (escapes included); the unrolled form matches in one pass without backtracking.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but the four brackets
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in ``body`` (strings skipped), without parsing it."""
    skeleton = _STRING.sub(b"", body).translate(None, _BRACKETS).translate(_STEPS)
    if not skeleton:
        return 0
    return max(itertools.accumulate(memoryview(skeleton).cast("b")))


async def read_body(request: "HTTPRequest", max_bytes: int) -> bytes:
    """The raw body, refusing more than ``max_bytes`` before and while reading (413)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise APIError(400, "Content-Length is not a number", code="bad_content_length", headers=CLOSE) from None
        if size > max_bytes:
            raise APIError(413, f"request body of {size} bytes is over the limit of {max_bytes} bytes", code="body_too_large", headers=CLOSE)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise APIError(413, f"request body is over the limit of {max_bytes} bytes", code="body_too_large", headers=CLOSE)
    return bytes(body)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json(body: bytes, max_depth: int) -> dict[str, Any]:
    """The body as a JSON object (400 for empty, too deep, invalid JSON or not an object)."""
    if not body:
        raise APIError(400, "the request body is empty; send a JSON object", code="empty_body")
    depth = json_depth(body)
    if depth > max_depth:
        raise APIError(400, f"the request body nests {depth} levels deep; at most {max_depth} are accepted", code="json_too_deep")
    try:
        data = json.loads(body, parse_float=_finite, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, a 5,000-digit integer, NaN
        raise APIError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    if b"\\ud" in body or b"\\uD" in body:  # escaped surrogates: a lone one cannot be stored, sent or encoded
        data = _scrub(data)
    return data


LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str holds a valid pair as one character


def _scrub(value: Any) -> Any:
    """Lone surrogates (JSON escapes like \\ud800 with no pair) become U+FFFD, as invalid UTF-8 would."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


class Checks:
    """A few threads for request checks, so the event loop never runs them.

    Threads, not processes: the checks hand back Python objects, and a thread running Python gives the
    loop the GIL every few milliseconds. Their cost is bounded by the limits (body size, depth, schema
    size), not by a timeout: a thread cannot be stopped, so nothing may start that could run on.
    """

    def __init__(self, workers: int = 2):
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="request-check")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["CLOSE", "Checks", "decode_json", "json_depth", "read_body"]
