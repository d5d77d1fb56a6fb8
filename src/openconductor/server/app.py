"""The OpenAI-compatible HTTP API and the trace viewer, in one FastAPI app: routes only.

Endpoints: POST /v1/chat/completions, POST /v1/responses, POST /v1/completions (legacy, ``completions``),
GET /v1/models[/{id}], GET /v1/traces[/{id}], GET /health, GET /metrics, and the viewer page at /. A key is
read from ``Authorization: Bearer``, else from ``api-key`` or ``x-api-key`` (``auth.KeyHeaders``).
What a request means is in ``requests``, how a run is admitted and launched in ``gateway``, the answers
in ``builders`` and the streams in ``streams``. Worker outages: a run that ends without any answer is a 502
error object (streaming: an error event, then [DONE]); a prompt over the workers' context is a 400
``context_length_exceeded``; no answer in the requested format is a 422; all three say
``x-should-retry: false``. A run that ends with an answer but not cleanly is a 200 whose
``conductor.status`` says so.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import os
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from fastapi import FastAPI, Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from openai.types import Model
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..traces import SQLTraceStore, TraceNotFound, record_json
from .auth import KeyHeaders
from .bodies import Checks, read_body
from .completions import COMPLETIONS
from .config import ServerConfig
from .errors import APIError, validation_message
from .gateway import CHAT, RESPONSES, Endpoint, Gateway
from .metrics import watch_loop_lag
from .protocol import BodyDeadline, HeaderLimits
from .runs import Preset

TRACE_LIST_PARAMS = {"limit", "after"}
STATIC = Path(str(resources.files("openconductor").joinpath("server/static")))
log = logging.getLogger(__name__)


def sse(events: AsyncIterator[Any], frame) -> EventSourceResponse:
    """Typed stream items framed as SSE (sse-starlette also notices a client that went away)."""

    async def framed():
        async for item in events:
            if isinstance(item, APIError):
                yield {"data": json.dumps(item.body())}
                continue
            yield frame(item)
        if frame is _chat_frame:
            yield {"data": "[DONE]"}

    return EventSourceResponse(framed(), sep="\n", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}, ping=15)


def _chat_frame(chunk) -> dict:
    return {"data": chunk.model_dump_json(exclude_unset=True)}


def _responses_frame(event: dict) -> dict:
    return {"event": event["type"], "data": json.dumps(event)}


def create_app(config: ServerConfig, store: Optional[SQLTraceStore] = None) -> FastAPI:
    gateway = Gateway(config, store, checks=Checks(processes=config.server.check_processes))
    runtime, metrics = gateway.runtime, gateway.metrics
    app = FastAPI(title="openconductor", version="0.1.0", lifespan=_lifespan(config, gateway), docs_url=None, redoc_url=None, openapi_url=None)
    app.state.gateway = gateway
    app.state.runtime, app.state.metrics, app.state.keys = runtime, metrics, gateway.keys
    app.add_middleware(metrics.middleware_class())
    app.add_middleware(KeyHeaders)
    app.add_middleware(BodyDeadline, timeout_s=config.server.body_timeout_s)
    _error_shapes(app, metrics)
    _api_routes(app, gateway, config)
    _model_routes(app, gateway)
    _trace_routes(app, gateway)
    _ops_routes(app, gateway, config)
    return app


def _lifespan(config: ServerConfig, gateway: Gateway):
    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if config.server.slow_callback_ms:  # asyncio logs "Executing <step> took N seconds" for each slow step
            loop = asyncio.get_running_loop()
            loop.set_debug(True)
            loop.slow_callback_duration = config.server.slow_callback_ms / 1000
            lag = asyncio.create_task(watch_loop_lag(loop.slow_callback_duration, _log_lag))
        await gateway.start()
        _freeze_startup_objects()
        try:
            server = config.server  # read by protocol.GuardedHttpProtocol
            limits = HeaderLimits(server.max_header_bytes, server.max_headers, server.max_header_line_bytes)
            yield {"header_timeout_s": server.header_timeout_s, "header_limits": limits}
        finally:
            if config.server.slow_callback_ms:
                lag.cancel()
            await gateway.stop()

    return lifespan


_FROZEN: list[bool] = []
# Imported inside functions by what a run calls (evidence.py, question_examples.py): imported on the event loop by
# the first run otherwise, 20 modules in one step (0.5 s on a loaded machine; issue 70).
RUN_IMPORTS = ("openconductor.graders.code_grade", "openconductor.graders.exact", "openconductor.graders.final_answer",
               "openconductor.graders._harness", "openconductor.sandbox")


def _freeze_startup_objects() -> None:
    """Import what a run imports late, then move what start-up left alive out of the garbage collector's reach,
    once a process: a full collection walks every object (130,000 after start-up, 40-390 ms) and ran on the
    event loop whenever a big request's allocations set one off; with the late imports that was the longest
    stall of issue 70's hostile run. What is garbage is collected first, so nothing is frozen that could be freed."""
    if not _FROZEN:
        for name in RUN_IMPORTS:
            importlib.import_module(name)
        gc.collect()
        gc.freeze()
        _FROZEN.append(True)


