"""The Chat Completions request (``POST /v1/chat/completions``): its schema and ``interpret_chat``, which turns it into
``Accepted`` (what each field does: ``requests.py``'s docstring)."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator

from ..answer_format import AnswerFormat, FunctionTool, ToolChoice
from ..records import ToolCall
from .errors import APIError, unsupported
from .requests import (
    Accepted, Count, FunctionDef, JSONSchemaSpec, Metadata, Number, Open, Part, SamplingParams, StreamOptions, Strict, Turn, _cap, _check_metadata, _json_format, _neutral, _parts_text, _stop, _tool_choice, _tool_names, check_conversation, unique_tools,
)


class FunctionCallBody(Open):
    name: str
    arguments: str = "{}"


class MessageToolCall(Open):
    id: str
    type: str = "function"
    function: Optional[FunctionCallBody] = None


class ChatMessage(Strict):
    """One message. Besides the request fields, every field of the SDK's response message is accepted, so a
    reply appended to the history as ``message.model_dump()`` is valid; what cannot apply is ignored: an earlier
    turn's ``annotations``, its ``audio`` (its transcript stands in for missing text) and its reasoning, which
    providers send as ``reasoning_content`` (DeepSeek, vLLM), ``reasoning`` or ``thinking_blocks`` (litellm)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Union[str, list[Part], None] = None
    name: Optional[str] = None
    tool_calls: Optional[list[MessageToolCall]] = None
    tool_call_id: Optional[str] = None
    function_call: Optional[FunctionCallBody] = None
    refusal: Optional[str] = None
    audio: Optional[dict[str, Any]] = None
    annotations: Optional[list[Any]] = None
    reasoning_content: Optional[str] = None
    reasoning: Union[str, dict[str, Any], None] = None
    thinking_blocks: Optional[list[Any]] = None
    provider_specific_fields: Optional[dict[str, Any]] = None


class ChatTool(Open):
    type: str
    function: Optional[FunctionDef] = None


class ChatResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Optional[JSONSchemaSpec] = None


class ChatCompletionRequest(SamplingParams):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    # honoured
    stream: Optional[bool] = False
    stream_options: Optional[StreamOptions] = None
    tools: Optional[list[ChatTool]] = None
    tool_choice: Union[Literal["none", "auto", "required"], dict[str, Any], None] = None
    parallel_tool_calls: Optional[bool] = None
    functions: Optional[list[FunctionDef]] = None
    function_call: Union[Literal["none", "auto"], dict[str, Any], None] = None
    response_format: Optional[ChatResponseFormat] = None
    max_completion_tokens: Optional[Count] = Field(None, ge=1)
    safety_identifier: Optional[str] = None
    metadata: Metadata = None
    # honoured only at their neutral value
    n: Optional[Count] = Field(None, ge=1)
    logprobs: Optional[bool] = None
    top_logprobs: Optional[Count] = Field(None, ge=0)
    logit_bias: Optional[dict[str, Number]] = None
    audio: Optional[dict[str, Any]] = None
    modalities: Optional[list[str]] = None
    web_search_options: Optional[dict[str, Any]] = None
    moderation: Optional[dict[str, Any]] = None
    # hints with no effect on the answer
    store: Optional[bool] = None
    service_tier: Optional[str] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_options: Optional[dict[str, Any]] = None
    prompt_cache_retention: Optional[str] = None
    reasoning_effort: Optional[str] = None
    verbosity: Optional[str] = None
    prediction: Optional[dict[str, Any]] = None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: Metadata) -> Metadata:
        return _check_metadata(value)


