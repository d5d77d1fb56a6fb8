"""The OpenAI-compatible HTTP API and the trace viewer, in one FastAPI app.

Endpoints: POST /v1/chat/completions, POST /v1/responses, GET /v1/models, GET /v1/traces[/{id}],
GET /health, GET /metrics, and the viewer page at /. Worker outages: a run that ends without any
answer is a 502 error object (streaming: an error event, then [DONE]); a run that ends with an answer
but not cleanly is a 200 whose `conductor.status` says so.
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from fastapi import FastAPI, Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice, ChoiceDelta
from openai.types.completion_usage import CompletionUsage
from openai.types.responses import Response as ResponsesResponse, ResponseOutputMessage, ResponseOutputText, ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..records import Run, StepRecord
from ..traces import TraceNotFound, TraceStore
from .auth import AuthError, KeyRing, KeyState, RateLimited
from .config import ServerConfig
from .metrics import Metrics
from .runs import AnswerFilter, Preset, Request, RunHandle, Runtime
from .schemas import APIError, ChatCompletionRequest, ResponsesRequest, apply_request_limits, render_question, validation_message

STATIC = Path(str(resources.files("openconductor").joinpath("server/static")))


# --------------------------------------------------------------------------------------------- helpers


async def read_json(request: HTTPRequest, max_bytes: int) -> Any:
    """The body as JSON, refusing more than ``max_bytes`` before and while reading (413)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise APIError(400, "Content-Length is not a number", code="bad_content_length") from None
        if size > max_bytes:
            raise APIError(413, f"request body of {size} bytes is over the limit of {max_bytes} bytes", code="body_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise APIError(413, f"request body is over the limit of {max_bytes} bytes", code="body_too_large")
    if not body:
        raise APIError(400, "the request body is empty; send a JSON object", code="empty_body")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise APIError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    return data


def parse_model(cls, data: dict):
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        message, param = validation_message(exc.errors())
        raise APIError(400, message, code="invalid_request", param=param) from None


def usage_breakdown(run: Run) -> dict[str, Any]:
    """Token and cost openness, straight from Run.totals."""
    t = run.totals
    return {
        "conductor_tokens": t.conductor_usage.total_tokens,
        "worker_tokens": t.worker_usage.total_tokens,
        "per_worker": {name: {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "cost_usd": u.cost_usd}
                       for name, u in t.per_worker.items()},
        "worker_calls": t.calls,
        "cost_usd": t.usage.cost_usd,
    }


def chat_usage(run: Run) -> CompletionUsage:
    u = run.totals.usage
    return CompletionUsage(prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens, total_tokens=u.total_tokens,
                           **usage_breakdown(run))


def step_summary(step: StepRecord, depth: int = 0) -> dict[str, Any]:
    return {
        "index": step.index, "depth": depth, "worker": step.worker_name, "worker_id": step.worker,
        "status": step.status, "error": step.error, "tokens": step.usage.total_tokens,
        "cost_usd": step.usage.cost_usd, "latency_s": round(step.latency_s, 4), "output": step.output,
    }


def run_extension(run: Run, preset: Preset, event: str = "run_finished") -> dict[str, Any]:
    return {
        "event": event, "trace_id": run.id, "trace_url": f"/v1/traces/{run.id}", "status": run.status,
        "error": run.error, "limits_hit": run.limits_hit, "preset": preset.name, "version": preset.spec.version,
        "policy": run.policy, "steps": len(run.steps), "wall_s": round(run.totals.wall_s, 4),
        "workflow": [{"worker": s.worker_name, "subtask": s.subtask, "access": s.access} for s in run.steps],
    }


def outcome(run: Run) -> tuple[bool, str]:
    """(has an answer, finish_reason). A run without an answer is an upstream failure (502)."""
    if run.final_answer:
        return True, "length" if run.status == "limit" else "stop"
    if run.status == "limit":
        return True, "length"  # the budget ran out before any step answered: an empty, truncated answer
    return False, "stop"


def upstream_error(run: Run) -> APIError:
    return APIError(502, f"the workflow ended with status {run.status!r} and no answer: {run.error or 'every worker call failed'}",
                    type="upstream_error", code=f"run_{run.status}", extra={"trace_id": run.id, "run_status": run.status})


def sse(data: Any) -> str:
    return f"data: {data}\n\n"


# ------------------------------------------------------------------------------------------------ app


def create_app(config: ServerConfig, store: Optional[TraceStore] = None) -> FastAPI:
    runtime = Runtime(config, store)
    keys = KeyRing(config)
    metrics = Metrics()
    max_body = config.server.max_body_bytes

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(title="openconductor", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.runtime, app.state.metrics, app.state.keys = runtime, metrics, keys
    app.add_middleware(metrics.middleware_class())

    # --------------------------------------------------------------------------------- error shapes

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

    def authenticate(request: HTTPRequest) -> KeyState:
        try:
            return keys.authenticate(request.headers.get("authorization"))
        except AuthError as exc:
            raise APIError(401, str(exc), code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}) from None

    def admit(key: KeyState) -> None:
        try:
            key.acquire()
        except RateLimited as exc:
            raise APIError(429, str(exc), type="rate_limit_error", code="rate_limit_exceeded",
                           headers={"Retry-After": str(exc.retry_after)}) from None

    def accept(key: KeyState, model: str, turns: list[tuple[str, str]], options, seed, user, metadata) -> Request:
        preset = runtime.resolve(model)
        if preset is None:
            raise APIError(404, f"the model {model!r} does not exist; GET /v1/models lists the presets "
                                f"({', '.join(runtime.presets)})", code="model_not_found", param="model")
        ceiling = preset.limits.tightened(key.limits)
        limits = apply_request_limits(ceiling, options)
        meta = {"api_key": key.name, "preset": preset.name, "version": preset.spec.version, "model": model,
                **({"user": user} if user else {}), **(metadata or {})}
        return Request(preset, model, render_question(turns), limits, seed=seed, metadata=meta)

    def launch(key: KeyState, accepted: Request, stream: bool) -> RunHandle:
        admit(key)
        try:
            handle = runtime.launch(accepted, stream=stream)
        except BaseException:
            key.release()
            raise
        handle.task.add_done_callback(lambda _task: key.release())  # however the run ends
        return handle

    def record_run(run: Run, preset: Preset, endpoint: str) -> None:
        metrics.run(run, preset.name, endpoint)

    # -------------------------------------------------------------------------------- chat completions

    async def start(request: HTTPRequest, schema: type[ChatCompletionRequest] | type[ResponsesRequest]) -> tuple[Any, RunHandle]:
        """What both endpoints do first: authenticate, validate the body, admit the request, launch its run."""
        key = authenticate(request)
        body = parse_model(schema, await read_json(request, max_body))
        accepted = accept(key, body.model, body.turns(), body.conductor, body.seed, body.user, body.metadata)
        return body, launch(key, accepted, body.stream)

    def event_stream(events: AsyncIterator[str]) -> StreamingResponse:
        return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: HTTPRequest):
        body, handle = await start(request, ChatCompletionRequest)
        if body.stream:
            return event_stream(chat_stream(handle))
        accepted = handle.request
        run = await handle.wait()
        preset = accepted.preset
        record_run(run, preset, "chat")
        answered, finish = outcome(run)
        if not answered:
            raise upstream_error(run)
        completion = ChatCompletion(
            id=f"chatcmpl-{run.id}", object="chat.completion", created=int(run.created_at), model=accepted.model_id,
            system_fingerprint=preset.fingerprint, usage=chat_usage(run),
            choices=[Choice(index=0, finish_reason=finish, message=ChatCompletionMessage(role="assistant", content=run.final_answer))],
            conductor=run_extension(run, preset),
        )
        return Response(completion.model_dump_json(exclude_unset=True), media_type="application/json",
                        headers={"X-Conductor-Trace-Id": run.id})

    async def chat_stream(handle: RunHandle) -> AsyncIterator[str]:
        accepted = handle.request
        preset = accepted.preset
        created = int(time.time())
        answer = AnswerFilter()
        streamed: list[str] = []
        held_final: Optional[dict] = None
        try:
            await handle.started.wait()
            run = handle.run
            assert run is not None
            cid = f"chatcmpl-{run.id}"

            def chunk(delta: Optional[dict] = None, finish: Optional[str] = None, conductor: Optional[dict] = None,
                      usage: Optional[CompletionUsage] = None, choices: bool = True) -> str:
                fields: dict[str, Any] = dict(id=cid, object="chat.completion.chunk", created=created, model=accepted.model_id,
                                              system_fingerprint=preset.fingerprint,
                                              choices=[ChunkChoice(index=0, delta=ChoiceDelta(**(delta or {})), finish_reason=finish)] if choices else [])
                if usage is not None:
                    fields["usage"] = usage
                if conductor is not None:
                    fields["conductor"] = conductor
                return sse(ChatCompletionChunk(**fields).model_dump_json(exclude_unset=True))

            yield chunk({"role": "assistant", "content": ""}, conductor={"event": "run_started", "trace_id": run.id,
                        "trace_url": f"/v1/traces/{run.id}", "preset": preset.name, "version": preset.spec.version})
            async for event in handle.events():
                if event.type == "plan" and event.run.depth == 0:
                    yield chunk(conductor={"event": "plan", "fallback": run.plan.fallback if run.plan else None,
                                           "workflow": [{"index": s.index, "worker": s.worker_name, "subtask": s.subtask, "access": s.access} for s in run.steps]})
                elif event.type == "step_started" and event.step is not None:
                    yield chunk(conductor={"event": "step_started", "index": event.step.index, "depth": event.run.depth,
                                           "worker": event.step.worker_name})
                elif event.type == "step_finished" and event.step is not None:
                    summary = {"event": "step_finished", **step_summary(event.step, event.run.depth)}
                    if event.is_final_step:
                        held_final = summary  # announced after the answer's tokens, whatever order they came in
                    else:
                        yield chunk(conductor=summary)
                elif event.type == "step_token" and event.is_final_step:
                    piece = answer.feed(event.text)
                    if piece:
                        streamed.append(piece)
                        yield chunk({"content": piece})
                elif event.type == "step_retry" and event.step is not None:
                    # A failed attempt's tokens are void; content already sent cannot be taken back, so
                    # extension-aware clients are told to discard it (streamed_matches_final says so too).
                    final = event.is_final_step
                    yield chunk(conductor={"event": "step_retry", "index": event.step.index, "depth": event.run.depth,
                                           "worker": event.step.worker_name, "error": event.text,
                                           "discard_streamed_content": final and bool(streamed)})
                    if final:
                        answer = AnswerFilter()
            run = await handle.wait()
            piece = answer.finish()
            if piece:
                streamed.append(piece)
                yield chunk({"content": piece})
            if held_final is not None:
                yield chunk(conductor=held_final)
            record_run(run, preset, "chat")
            answered, finish = outcome(run)
            text = "".join(streamed)
            if not answered:
                error = upstream_error(run)
                metrics.error(error.code or error.type)
                yield sse(json.dumps(error.body()))
                yield sse("[DONE]")
                return
            if not text and run.final_answer:
                # Nothing streamed (the last step was a recursive round, or it failed and an earlier
                # answer stands): send the final answer in one piece.
                yield chunk({"content": run.final_answer})
                text = run.final_answer
            yield chunk({}, finish=finish)
            extension = run_extension(run, preset)
            extension["final_answer"] = run.final_answer
            extension["streamed_matches_final"] = text == run.final_answer
            yield chunk(choices=False, usage=chat_usage(run), conductor=extension)
            yield sse("[DONE]")
        finally:
            handle.cancel()  # no-op when finished; a client that went away cancels its run

    # ---------------------------------------------------------------------------------- responses API

    @app.post("/v1/responses")
    async def responses(request: HTTPRequest):
        body, handle = await start(request, ResponsesRequest)
        if body.stream:
            return event_stream(responses_stream(handle))
        accepted = handle.request
        run = await handle.wait()
        record_run(run, accepted.preset, "responses")
        answered, _ = outcome(run)
        if not answered:
            raise upstream_error(run)
        payload = build_response(run, accepted, "completed").model_dump_json(exclude_unset=True)
        return Response(payload, media_type="application/json", headers={"X-Conductor-Trace-Id": run.id})

    def build_response(run: Run, accepted: Request, status: str, text: Optional[str] = None) -> ResponsesResponse:
        preset = accepted.preset
        done = status == "completed"
        incomplete = done and run.status == "limit"
        content = run.final_answer if text is None else text
        u = run.totals.usage
        fields: dict[str, Any] = dict(
            id=f"resp_{run.id}", object="response", created_at=run.created_at, model=accepted.model_id,
            status="incomplete" if incomplete else status, parallel_tool_calls=False, tool_choice="auto", tools=[],
            output=[ResponseOutputMessage(id=f"msg_{run.id}", type="message", role="assistant",
                                          status="incomplete" if incomplete else status,
                                          content=[ResponseOutputText(type="output_text", text=content, annotations=[])])] if done else [],
            conductor=run_extension(run, preset) if done else {"event": "run_started", "trace_id": run.id},
        )
        if incomplete:
            fields["incomplete_details"] = {"reason": "max_output_tokens"}
        if done:
            fields["usage"] = ResponseUsage(
                input_tokens=u.input_tokens, output_tokens=u.output_tokens, total_tokens=u.total_tokens,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0), **usage_breakdown(run))
        return ResponsesResponse(**fields)

    async def responses_stream(handle: RunHandle) -> AsyncIterator[str]:
        accepted = handle.request
        answer = AnswerFilter()
        streamed: list[str] = []
        seq = 0

        def event(kind: str, **fields) -> str:
            nonlocal seq
            seq += 1
            return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **fields})}\n\n"

        try:
            await handle.started.wait()
            run = handle.run
            assert run is not None
            item_id = f"msg_{run.id}"
            yield event("response.created", response=build_response(run, accepted, "in_progress").model_dump(mode="json", exclude_unset=True))
            yield event("response.output_item.added", output_index=0,
                        item={"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []})
            yield event("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})
            async for ev in handle.events():
                if ev.type == "step_retry" and ev.is_final_step:
                    answer = AnswerFilter()  # the retried attempt streams its answer again
                if ev.type == "step_token" and ev.is_final_step:
                    piece = answer.feed(ev.text)
                    if piece:
                        streamed.append(piece)
                        yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=piece, logprobs=[])
            run = await handle.wait()
            piece = answer.finish()
            if piece:
                streamed.append(piece)
                yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=piece, logprobs=[])
            record_run(run, accepted.preset, "responses")
            answered, _ = outcome(run)
            if not answered:
                error = upstream_error(run)
                metrics.error(error.code or error.type)
                yield event("error", code=error.code, message=error.message, param=None)
                return
            text = "".join(streamed)
            if not text and run.final_answer:
                text = run.final_answer
                yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=text, logprobs=[])
            yield event("response.output_text.done", item_id=item_id, output_index=0, content_index=0, text=text, logprobs=[])
            yield event("response.content_part.done", item_id=item_id, output_index=0, content_index=0,
                        part={"type": "output_text", "text": text, "annotations": []})
            final = build_response(run, accepted, "completed", text=text)
            yield event("response.output_item.done", output_index=0, item=final.output[0].model_dump(mode="json", exclude_unset=True))
            yield event("response.completed", response=final.model_dump(mode="json", exclude_unset=True))
        finally:
            handle.cancel()

    # ------------------------------------------------------------------------------ models and traces

    @app.get("/v1/models")
    async def list_models(request: HTTPRequest):
        authenticate(request)
        data = []
        for preset in runtime.presets.values():
            for model_id in (preset.name, preset.pinned_id):
                data.append(Model(id=model_id, object="model", created=0, owned_by="openconductor",
                                  conductor={"preset": preset.name, "version": preset.spec.version, "pinned": model_id == preset.pinned_id,
                                             "fingerprint": preset.fingerprint, "policy": preset.spec.policy,
                                             "pool": preset.pool_spec.name, "workers": [w.name for w in preset.pool_spec.workers],
                                             "limits": preset.limits.model_dump(), "description": preset.spec.description}
                                  ).model_dump(exclude_unset=True))
        return {"object": "list", "data": data}

    @app.get("/v1/traces")
    async def list_traces(request: HTTPRequest, limit: int = 50):
        key = authenticate(request)
        if not 1 <= limit <= 500:
            raise APIError(400, "limit must be between 1 and 500", param="limit", code="invalid_limit")
        rows = runtime.list_runs(limit, api_key=None if key.reads_all_traces else key.name)
        for row in rows:
            live = runtime.live(row["id"])
            if live is not None:  # fresher than the store between saves
                row["status"] = live.status
        running = sorted(i for i, r in runtime.running.items() if key.reads_all_traces or r.metadata.get("api_key") == key.name)
        return {"object": "list", "data": rows, "running": running}

    @app.get("/v1/traces/{run_id}")
    async def get_trace(run_id: str, request: HTTPRequest):
        key = authenticate(request)
        try:
            run = runtime.get_run(run_id)
            if not key.reads_all_traces and run.metadata.get("api_key") != key.name:
                raise TraceNotFound(run_id)  # another key's run: as if it did not exist
        except TraceNotFound:
            raise APIError(404, f"no trace with id {run_id!r} for this key", type="not_found_error", code="trace_not_found", param="run_id") from None
        return Response(run.model_dump_json(), media_type="application/json")

    # ------------------------------------------------------------------------------- ops and viewer

    @app.get("/health")
    async def health():
        return {"status": "ok", "presets": {p.name: p.pinned_id for p in runtime.presets.values()}, "running": len(runtime.running)}

    @app.get("/metrics")
    async def prometheus():
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

    return app
