"""A fault-injecting model server on loopback for provider tests.

It speaks three wire formats — OpenAI chat completions (``POST /v1/chat/completions``), Anthropic
messages (``POST /v1/messages``) and Gemini ``generateContent`` / ``streamGenerateContent``
(``POST /{version}/models/{model}:{method}``) — and answers each request with the next fault of a
script (a FIFO queue shared by all endpoints); an empty script answers with a valid completion.

    server.script(Fault.status(429, retry_after=1), Fault.ok("hi"))

Every request is logged (arrival time, path, body, the fault served) so tests can check what the
client sent and measure the delay between attempts. Times are ``time.monotonic()`` in this process.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

FaultKind = Literal["ok", "timeout", "status", "malformed", "empty", "blocked", "stream_cut", "stream_error"]


@dataclass(frozen=True)
class Fault:
    kind: FaultKind = "ok"
    text: Optional[str] = None  # the completion's text for "ok" (default: the server's default_text)
    status: int = 200
    retry_after: Optional[float] = None  # sent as the Retry-After header (and Gemini's RetryInfo)
    header: bool = True  # False: Gemini gets the wait only in its RetryInfo detail, as Google sends it
    delay_s: float = 0.0  # "timeout": how long the server sits on the request
    headers: tuple[tuple[str, str], ...] = ()  # more response headers, e.g. (("x-should-retry", "false"),)

    @staticmethod
    def ok(text: Optional[str] = None) -> "Fault":
        return Fault("ok", text=text)

    @staticmethod
    def timeout(delay_s: float = 3.0) -> "Fault":
        return Fault("timeout", delay_s=delay_s)

    @staticmethod
    def http(status: int, retry_after: Optional[float] = None, header: bool = True, headers: Optional[dict[str, str]] = None) -> "Fault":
        return Fault("status", status=status, retry_after=retry_after, header=header, headers=tuple((headers or {}).items()))

    @staticmethod
    def malformed() -> "Fault":
        """200 with a body that is not JSON."""
        return Fault("malformed")

    @staticmethod
    def stream_cut(text: str = "cut off mid stream") -> "Fault":
        """A streamed answer whose connection drops after the first token (non-streamed: a normal answer)."""
        return Fault("stream_cut", text=text)

    @staticmethod
    def stream_error(text: str = "error mid stream") -> "Fault":
        """A streamed answer that sends an in-band error event after the first token (OpenAI/Anthropic)."""
        return Fault("stream_error", text=text)

    @staticmethod
    def blocked() -> "Fault":
        """Gemini only: no candidates because the prompt was blocked (``promptFeedback.blockReason``)."""
        return Fault("blocked")

    @staticmethod
    def empty() -> "Fault":
        """200 with valid JSON but no completion: ``choices: []`` / ``content: []`` / ``candidates: []``."""
        return Fault("empty")


@dataclass
class Served:
    at: float
    path: str
    body: dict[str, Any]
    fault: Fault
    headers: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[str]:
    """Stream pieces: words with their leading space, so joining them gives the text back."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def _sse(data: Any, event: Optional[str] = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


class _Cut(Exception):
    """Raised inside a streaming body: uvicorn then drops the connection mid-response."""


def _until_fault(fault: Fault, pieces: list[str]) -> list[str]:
    return pieces[:1] if fault.kind in ("stream_cut", "stream_error") else pieces