def _chat_turn(i: int, m: ChatMessage) -> Turn:
    param = f"messages[{i}]"
    if m.audio is not None and m.role != "assistant":  # an assistant's is an earlier reply's audio, replayed
        raise unsupported(f"{param}.audio", "audio in the conversation is not supported")
    if (m.tool_calls or m.function_call) and m.role != "assistant":
        raise APIError(400, f"{param}: only assistant messages carry tool calls", param=param, code="invalid_request")
    if m.role in ("system", "developer"):
        return Turn("system", _parts_text(m.content, param, ("text",)), param=param)
    if m.role == "user":
        return Turn("user", _parts_text(m.content, param, ("text",)), param=param)
    if m.role == "tool":
        if not m.tool_call_id:
            raise APIError(400, f"{param}.tool_call_id: a tool message must name the call it answers", param=f"{param}.tool_call_id",
                           code="invalid_request")
        return Turn("tool", _parts_text(m.content, param, ("text",)), call_id=m.tool_call_id, param=f"{param}.tool_call_id")
    if m.role == "function":  # the deprecated function-calling API: the result of the last call of that name
        return Turn("tool", _parts_text(m.content, param, ("text",)), call_id=f"fn_{m.name}", name=m.name, param=param)
    calls = []
    for j, c in enumerate(m.tool_calls or []):
        if c.type != "function" or c.function is None:
            raise unsupported(f"{param}.tool_calls[{j}].type", f"{c.type!r} tool calls are not supported; use function tools")
        calls.append(ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments))
    if m.function_call is not None:
        calls.append(ToolCall(id=f"fn_{m.function_call.name}", name=m.function_call.name, arguments=m.function_call.arguments))
    text = _parts_text(m.content, param, ("text", "refusal")) or (f"(refused: {m.refusal})" if m.refusal else "")
    if not text and m.audio is not None and isinstance(m.audio.get("transcript"), str):
        text = m.audio["transcript"]
    return Turn("assistant", text, tuple(calls), param=param)


def _chat_tools(req: ChatCompletionRequest) -> tuple[list[FunctionTool], ToolChoice, bool]:
    tools, legacy = [], bool(req.functions)
    if req.tools and req.functions:
        raise APIError(400, "functions: send either tools or the deprecated functions, not both", param="functions", code="invalid_request")
    for i, t in enumerate(req.tools or []):
        if t.type != "function" or t.function is None:
            raise unsupported(f"tools[{i}].type", f"{t.type!r} tools are not supported; only function tools (the caller runs them)")
        tools.append(t.function.tool(f"tools[{i}].function.parameters"))
    tools += [f.tool(f"functions[{i}].parameters") for i, f in enumerate(req.functions or [])]
    unique_tools(tools, "functions" if legacy else "tools")
    choice_param, raw = ("function_call", req.function_call) if legacy else ("tool_choice", req.tool_choice)
    return tools, _tool_choice(raw, tools, choice_param, responses=False), legacy


def interpret_chat(req: ChatCompletionRequest) -> Accepted:
    _neutral("n", req.n, (None, 1), "only n = 1 is supported (one workflow, one answer)")
    _neutral("logprobs", req.logprobs, (None, False), "log probabilities are not available: the answer comes from a workflow of models")
    _neutral("top_logprobs", req.top_logprobs, (None, 0), "log probabilities are not available: the answer comes from a workflow of models")
    _neutral("logit_bias", req.logit_bias or None, (None,), "token biases cannot apply: the workers use different tokenizers")
    _neutral("audio", req.audio, (None,), "audio output is not supported")
    if req.modalities and set(req.modalities) - {"text"}:
        raise unsupported("modalities", "only text output is supported")
    _neutral("web_search_options", req.web_search_options, (None,), "web search is not supported; offer a search function as a tool")
    _neutral("moderation", req.moderation, (None,), "moderation is not supported by this server")
    turns = check_conversation(_tool_names([_chat_turn(i, m) for i, m in enumerate(req.messages)]), "messages")
    tools, choice, legacy = _chat_tools(req)
    fmt = req.response_format
    answer = AnswerFormat(
        tools=tools, tool_choice=choice, parallel_tool_calls=req.parallel_tool_calls is not False and not legacy,
        json_format=_json_format(fmt.type, fmt.json_schema, "response_format.json_schema.schema") if fmt else None, stop=_stop(req.stop),
        temperature=req.temperature, top_p=req.top_p, frequency_penalty=req.frequency_penalty, presence_penalty=req.presence_penalty)
    return Accepted(model=req.model, turns=turns, answer=answer, stream=bool(req.stream),
                    include_usage=bool(req.stream_options and req.stream_options.include_usage),
                    max_output_tokens=_cap(req.max_tokens, req.max_completion_tokens), budget=req.conductor, seed=req.seed,
                    user=req.user or req.safety_identifier, client_metadata=dict(req.metadata or {}), legacy_functions=legacy)
