"""The Responses request (``POST /v1/responses``): its schema, its input items and ``interpret_responses``, which
turns it into ``Accepted`` (what each field does: ``requests.py``'s docstring)."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field, ValidationError, field_validator

from ..answer_format import AnswerFormat
from ..records import ToolCall
from .errors import APIError, unsupported, validation_message
from .requests import (
    Accepted, ConductorOptions, Count, FunctionDef, JSONSchemaSpec, Metadata, Number, Open, Part, Strict, Turn, _check_metadata, _json_format, _neutral, _parts_text, _tool_choice, _tool_names, check_conversation, unique_tools,
)


class InputMessage(Open):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[Part]]


class FunctionCallItem(Open):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str = "{}"


class FunctionCallOutputItem(Open):
    type: Literal["function_call_output"]
    call_id: str
    output: Union[str, list[Part]]


class ResponsesTool(Open):
    type: str
    name: Optional[str] = None
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None
    strict: Optional[bool] = None


class ResponsesFormat(Open):
    type: Literal["text", "json_object", "json_schema"]
    name: str = "response"
    json_schema: Optional[dict[str, Any]] = Field(None, alias="schema")
    strict: Optional[bool] = None
    description: Optional[str] = None


class TextConfig(Strict):
    format: Optional[ResponsesFormat] = None
    verbosity: Optional[str] = None  # a hint


class ResponsesRequest(Strict):
    model: str
    input: Union[str, list[dict[str, Any]]]
    instructions: Optional[str] = None
    # honoured
    stream: Optional[bool] = False
    stream_options: Optional[dict[str, Any]] = None  # include_obfuscation: no padding is sent either way
    tools: Optional[list[ResponsesTool]] = None
    tool_choice: Union[Literal["none", "auto", "required"], dict[str, Any], None] = None
    parallel_tool_calls: Optional[bool] = None
    max_tool_calls: Optional[Count] = Field(None, ge=1)
    text: Optional[TextConfig] = None
    max_output_tokens: Optional[Count] = Field(None, ge=1)
    temperature: Optional[Number] = Field(None, ge=0, le=2)
    top_p: Optional[Number] = Field(None, ge=0, le=1)
    seed: Optional[Count] = None  # not in OpenAI's schema; kept for reproducible local runs
    user: Optional[str] = None
    safety_identifier: Optional[str] = None
    metadata: Metadata = None
    conductor: Optional[ConductorOptions] = None
    # honoured only at their neutral value
    background: Optional[bool] = None
    background_options: Optional[dict[str, Any]] = None
    conversation: Union[str, dict[str, Any], None] = None
    previous_response_id: Optional[str] = None
    prompt: Optional[dict[str, Any]] = None
    context_management: Optional[list[dict[str, Any]]] = None
    moderation: Optional[dict[str, Any]] = None
    top_logprobs: Optional[Count] = Field(None, ge=0)
    # hints with no effect on the answer
    include: Optional[list[str]] = None
    store: Optional[bool] = None
    service_tier: Optional[str] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_options: Optional[dict[str, Any]] = None
    prompt_cache_retention: Optional[str] = None
    reasoning: Optional[dict[str, Any]] = None
    truncation: Optional[Literal["auto", "disabled"]] = None
    image: Optional[dict[str, Any]] = None
    access_programs: Optional[dict[str, Any]] = None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: Metadata) -> Metadata:
        return _check_metadata(value)


ITEM_MODELS: dict[str, type[BaseModel]] = {"message": InputMessage, "function_call": FunctionCallItem,
                                           "function_call_output": FunctionCallOutputItem}


def _input_turns(value: Union[str, list[dict[str, Any]]]) -> list[Turn]:
    if isinstance(value, str):
        return [Turn("user", value, param="input")]
    turns = []
    for i, item in enumerate(value):
        param = f"input[{i}]"
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise APIError(400, f"{param}.type: expected a string", param=f"{param}.type", code="invalid_request")
        if kind == "reasoning":
            continue  # an earlier response's reasoning item, replayed: there is nothing in it to read
        if kind not in ITEM_MODELS:
            raise unsupported(f"{param}.type", f"{kind!r} input items are not supported (messages, function_call and "
                              "function_call_output are)")
        try:
            parsed = ITEM_MODELS[kind].model_validate(item)
        except ValidationError as exc:
            message, where = validation_message(exc.errors(), prefix=param)
            raise APIError(400, message, param=where, code="invalid_request") from None
        if isinstance(parsed, InputMessage):
            role = "system" if parsed.role in ("system", "developer") else parsed.role
            allowed = ("input_text",) if role != "assistant" else ("output_text", "input_text", "refusal")
            turns.append(Turn(role, _parts_text(parsed.content, param, allowed + ("text",)), param=param))
        elif isinstance(parsed, FunctionCallItem):
            call = ToolCall(id=parsed.call_id, name=parsed.name, arguments=parsed.arguments)
            if turns and turns[-1].role == "assistant":  # consecutive call items belong to one assistant turn
                prev = turns[-1]
                turns[-1] = Turn("assistant", prev.text, prev.tool_calls + (call,), param=prev.param)
            else:
                turns.append(Turn("assistant", "", (call,), param=param))
        else:
            turns.append(Turn("tool", _parts_text(parsed.output, param, ("input_text", "text")), call_id=parsed.call_id,
                              param=f"{param}.call_id"))
    return turns


def interpret_responses(req: ResponsesRequest) -> Accepted:
    _neutral("background", req.background, (None, False), "background mode is not supported; use stream: true for long runs")
    _neutral("conversation", req.conversation, (None,), "stored conversations are not supported; send the whole conversation in input")
    _neutral("previous_response_id", req.previous_response_id, (None,),
             "responses are not chained on the server; send the whole conversation in input")
    _neutral("prompt", req.prompt, (None,), "stored prompt templates are not supported; send instructions and input")
    _neutral("context_management", req.context_management or None, (None,), "context compaction is not supported")
    _neutral("moderation", req.moderation, (None,), "moderation is not supported by this server")
    _neutral("top_logprobs", req.top_logprobs, (None, 0), "log probabilities are not available: the answer comes from a workflow of models")
    turns = ([Turn("system", req.instructions, param="instructions")] if req.instructions else []) + _input_turns(req.input)
    turns = check_conversation(_tool_names(turns), "input")
    tools = []
    for i, t in enumerate(req.tools or []):
        if t.type != "function" or not t.name:
            raise unsupported(f"tools[{i}].type", f"{t.type!r} tools are not supported; only function tools (the caller runs them)")
        try:
            function = FunctionDef(name=t.name, description=t.description, parameters=t.parameters, strict=t.strict)
        except ValidationError as exc:  # the same checks as a Chat function's (its name's pattern)
            message, where = validation_message(exc.errors(), prefix=f"tools[{i}]")
            raise APIError(400, message, param=where, code="invalid_request") from None
        tools.append(function.tool(f"tools[{i}].parameters"))
    choice = _tool_choice(req.tool_choice, unique_tools(tools, "tools"), "tool_choice", responses=True)
    fmt = req.text.format if req.text else None
    answer = AnswerFormat(
        tools=tools, tool_choice=choice, parallel_tool_calls=req.parallel_tool_calls is not False, max_tool_calls=req.max_tool_calls,
        json_format=_json_format(fmt.type, JSONSchemaSpec(name=fmt.name, schema=fmt.json_schema, strict=fmt.strict), "text.format.schema") if fmt else None,
        temperature=req.temperature, top_p=req.top_p)
    return Accepted(model=req.model, turns=turns, answer=answer, stream=bool(req.stream), include_usage=True,
                    max_output_tokens=req.max_output_tokens, budget=req.conductor, seed=req.seed, user=req.user or req.safety_identifier,
                    client_metadata=dict(req.metadata or {}), instructions=req.instructions)