def _log_lag(lag_s: float) -> None:
    logging.getLogger("asyncio").warning("event loop lag %.1f ms", lag_s * 1000)  # beside asyncio's slow-step lines


def _error_shapes(app: FastAPI, metrics) -> None:
    """Every error is an OpenAI-style JSON error object."""

    @app.exception_handler(APIError)
    async def _api_error(_req, exc: APIError):
        metrics.error(exc.code or exc.type)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req, exc: RequestValidationError):  # FastAPI's 422, reshaped as OpenAI's 400
        message, param = validation_message(list(exc.errors()))
        metrics.error("invalid_request")
        return JSONResponse(APIError(400, message, code="invalid_request", param=param).body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(APIError(exc.status_code, str(exc.detail), type=kind, code=str(exc.status_code)).body(), status_code=exc.status_code)

    @app.exception_handler(ClientDisconnect)
    async def _gone(_req, _exc: ClientDisconnect):  # the client left mid-body: nobody reads this answer
        metrics.error("client_disconnected")
        return JSONResponse(APIError(400, "the client disconnected before sending the whole body", code="client_disconnected").body(),
                            status_code=400, headers={"Connection": "close"})

    @app.exception_handler(Exception)
    async def _bug(_req, exc: Exception):  # always a JSON error object, never a plain-text 500
        log.exception("unhandled error")
        metrics.error("server_error")
        return JSONResponse(APIError(500, f"internal error: {type(exc).__name__}", type="server_error", code="server_error").body(),
                            status_code=500)


def _api_routes(app: FastAPI, gateway: Gateway, config: ServerConfig) -> None:
    """POST /v1/chat/completions, /v1/responses and /v1/completions: one request path for the three."""

    async def serve_api(endpoint: Endpoint, request: HTTPRequest) -> Response:
        key = gateway.authenticate(request.headers.get("authorization"))
        accepted, handle = await gateway.open(key, endpoint, await read_body(request, config.server.max_body_bytes))
        if accepted.stream:
            return sse(gateway.events(endpoint, accepted, handle), _responses_frame if endpoint is RESPONSES else _chat_frame)
        answer = await gateway.answer(endpoint, accepted, handle)
        return Response(answer.model_dump_json(exclude_unset=True), media_type="application/json",
                        headers={"X-Conductor-Trace-Id": handle.run.id if handle.run else ""})

    @app.post(CHAT.path)
    async def chat_completions(request: HTTPRequest):
        return await serve_api(CHAT, request)

    @app.post(RESPONSES.path)
    async def responses(request: HTTPRequest):
        return await serve_api(RESPONSES, request)

    @app.post(COMPLETIONS.path)
    async def completions(request: HTTPRequest):
        return await serve_api(COMPLETIONS, request)


def _model_routes(app: FastAPI, gateway: Gateway) -> None:
    runtime = gateway.runtime

    def model_object(preset: Preset, model_id: str) -> dict:
        return Model(id=model_id, object="model", created=0, owned_by="openconductor",
                     conductor={"preset": preset.name, "version": preset.spec.version, "pinned": model_id == preset.pinned_id,
                                "fingerprint": preset.fingerprint, "policy": preset.spec.policy,
                                "pool": preset.pool_spec.name, "workers": [w.name for w in preset.pool_spec.workers],
                                "limits": preset.limits.model_dump(), "description": preset.spec.description}
                     ).model_dump(exclude_unset=True)

    @app.get("/v1/models")
    async def list_models(request: HTTPRequest):
        gateway.authenticate(request.headers.get("authorization"))
        data = [model_object(preset, model_id) for preset in runtime.presets.values() for model_id in (preset.name, preset.pinned_id)]
        return {"object": "list", "data": data}

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str, request: HTTPRequest):
        gateway.authenticate(request.headers.get("authorization"))
        preset = runtime.resolve(model_id)
        if preset is None:
            raise APIError(404, f"The model {model_id!r} does not exist; GET /v1/models lists the served models "
                                f"({', '.join(runtime.presets)})", code="model_not_found", param="model")
        return model_object(preset, model_id)


