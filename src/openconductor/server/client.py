"""An in-process client shaped like the openai SDK's: presets run in this process, no HTTP in between.

    from openconductor.server.client import OpenConductor

    client = OpenConductor("examples/server.toml")          # or a ServerConfig; default: the local pool
    reply = client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "17 * 23?"}])
    for chunk in client.chat.completions.create(model="conductor", messages=[...], stream=True): ...
    client.responses.create(model="conductor", input="17 * 23?")

It accepts the same parameters as the HTTP API (``extra_body`` merges into them, as in the SDK), returns
the SDK's own types (``ChatCompletion``, ``ChatCompletionChunk``, ``Response``, response stream events),
and raises the SDK's own errors (``openai.BadRequestError``, ``openai.RateLimitError``, …), because it
runs the same ``requests`` → ``gateway`` → ``builders`` / ``streams`` path as the server. The caller is
trusted: no key is needed, and only the presets' own limits apply. ``AsyncOpenConductor`` is the same
with ``await`` and ``async for``; ``OpenConductor`` runs one on a private event-loop thread.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, Optional, Union

import openai
from pydantic import TypeAdapter

from ..budget import Limits
from .auth import Key
from .config import ServerConfig, default_config, load_server_config
from .errors import APIError
from .gateway import CHAT, RESPONSES, Endpoint, Gateway

try:  # the openai SDK's HTTP types (httpx2 in openai >= 3, httpx before)
    import httpx2 as _http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as _http  # type: ignore[no-redef]

TRUSTED = Key("in-process", Limits(max_depth=10**6, max_calls=10**9), max_concurrent=10**9, rate_per_s=1e9, burst=1e9,
              reads_all_traces=True)

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError, 404: openai.NotFoundError,
    409: openai.ConflictError, 422: openai.UnprocessableEntityError, 429: openai.RateLimitError,
}


def sdk_error(error: APIError, path: str) -> openai.APIStatusError:
    """The openai SDK's exception for an API error, as the SDK would raise it over HTTP."""
    response = _http.Response(error.status, json=error.body(), headers=error.headers,
                              request=_http.Request("POST", f"http://in-process{path}"))
    cls = _STATUS_ERRORS.get(error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError)
    return cls(error.message, response=response, body=error.body()["error"])


def _params(params: dict[str, Any]) -> dict[str, Any]:
    """SDK-style keyword arguments as a request body (``extra_body`` merged; transport options dropped)."""
    body = {k: v for k, v in params.items() if v is not None and k not in ("extra_body", "extra_headers", "extra_query", "timeout")}
    body.update(params.get("extra_body") or {})
    return body


_EVENTS = None


def _event(data: dict[str, Any]) -> Any:
    global _EVENTS
    if _EVENTS is None:
        from openai.types.responses import ResponseStreamEvent

        _EVENTS = TypeAdapter(ResponseStreamEvent)
    return _EVENTS.validate_python(data)


class AsyncOpenConductor:
    def __init__(self, config: Union[ServerConfig, str, Path, None] = None):
        if config is None:
            config = default_config()
        elif not isinstance(config, ServerConfig):
            config = load_server_config(config)
        self.gateway = Gateway(config)
        self._started: Optional[asyncio.Task] = None
        self.chat = _AsyncChat(self)
        self.responses = _AsyncResponses(self)

    async def _ready(self) -> Gateway:
        if self._started is None:
            self._started = asyncio.ensure_future(self.gateway.start())
        await self._started
        return self.gateway

    async def close(self) -> None:
        if self._started is not None:
            await self.gateway.stop()
            self._started = None

    async def __aenter__(self) -> "AsyncOpenConductor":
        await self._ready()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _run(self, endpoint: Endpoint, params: dict[str, Any]) -> Any:
        gateway = await self._ready()
        try:
            accepted, handle = await gateway.open(TRUSTED, endpoint, _params(params))
            if accepted.stream:
                return _stream(gateway.events(endpoint, accepted, handle), endpoint)
            return await gateway.answer(endpoint, accepted, handle)
        except APIError as exc:
            raise sdk_error(exc, endpoint.path) from None


async def _stream(events: AsyncIterator[Any], endpoint: Endpoint) -> AsyncIterator[Any]:
    async for item in events:
        if isinstance(item, APIError):  # as the SDK raises an error event in a stream
            raise openai.APIError(item.message, _http.Request("POST", f"http://in-process{endpoint.path}"), body=item.body()["error"])
        yield _event(item) if endpoint is RESPONSES else item


class _AsyncCompletions:
    def __init__(self, client: AsyncOpenConductor):
        self._client = client

    async def create(self, **params: Any) -> Any:
        """As ``openai.AsyncOpenAI().chat.completions.create``: a ChatCompletion, or with ``stream=True`` an
        async iterator of ChatCompletionChunk."""
        return await self._client._run(CHAT, params)


class _AsyncChat:
    def __init__(self, client: AsyncOpenConductor):
        self.completions = _AsyncCompletions(client)


class _AsyncResponses:
    def __init__(self, client: AsyncOpenConductor):
        self._client = client

    async def create(self, **params: Any) -> Any:
        """As ``openai.AsyncOpenAI().responses.create``: a Response, or with ``stream=True`` an async
        iterator of response stream events."""
        return await self._client._run(RESPONSES, params)


# ---------------------------------------------------------------------------------------------- sync


class _LoopThread:
    """One event loop on a daemon thread: the pools' connections and semaphores live on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="openconductor-client", daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class OpenConductor:
    def __init__(self, config: Union[ServerConfig, str, Path, None] = None):
        self._loop = _LoopThread()
        self._async = self._loop.run(_make_async(config))
        self.chat = _SyncChat(self)
        self.responses = _SyncResponses(self)

    def _call(self, create: Any, params: dict[str, Any]) -> Any:
        result = self._loop.run(create(**params))
        if params.get("stream"):
            return self._iterate(result)
        return result

    def _iterate(self, events: AsyncIterator[Any]) -> Iterator[Any]:
        try:
            while True:
                try:
                    yield self._loop.run(events.__anext__())
                except StopAsyncIteration:
                    return
        finally:  # a caller that stops reading ends the stream (and its run)
            self._loop.run(events.aclose())  # type: ignore[attr-defined]

    def close(self) -> None:
        self._loop.run(self._async.close())
        self._loop.stop()

    def __enter__(self) -> "OpenConductor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def _make_async(config: Union[ServerConfig, str, Path, None]) -> AsyncOpenConductor:
    return AsyncOpenConductor(config)  # built on the loop thread: its asyncio objects belong to that loop


class _SyncCompletions:
    def __init__(self, client: OpenConductor):
        self._client = client

    def create(self, **params: Any) -> Any:
        """As ``openai.OpenAI().chat.completions.create``."""
        return self._client._call(self._client._async.chat.completions.create, params)


class _SyncChat:
    def __init__(self, client: OpenConductor):
        self.completions = _SyncCompletions(client)


class _SyncResponses:
    def __init__(self, client: OpenConductor):
        self._client = client

    def create(self, **params: Any) -> Any:
        """As ``openai.OpenAI().responses.create``."""
        return self._client._call(self._client._async.responses.create, params)
