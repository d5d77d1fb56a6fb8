"""Pure functions from a finished (or starting) Run to the API's objects, built with the openai SDK's
types, and the typed ``conductor`` extension payloads they carry.

Nothing here touches the network, the store or the clock: the HTTP routes, the streams and the
in-process client all build their answers with these.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from openai.types.chat import ChatCompletion, ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message import FunctionCall
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionUsage
from openai.types.responses import (
    FunctionTool as ResponsesFunctionTool,
    Response as ResponsesResponse,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from ..answer_format import NamedTool
from ..records import Run, StepRecord, ToolCall
from .errors import APIError
from .limits import LimitStop, stopped_by, unanswered_limit_error
from .requests import Accepted
from .runs import Preset, Request

# ------------------------------------------------------------------------------- extension payloads


class WorkflowStep(BaseModel):
    index: int
    worker: str
    subtask: str
    access: Union[Literal["all"], list[int]]


class RunStarted(BaseModel):
    event: Literal["run_started"] = "run_started"
    trace_id: str
    trace_url: str
    preset: str
    version: str


class PlanMade(BaseModel):
    event: Literal["plan"] = "plan"
    fallback: Optional[str]
    workflow: list[WorkflowStep]


class StepStarted(BaseModel):
    event: Literal["step_started"] = "step_started"
    index: int
    depth: int
    worker: str


class StepFinished(BaseModel):
    event: Literal["step_finished"] = "step_finished"
    index: int
    depth: int
    worker: str
    worker_id: int
    status: str
    error: Optional[str]
    tokens: int
    cost_usd: float
    latency_s: float
    output: str


class StepRetried(BaseModel):
    event: Literal["step_retry"] = "step_retry"
    index: int
    depth: int
    worker: str
    error: str
    discard_streamed_content: bool  # the failed attempt's streamed tokens are void


class RunFinished(BaseModel):
    event: Literal["run_finished"] = "run_finished"
    trace_id: str
    trace_url: str
    status: str
    error: Optional[str]
    limits_hit: list[str]
    preset: str
    version: str
    policy: str
    planned_by: dict[str, Any] = {}  # which conductor planned (identity.ConductorIdentity): a checkpoint and its digest, a worker, a policy
    steps: int
    wall_s: float
    workflow: list[WorkflowStep]
    warnings: list[str] = []  # the pool's, e.g. a tool that cannot run on the server's machine
    limit: Optional[LimitStop] = None  # the limit that cut the run short, with its source (None: not cut)
    final_answer: Optional[str] = None  # streams: the answer as the trace has it
    streamed_matches_final: Optional[bool] = None  # streams: whether the streamed text is that answer


def workflow(run: Run) -> list[WorkflowStep]:
    return [WorkflowStep(index=s.index, worker=s.worker_name, subtask=s.subtask, access=s.access) for s in run.steps]


def run_started(run: Run, preset: Preset) -> RunStarted:
    return RunStarted(trace_id=run.id, trace_url=f"/v1/traces/{run.id}", preset=preset.name, version=preset.spec.version)


def plan_made(run: Run) -> PlanMade:
    return PlanMade(fallback=run.plan.fallback if run.plan else None, workflow=workflow(run))


def step_finished(step: StepRecord, depth: int) -> StepFinished:
    return StepFinished(index=step.index, depth=depth, worker=step.worker_name, worker_id=step.worker, status=step.status,
                        error=step.error, tokens=step.usage.total_tokens, cost_usd=step.usage.cost_usd,
                        latency_s=round(step.latency_s, 4), output=step.output)


def run_finished(run: Run, request: Request, **stream_fields: Any) -> RunFinished:
    preset = request.preset
    return RunFinished(trace_id=run.id, trace_url=f"/v1/traces/{run.id}", status=run.status, error=run.error, limits_hit=run.limits_hit,
                       preset=preset.name, version=preset.spec.version, policy=run.policy, planned_by=run.metadata.get("conductor") or {}, steps=len(run.steps),
                       wall_s=round(run.totals.wall_s, 4), workflow=workflow(run), warnings=run.warnings,
                       limit=stopped_by(run, request.limit_sources, request.limits), **stream_fields)


def extension(payload: BaseModel) -> dict[str, Any]:
    return payload.model_dump(mode="json")


# ------------------------------------------------------------------------------------------ outcome


def answered(run: Run) -> bool:
    """Whether the run has something to return (text or tool calls). A limit that left nothing is an error
    (``limits``), never an empty success."""
    return bool(run.final_answer or run.tool_calls)


def finish_reason(run: Run, legacy_functions: bool = False) -> str:
    if run.tool_calls:
        return "function_call" if legacy_functions else "tool_calls"
    last = run.steps[-1] if run.steps else None
    # A local model stopped in a loop ("repetition") was cut short too: OpenAI's word for that is "length".
    if run.status == "limit" or (last is not None and last.status == "ok" and last.finish_reason in ("length", "repetition")):
        return "length"
    return "stop"


def _error_codes(run: Run) -> set[str]:
    codes = set()
    for step in run.steps:
        if step.error_code:
            codes.add(step.error_code)
        if step.nested is not None:
            codes |= _error_codes(step.nested)
    return codes


# Every worker call was already retried with backoff: a client's retry would run (and pay for) the whole
# workflow again, so clients are told not to (the openai SDK, and the clients built on it, obey this header).
NO_RETRY = {"x-should-retry": "false"}


def run_error(run: Run, conversation_param: str, request: Request) -> APIError:
    """The error for a run without an answer: 400 when the input is too long, 422 when no answer in the requested
    format could be had (a 4xx that clients do not retry), a limit's 400 or 429 (``limits``), else 502
    (upstream); none but the quota's is worth a client's retry."""
    # should_retry: a stream's in-band error says what the x-should-retry header says (its headers went out before the run ended).
    extra = {"trace_id": run.id, "run_status": run.status, "should_retry": False}
    stop = stopped_by(run, request.limit_sources, request.limits)
    if stop is not None:
        error = unanswered_limit_error(stop, request.quota_squeezed, str(request.metadata.get("api_key", "")))
        error.extra = {**extra, "should_retry": error.status == 429, "limit": stop.model_dump()}
        return error
    codes = _error_codes(run)
    if "context_length_exceeded" in codes:
        return APIError(400, "the conversation is longer than the workers' context windows; shorten it "
                             f"({run.error or 'every worker call failed'})", code="context_length_exceeded",
                        param=conversation_param, extra=extra, headers=NO_RETRY)
    if "invalid_answer_format" in codes:
        return APIError(422, f"the workers did not produce an answer in the requested format: {run.error}", type="upstream_error",
                        code="invalid_answer_format", extra=extra, headers=NO_RETRY)
    return APIError(502, f"the workflow ended with status {run.status!r} and no answer: {run.error or 'every worker call failed'}",
                    type="upstream_error", code=f"run_{run.status}", extra=extra, headers=NO_RETRY)


# ------------------------------------------------------------------------------------------- usage


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


def responses_usage(run: Run) -> ResponseUsage:
    u = run.totals.usage
    return ResponseUsage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, total_tokens=u.total_tokens,
                         input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                         output_tokens_details=OutputTokensDetails(reasoning_tokens=0), **usage_breakdown(run))


# ---------------------------------------------------------------------------------- chat completions


def chat_tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(id=call.id, type="function", function=Function(name=call.name, arguments=call.arguments))


def chat_message(run: Run, legacy_functions: bool = False) -> ChatCompletionMessage:
    fields: dict[str, Any] = dict(role="assistant", content=run.final_answer or (None if run.tool_calls else ""))
    if run.tool_calls and legacy_functions:
        call = run.tool_calls[0]
        fields["function_call"] = FunctionCall(name=call.name, arguments=call.arguments)
    elif run.tool_calls:
        fields["tool_calls"] = [chat_tool_call(c) for c in run.tool_calls]
    return ChatCompletionMessage(**fields)


def chat_completion(run: Run, request: Request, accepted: Accepted) -> ChatCompletion:
    preset = request.preset
    return ChatCompletion(
        id=f"chatcmpl-{run.id}", object="chat.completion", created=int(run.created_at), model=request.model_id,
        system_fingerprint=preset.fingerprint, usage=chat_usage(run), service_tier="default",
        choices=[Choice(index=0, finish_reason=finish_reason(run, accepted.legacy_functions),  # type: ignore[arg-type]
                        message=chat_message(run, accepted.legacy_functions), logprobs=None)],
        conductor=extension(run_finished(run, request)),
    )


# ----------------------------------------------------------------------------------------- responses


def _tool_choice(accepted: Accepted) -> Any:
    choice = accepted.answer.tool_choice
    return {"type": "function", "name": choice.name} if isinstance(choice, NamedTool) else choice


def response_output(run: Run, text: str, status: str) -> list[Any]:
    """The message item (when there is text, or nothing else), then one function_call item per call."""
    items: list[Any] = []
    if text or not run.tool_calls:
        items.append(ResponseOutputMessage(id=f"msg_{run.id}", type="message", role="assistant", status=status,  # type: ignore[arg-type]
                                           content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])]))
    items += [ResponseFunctionToolCall(id=f"fc_{c.id}", call_id=c.id, type="function_call", name=c.name, arguments=c.arguments,
                                       status="completed") for c in run.tool_calls]
    return items


def response(run: Run, request: Request, accepted: Accepted, status: str, text: Optional[str] = None) -> ResponsesResponse:
    """The Response object: ``status`` "in_progress" (no output yet) or "completed" (``text``: the answer as streamed)."""
    preset = request.preset
    done = status == "completed"
    incomplete = done and finish_reason(run) == "length"
    fmt = accepted.answer.json_format
    fields: dict[str, Any] = dict(
        id=f"resp_{run.id}", object="response", created_at=run.created_at, model=request.model_id,
        status="incomplete" if incomplete else status, parallel_tool_calls=accepted.answer.parallel_tool_calls,
        tool_choice=_tool_choice(accepted), instructions=accepted.instructions, metadata=accepted.client_metadata or None,
        tools=[ResponsesFunctionTool(type="function", name=t.name, description=t.description or None, parameters=t.parameters,
                                     strict=t.strict) for t in accepted.answer.tools],
        temperature=accepted.answer.temperature, top_p=accepted.answer.top_p, max_output_tokens=accepted.max_output_tokens,
        max_tool_calls=accepted.answer.max_tool_calls, user=accepted.user,
        text={"format": {"type": "text"} if fmt is None else (
            {"type": "json_object"} if fmt.type == "json_object" else
            {"type": "json_schema", "name": fmt.name, "schema": fmt.json_schema or {}, "strict": fmt.strict})},
        output=response_output(run, run.final_answer if text is None else text, "incomplete" if incomplete else status) if done else [],
        conductor=extension(run_finished(run, request)) if done else extension(run_started(run, preset)),
    )
    if incomplete:
        fields["incomplete_details"] = {"reason": "max_output_tokens"}
    if done:
        fields["usage"] = responses_usage(run)
    return ResponsesResponse(**fields)
