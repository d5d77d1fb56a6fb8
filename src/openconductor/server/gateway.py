"""What the HTTP routes and the in-process client share: keys, counters, the runtime and metrics.

``Gateway.submit`` takes an authenticated key and an ``Accepted`` request, resolves its preset,
computes its budget (preset limits, the key's ceiling, what the request asks, the key's quota left),
admits it against the key's counters and launches its run. When the run ends, however it ends, its
slot is released, its usage charged to the key's quota and its metrics recorded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Optional, Union

from pydantic import BaseModel

from .. import json_schemas
from ..budget import Limits
from ..records import Run
from ..traces import SQLTraceStore
from . import builders
from .auth import AuthError, Key, KeyRing
from .bodies import Checks, cheap_to_check, interpret_body
from .config import ServerConfig
from .counters import Admission, Counters, RateLimited, make_counters
from .errors import APIError
from .limits import limit_sources, limit_too_low, quota_short, start_need
from .metrics import Metrics
from .chat_request import ChatCompletionRequest, interpret_chat
from .requests import Accepted, apply_request_limits
from .responses_request import ResponsesRequest, interpret_responses
from .caller_messages import caller_messages
from .runs import Request, RunHandle, Runtime
from .streams import chat_stream, responses_stream

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """One of the two APIs: its request model, what a request means, its answer and its stream."""

    name: str
    path: str
    schema: type[BaseModel]
    interpret: Callable[[Any], Accepted]
    answer: Callable[[Run, Request, Accepted], BaseModel]
    stream: Callable[[RunHandle, Accepted, Callable[[APIError], None]], AsyncIterator[Any]]
    conversation: str  # the parameter a too-long conversation is blamed on


CHAT = Endpoint("chat", "/v1/chat/completions", ChatCompletionRequest, interpret_chat, builders.chat_completion, chat_stream, "messages")
RESPONSES = Endpoint("responses", "/v1/responses", ResponsesRequest, interpret_responses,
                     lambda run, request, accepted: builders.response(run, request, accepted, "completed"), responses_stream, "input")


class Gateway:
    def __init__(self, config: ServerConfig, store: Optional[SQLTraceStore] = None, counters: Optional[Counters] = None,
                 checks: Optional[Checks] = None):
        self.config = config
        self.runtime = Runtime(config, store)
        self.keys = KeyRing(config)
        self.counters = counters or make_counters(config.server.counters, self.runtime.store)
        self.metrics = Metrics()
        self.checks = checks or Checks()  # threads; the HTTP app gives worker processes

    async def start(self) -> None:
        json_schemas.warm()  # not inside the first request's reply check
        await self.counters.start()
        await self.checks.start()
        await self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()
        await self.counters.close()
        self.checks.close()

    def authenticate(self, authorization: Optional[str]) -> Key:
        try:
            return self.keys.authenticate(authorization)
        except AuthError as exc:
            raise APIError(401, str(exc), code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}) from None

    async def open(self, key: Key, endpoint: Endpoint, body: Union[bytes, dict[str, Any]]) -> tuple[Accepted, RunHandle]:
        """Decode (bytes) and validate a request body off the event loop (``bodies.Checks``: schemas and
        long conversations are real work), admit it and launch its run (400/404/429 as APIError)."""
        limits = self.config.server
        args = (endpoint.schema, endpoint.interpret, body, limits.max_json_depth, limits.max_json_values)
        accepted, question = interpret_body(*args) if cheap_to_check(body) else await self.checks.run(interpret_body, *args)
        return accepted, await self.submit(key, accepted, endpoint.name, question)

    def events(self, endpoint: Endpoint, accepted: Accepted, handle: RunHandle) -> AsyncIterator[Any]:
        """The run as the endpoint's stream (typed items; an APIError item when it has no answer)."""
        return endpoint.stream(handle, accepted, self.metrics.api_error)

    async def answer(self, endpoint: Endpoint, accepted: Accepted, handle: RunHandle) -> BaseModel:
        """The run's answer once it ends, or the APIError for a run without one."""
        run = await handle.wait()
        if not builders.answered(run):
            raise builders.run_error(run, endpoint.conversation, handle.request)
        return endpoint.answer(run, handle.request, accepted)

    async def submit(self, key: Key, accepted: Accepted, endpoint: str, question: Optional[str] = None) -> RunHandle:
        preset = self.runtime.resolve(accepted.model)
        if preset is None:
            raise APIError(404, f"the model {accepted.model!r} does not exist; GET /v1/models lists the presets "
                                f"({', '.join(self.runtime.presets)})", code="model_not_found", param="model")
        question = question if question is not None else accepted.question()
        limits = apply_request_limits(preset.limits.tightened(key.limits), accepted.budget)  # 400 before a slot is taken
        asked = accepted.budget.requested() if accepted.budget is not None else {}
        need = start_need(question)
        if limits.max_tokens is not None and limits.max_tokens < need:  # no run could answer: not an empty 200
            raise limit_too_low("max_tokens", limits.max_tokens, limit_sources(preset.limits, key.limits, asked)["max_tokens"], need)
        admission = await self._admit(key, limits)
        try:
            if admission.tokens is not None and admission.tokens < need:
                raise quota_short(admission, need)
            if admission.reserved:
                limits = limits.tightened(admission.limits())
            metadata = {"api_key": key.name, "preset": preset.name, "version": preset.spec.version, "model": accepted.model,
                        "endpoint": endpoint}
            if accepted.user:
                metadata["user"] = accepted.user
            if accepted.client_metadata:
                metadata["client"] = accepted.client_metadata  # never merged: the server's fields cannot be overwritten
            request = Request(preset, accepted.model, question, limits, seed=accepted.seed, metadata=metadata,
                              answer=None if accepted.answer.is_empty() else accepted.answer, max_output_tokens=accepted.max_output_tokens,
                              request_text=accepted.current_request(), messages=caller_messages(accepted.turns),
                              limit_sources=dict(limit_sources(preset.limits, key.limits, asked, admission)), quota_squeezed=admission.squeezed)
            return self.runtime.launch(request, stream=accepted.stream,
                                       on_done=lambda run: self._finished(run, admission, preset.name, endpoint))
        except BaseException:
            await self.counters.release(admission, None)
            raise

    async def _admit(self, key: Key, limits: Limits) -> Admission:
        """A slot for one request of ``key``, with what it reserved of the key's quotas (these limits allow at most)."""
        try:
            return await self.counters.acquire(key, limits)
        except RateLimited as exc:
            raise APIError(429, str(exc), type="insufficient_quota" if exc.code == "insufficient_quota" else "rate_limit_error",
                           code=exc.code, headers={"Retry-After": str(exc.retry_after)}) from None

    async def _finished(self, run: Optional[Run], admission: Admission, preset: str, endpoint: str) -> None:
        try:
            await self.counters.release(admission, run.totals.usage if run is not None else None)
        except Exception:  # a lost release only delays the slot until its lease expires (Redis)
            log.exception("could not release the slot of key %s", admission.key.name)
        if run is not None:
            self.metrics.run(run, preset, endpoint)