class FaultServer:
    def __init__(self, default_text: str = "The answer is 42."):
        self.default_text = default_text
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self.log: list[Served] = []
        self.app = self._build_app()
        self.port: Optional[int] = None
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None

    # ---------------------------------------------------------------------------------- scripting
    def script(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def reset(self, default_text: str = "The answer is 42.") -> None:
        with self._lock:
            self._faults.clear()
            self.log.clear()
            self.default_text = default_text

    def pending(self) -> int:
        with self._lock:
            return len(self._faults)

    def _next(self, request: Request, body: dict) -> Fault:
        with self._lock:
            fault = self._faults.popleft() if self._faults else Fault.ok()
            self.log.append(Served(time.monotonic(), request.url.path, body, fault, dict(request.headers)))
            return fault

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ----------------------------------------------------------------------------------- app
    def _build_app(self) -> FastAPI:
        app = FastAPI()

        async def common(request: Request, api: str) -> tuple[Optional[Response], Fault, dict]:
            try:
                body = await request.json()
            except ValueError:
                body = {}
            fault = self._next(request, body)
            if fault.kind == "timeout":
                await asyncio.sleep(fault.delay_s)
            if fault.kind == "status":
                return error_response(api, fault), fault, body
            if fault.kind == "malformed":
                return Response('{"id": "x", "choices": [ {"mess', media_type="application/json"), fault, body
            return None, fault, body

        def error_response(api: str, fault: Fault) -> JSONResponse:
            headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None and fault.header else {}
            headers.update(fault.headers)
            if api == "anthropic":
                kind = {429: "rate_limit_error", 401: "authentication_error", 400: "invalid_request_error"}.get(fault.status, "api_error")
                content: dict = {"type": "error", "error": {"type": kind, "message": f"injected {fault.status}"}}
            elif api == "gemini":
                status = {429: "RESOURCE_EXHAUSTED", 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 503: "UNAVAILABLE"}.get(fault.status, "INTERNAL")
                details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{fault.retry_after:g}s"}] if fault.retry_after is not None else []
                content = {"error": {"code": fault.status, "message": f"injected {fault.status}", "status": status, "details": details}}
            else:
                content = {"error": {"message": f"injected {fault.status}", "type": "injected", "code": fault.status}}
            return JSONResponse(content, status_code=fault.status, headers=headers)

        def prompt_tokens(body: dict) -> int:
            return max(1, len(json.dumps(body).split()) // 4)

        @app.post("/v1/chat/completions")
        async def openai_chat(request: Request):
            early, fault, body = await common(request, "openai")
            if early is not None:
                return early
            model = body.get("model", "fault-model")
            if fault.kind == "empty":
                return {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0, "model": model, "choices": []}
            text = fault.text if fault.text is not None else self.default_text
            pieces = _tokens(text)
            usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": len(pieces), "total_tokens": prompt_tokens(body) + len(pieces)}
            if not body.get("stream"):
                return {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": usage,
                }

            async def events():
                base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}
                for piece in _until_fault(fault, pieces):
                    yield _sse(dict(base, choices=[{"index": 0, "delta": {"content": piece}, "finish_reason": None}]))
                    await asyncio.sleep(0)
                if fault.kind == "stream_cut":
                    raise _Cut()
                if fault.kind == "stream_error":
                    yield _sse({"error": {"message": "injected overload mid-stream", "type": "server_error", "code": 503}})
                    return
                yield _sse(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
                if (body.get("stream_options") or {}).get("include_usage"):
                    yield _sse(dict(base, choices=[], usage=usage))
                yield _sse("[DONE]")

            return StreamingResponse(events(), media_type="text/event-stream")

        @app.post("/v1/messages")
        async def anthropic_messages(request: Request):
            early, fault, body = await common(request, "anthropic")
            if early is not None:
                return early
            model = body.get("model", "fault-model")
            message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "stop_reason": "end_turn", "stop_sequence": None}
            if fault.kind == "empty":
                return dict(message, content=[], usage={"input_tokens": prompt_tokens(body), "output_tokens": 0})
            text = fault.text if fault.text is not None else self.default_text
            pieces = _tokens(text)
            usage = {"input_tokens": prompt_tokens(body), "output_tokens": len(pieces)}
            if not body.get("stream"):
                return dict(message, content=[{"type": "text", "text": text}], usage=usage)

            async def events():
                start = dict(message, content=[], stop_reason=None, usage={"input_tokens": usage["input_tokens"], "output_tokens": 1})
                yield _sse({"type": "message_start", "message": start}, "message_start")
                yield _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
                for piece in _until_fault(fault, pieces):
                    yield _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
                    await asyncio.sleep(0)
                if fault.kind == "stream_cut":
                    raise _Cut()
                if fault.kind == "stream_error":
                    yield _sse({"type": "error", "error": {"type": "overloaded_error", "message": "injected overload mid-stream"}}, "error")
                    return
                yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
                yield _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": len(pieces)}}, "message_delta")
                yield _sse({"type": "message_stop"}, "message_stop")

            return StreamingResponse(events(), media_type="text/event-stream")

        @app.post("/{version}/models/{target}")
        async def gemini(version: str, target: str, request: Request):
            model, _, method = target.partition(":")
            early, fault, body = await common(request, "gemini")
            if early is not None:
                return early
            usage = {"promptTokenCount": prompt_tokens(body)}
            if fault.kind == "empty":
                return {"candidates": [], "usageMetadata": usage, "modelVersion": model}
            if fault.kind == "blocked":
                return {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage, "modelVersion": model}
            text = fault.text if fault.text is not None else self.default_text
            pieces = _tokens(text)
            usage.update(candidatesTokenCount=len(pieces), totalTokenCount=usage["promptTokenCount"] + len(pieces))

            def chunk(piece: str, finish: Optional[str]) -> dict:
                candidate: dict = {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
                if finish:
                    candidate["finishReason"] = finish
                return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}

            if method == "generateContent":
                return chunk(text, "STOP")
            if method != "streamGenerateContent":
                return JSONResponse({"error": {"code": 404, "message": f"no method {method}", "status": "NOT_FOUND"}}, status_code=404)

            async def events():
                for i, piece in enumerate(_until_fault(fault, pieces)):
                    yield _sse(chunk(piece, "STOP" if i == len(pieces) - 1 else None))
                    await asyncio.sleep(0)
                if fault.kind == "stream_cut":
                    raise _Cut()
                if fault.kind == "stream_error":
                    yield _sse({"error": {"code": 503, "message": "injected overload mid-stream", "status": "UNAVAILABLE"}})

            return StreamingResponse(events(), media_type="text/event-stream")

        return app

    # ------------------------------------------------------------------------------- lifecycle
    def start(self) -> "FaultServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        # "critical": a cut stream (an exception inside the body, on purpose) would log a traceback.
        config = uvicorn.Config(self.app, log_level="critical", timeout_graceful_shutdown=1, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fault server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