def _trace_routes(app: FastAPI, gateway: Gateway) -> None:
    runtime = gateway.runtime

    @app.get("/v1/traces")
    async def list_traces(request: HTTPRequest, limit: int = 50, after: Optional[str] = None):
        key = gateway.authenticate(request.headers.get("authorization"))
        unknown = sorted(set(request.query_params) - TRACE_LIST_PARAMS)
        if unknown:  # e.g. offset=: never silently ignored
            raise APIError(400, f"unknown query parameter {unknown[0]!r}; /v1/traces takes limit and after (the last id of the "
                                "previous page)", param=unknown[0], code="unknown_parameter")
        if not 1 <= limit <= 500:
            raise APIError(400, "limit must be between 1 and 500", param="limit", code="invalid_limit")
        try:
            rows, more = await runtime.list_runs(limit, api_key=None if key.reads_all_traces else key.name, after=after)
        except TraceNotFound:
            raise APIError(400, f"after={after!r} is not a trace id of this key; pass the last_id of the previous page",
                           param="after", code="invalid_cursor") from None
        for row in rows:
            live = runtime.live(row["id"])
            if live is not None:  # fresher than the store between saves
                row["status"] = live.status
        running = sorted(i for i, r in runtime.running.items() if key.reads_all_traces or r.metadata.get("api_key") == key.name)
        return {"object": "list", "data": rows, "first_id": rows[0]["id"] if rows else None, "last_id": rows[-1]["id"] if rows else None,
                "has_more": more, "running": running}

    @app.get("/v1/traces/{run_id}")
    async def get_trace(run_id: str, request: HTTPRequest):
        key = gateway.authenticate(request.headers.get("authorization"))
        try:  # scoped by key in the lookup itself: another key's run (or prefix) takes the path of no run at all
            run = await runtime.get_run(run_id, api_key=None if key.reads_all_traces else key.name)
        except TraceNotFound:
            raise APIError(404, f"no trace with id {run_id!r} for this key", type="not_found_error", code="trace_not_found", param="run_id") from None
        return Response(record_json(run), media_type="application/json")


def _ops_routes(app: FastAPI, gateway: Gateway, config: ServerConfig) -> None:
    """/health, /metrics, the viewer page and its static files."""
    runtime, metrics = gateway.runtime, gateway.metrics

    @app.get("/health")
    async def health():
        return {"status": "ok", "presets": {p.name: p.pinned_id for p in runtime.presets.values()}, "running": len(runtime.running),
                "pid": os.getpid()}

    @app.get("/metrics")
    async def prometheus(request: HTTPRequest):
        if config.server.metrics != "public":
            key = gateway.authenticate(request.headers.get("authorization"))
            if config.server.metrics == "operator" and not key.reads_all_traces:
                raise APIError(403, f"key {key.name!r} may not read /metrics; it needs traces = \"all\" (an operator's key)",
                               type="permission_error", code="forbidden")
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.get("/", include_in_schema=False)
    async def viewer():
        return FileResponse(STATIC / "index.html")

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str):
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise APIError(404, f"no static file {name!r}", type="not_found_error", code="not_found")
        return FileResponse(path)


CONFIG_ENV = "OPENCONDUCTOR_SERVER_CONFIG"
OVERRIDES_ENV = "OPENCONDUCTOR_SERVER_OVERRIDES"


def app_from_env() -> FastAPI:
    """The app for each of several server processes (``conductor serve --workers N``): uvicorn imports
    this factory in every process; the config file is named by $OPENCONDUCTOR_SERVER_CONFIG and the
    command line's [server] overrides are in $OPENCONDUCTOR_SERVER_OVERRIDES (JSON)."""
    from .config import default_config, load_server_config, with_server_overrides

    path = os.environ.get(CONFIG_ENV)
    config = load_server_config(path) if path else default_config()
    return create_app(with_server_overrides(config, json.loads(os.environ.get(OVERRIDES_ENV) or "{}")))
