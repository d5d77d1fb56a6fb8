"""Request bodies within limits: read (size, in time), decoded (JSON), shaped (depth, values), off the loop.

Every limit is checked before the work it protects: ``Content-Length`` and the bytes read against
``max_bytes``; then ``json.loads`` (a body nested deeper than Python's parser follows is a 400, not a
RecursionError), then one iterative walk that refuses more than ``max_depth`` levels or ``max_values``
JSON values before any validation. The value cap is what bounds validation: pydantic holds the GIL
for a whole ``model_validate`` call (about 2 µs per object), so a megabyte of 30,000 one-word
messages would hold the event loop's thread for 60 ms even from a worker thread.

Decoding, request validation and schema checks are Python work proportional to the body, so they run
on ``Checks``, a small thread pool, while the event loop keeps serving. Everything here fails as an
``APIError`` with a 4xx status.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import os
import re
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .errors import APIError

if TYPE_CHECKING:  # the in-process client uses Checks without the HTTP stack
    from starlette.requests import Request as HTTPRequest

T = TypeVar("T")
CLOSE = {"Connection": "close"}  # a body left unread: the connection cannot carry another request


def check_shape(data: Any, max_depth: int, max_values: int) -> None:
    """400 if ``data`` nests deeper than ``max_depth`` or holds more than ``max_values`` JSON values."""
    count, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > max_values:
            raise APIError(400, f"the request body has more than {max_values:,} JSON values (objects, arrays, strings, "
                                f"numbers); at most {max_values:,} are accepted", code="json_too_large")
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise APIError(400, f"the request body nests more than {max_depth} levels deep", code="json_too_deep")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


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


def decode_json(body: bytes, max_depth: int, max_values: int) -> dict[str, Any]:
    """The body as a JSON object within the limits (400 for empty, invalid, too deep, too many values)."""
    if not body:
        raise APIError(400, "the request body is empty; send a JSON object", code="empty_body")
    try:
        data = json.loads(body, parse_float=_finite, parse_constant=_no_constants)
    except RecursionError:  # the C parser counts its nesting against Python's recursion limit
        raise APIError(400, f"the request body nests more than {max_depth} levels deep", code="json_too_deep") from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, a 5,000-digit integer, NaN
        raise APIError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    check_shape(data, max_depth, max_values)
    if MAY_HOLD_SURROGATE.search(body):
        data = valid_unicode(data)
    return data


LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str holds a valid pair as one character
# json.loads decodes bytes with "surrogatepass": an escape (\\ud800) and the raw UTF-8 form of a
# surrogate (ED A0 80 .. ED BF BF, invalid UTF-8) both come out as lone surrogates.
MAY_HOLD_SURROGATE = re.compile(rb"\\[uU][dD]|\xed[\xa0-\xbf]")


def valid_unicode(value: Any) -> Any:
    """``value`` (JSON data) with every lone surrogate, escaped or raw, replaced by U+FFFD: the one check every
    text entering the server passes before a policy, provider or store sees it (a lone surrogate cannot be
    encoded as UTF-8, so it would fail the run or its trace)."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [valid_unicode(v) for v in value]
    if isinstance(value, dict):
        return {valid_unicode(k): valid_unicode(v) for k, v in value.items()}
    return value


def interpret_body(schema: type, interpret: Callable[[Any], Any], body: Any, max_depth: int, max_values: int) -> tuple[Any, str]:
    """A request body (raw bytes, or a dict from the in-process client) as (``Accepted``, its question):
    decoded within the limits, validated against ``schema``, interpreted, and rendered (a long
    conversation is work too). Runs in a ``Checks`` worker; its errors are APIErrors."""
    from .requests import parse

    data = decode_json(body, max_depth, max_values) if isinstance(body, bytes) else valid_unicode(body)
    accepted = interpret(parse(schema, data))
    return accepted, accepted.question()


INLINE_BYTES = 16_384
_SCHEMA_KEYS = (b'"parameters"', b'"schema"', b"\\u")  # \u: a key can be written with escapes
# More arrays and objects than this go to the process too: json.loads of a 980-deep body fails with a
# RecursionError, and unwinding it held the event loop for 15 ms in the server (issue 70).
INLINE_CONTAINERS = 128


def cheap_to_check(body: Any) -> bool:
    """A small body that names no schema: checking it on the event loop takes well under a millisecond,
    less than handing it to a worker process. A schema goes to the process whatever its size (the
    metaschema check is about half a millisecond per subschema)."""
    return (isinstance(body, bytes) and len(body) <= INLINE_BYTES and not any(k in body for k in _SCHEMA_KEYS)
            and body.count(b"[") + body.count(b"{") <= INLINE_CONTAINERS)


def _warm() -> None:
    """Import what the checks use, so a worker's first request does not pay for it."""
    import jsonschema  # noqa: F401

    from . import requests  # noqa: F401


def _exit_with_parent(parent: int) -> None:
    """A check process's initializer: exit once the server process that started it is gone. A SIGKILL or a
    crash skips the pool's shutdown, and the worker would otherwise wait for work forever (found as orphans
    of ``--workers 2`` replicas killed in the scale-out tests)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class Checks:
    """Where request checks run, so the event loop never does: worker processes by default.

    Processes, not threads: a thread would share the GIL, and the C parts of the checks hold it for
    a whole call (``json.loads``, one pydantic ``model_validate`` over a body: tens of milliseconds for
    a megabyte), during which the event loop's thread cannot run; with two such threads it can lose the
    GIL to the other several times in a row. A worker hands back the small ``Accepted`` (pickled) or
    an ``APIError``. ``processes=0``: threads (the in-process client, which has no latency to keep).
    The checks' cost is bounded by the limits (body size, depth, values, schema size), not a timeout.
    """

    def __init__(self, processes: int = 0, threads: int = 2):
        self.processes, self.threads = processes, threads
        self._pool = self._new_pool()

    def _new_pool(self):
        if not self.processes:
            return ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="request-check")
        # spawn: a fresh interpreter (forking a process with running threads is unsafe)
        return ProcessPoolExecutor(max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_exit_with_parent, initargs=(os.getpid(),))

    async def start(self) -> None:
        if self.processes:
            await asyncio.gather(*(self.run(_warm) for _ in range(self.processes)))

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:  # a worker died (killed, out of memory): start new ones for the next requests
            if self._pool is pool:
                self._pool = self._new_pool()
                pool.shutdown(wait=False, cancel_futures=True)
            raise APIError(503, "the request checker stopped while checking this request; retry it", type="server_error",
                           code="checker_restarted", headers={"Retry-After": "1"}) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["CLOSE", "Checks", "cheap_to_check", "check_shape", "decode_json", "interpret_body", "read_body", "valid_unicode"]
