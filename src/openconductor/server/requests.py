"""Request models for the Chat Completions and Responses APIs, and what a request asks of a run.

Every top-level field of both request schemas is accepted (a misspelt one is a 400 that names it).
Each is either **honoured** (the conversation, tools and tool_choice, response_format / text.format,
stop, max_tokens / max_completion_tokens / max_output_tokens, temperature, top_p, the penalties,
seed, user, metadata, stream options, max_tool_calls), **accepted as a hint with no effect on the
answer** (store, service_tier, prompt_cache_*, reasoning_effort / reasoning, verbosity, prediction,
include, truncation, image, access_programs), or, when it asks for what the server cannot do, **rejected
with a 400 naming it** (n > 1, logprobs, logit_bias, audio, web search, moderation, stored
conversations and previous_response_id, background mode, prompt templates, context management,
non-function tools, image/audio/file inputs).

Requests are validated here, not with the SDK's request types: those are TypedDicts that accept
almost anything. ``interpret_chat`` / ``interpret_responses`` turn a request into ``Accepted``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from .. import json_schemas
from ..answer_format import AnswerFormat, FunctionTool, JSONFormat, NamedTool, ToolChoice, describe_tools
from ..budget import Limits
from ..records import ToolCall
from .errors import APIError, unsupported, validation_message


def _number(value: Any) -> Any:
    """OpenAI refuses a boolean or a string where a number goes; pydantic's lax mode would read them as 1.0 / 0.5."""
    if isinstance(value, (bool, str)):
        raise ValueError(f"expected a number, not a {'boolean' if isinstance(value, bool) else 'string'}")
    return value


Number = Annotated[float, BeforeValidator(_number)]
Count = Annotated[int, BeforeValidator(_number)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Open(BaseModel):
    """Nested objects clients replay from earlier responses: fields added by newer API versions pass."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ConductorOptions(Strict):
    """The extension body field ``conductor``: lower this request's budget below its key's ceiling."""

    max_calls: Optional[Count] = Field(None, ge=1)
    max_tokens: Optional[Count] = Field(None, ge=1)
    max_cost_usd: Optional[Number] = Field(None, gt=0)
    max_depth: Optional[Count] = Field(None, ge=0)

    def requested(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


def apply_request_limits(ceiling: Limits, options: Optional[ConductorOptions], param_prefix: str = "conductor") -> Limits:
    """A request may lower its ceiling, never raise it: asking for more is a 400 that names the ceiling."""
    if options is None:
        return ceiling
    asked = options.requested()
    for name, value in asked.items():
        cap = getattr(ceiling, name)
        if cap is not None and value > cap:
            raise APIError(400, f"{param_prefix}.{name}={value:g} is above this key's ceiling of {cap:g}; "
                                "a request may only lower its limits", code="limit_above_ceiling", param=f"{param_prefix}.{name}")
    return ceiling.tightened(Limits(**{**ceiling.model_dump(), **asked}))


Metadata = Optional[dict[str, str]]


def _check_metadata(value: Metadata) -> Metadata:
    """OpenAI's limits: at most 16 pairs, keys up to 64 characters, values up to 512."""
    if value is None:
        return value
    if len(value) > 16:
        raise ValueError("at most 16 key-value pairs")
    for k, v in value.items():
        if len(k) > 64 or len(v) > 512:
            raise ValueError(f"keys are at most 64 characters and values at most 512 ({k[:20]!r})")
    return value


# -------------------------------------------------------------------------------------- conversation


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation, whichever API it came from. ``param`` names it in error messages."""

    role: Literal["system", "user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: Optional[str] = None  # tool turns: the call they answer
    name: Optional[str] = None  # tool turns: the tool's name
    param: str = ""


def check_conversation(turns: list[Turn], what: str) -> list[Turn]:
    """The conversation has a request to answer: a user message, then only tool calls and their results."""
    users = [i for i, t in enumerate(turns) if t.role == "user"]
    if not users:
        raise APIError(400, f"{what} has no user message; the last user message is the request to solve", param=what,
                       code="invalid_request")
    last = users[-1]
    if not turns[last].text.strip():
        raise APIError(400, f"{turns[last].param}: the last user message is empty", param=turns[last].param, code="invalid_request")
    calls = {c.id: c for t in turns if t.role == "assistant" for c in t.tool_calls}
    for t in turns:
        if t.role == "tool" and t.call_id not in calls:
            raise APIError(400, f"{t.param}: no earlier assistant message has a tool call with id {t.call_id!r}",
                           param=t.param, code="invalid_request")
    tail = [t for t in turns[last + 1:] if t.role != "system"]  # instructions may come anywhere
    bad = next((t for t in tail if t.role == "assistant" and not t.tool_calls), None)
    if bad is None and tail and tail[-1].role != "tool":
        bad = tail[-1]
    if bad is not None:
        raise APIError(400, f"{bad.param}: after the last user message only assistant tool calls and their results may "
                            "follow, and the conversation must end with a user message or tool results",
                       param=bad.param, code="invalid_request")
    return turns


def _call_line(call: ToolCall) -> str:
    return f"{call.name}({call.arguments}) [call id {call.id}]"


def _render(turn: Turn) -> str:
    if turn.role == "tool":
        return f"Tool result for {turn.name or 'a tool'} [call id {turn.call_id}]:\n{turn.text.strip()}"
    lines = [f"{turn.role.capitalize()}: {turn.text.strip()}"] if turn.text.strip() else []
    lines += [f"Assistant called tool {_call_line(c)}" for c in turn.tool_calls]
    return "\n".join(lines)


def render_question(turns: list[Turn], answer: Optional[AnswerFormat] = None) -> str:
    """A conversation becomes the overall task: instructions, the tools, earlier turns, the current request
    and the tool calls made for it with their results. The conductor and every worker read this text."""
    instructions = [t.text.strip() for t in turns if t.role == "system" and t.text.strip()]
    convo = [t for t in turns if t.role != "system"]
    last = max(i for i, t in enumerate(convo) if t.role == "user")
    earlier, current, progress = convo[:last], convo[last], convo[last + 1:]
    tools = answer.offered_tools if answer is not None else []
    if not (instructions or earlier or progress or tools):
        return current.text.strip()
    parts = []
    if instructions:
        parts.append("Instructions:\n" + "\n\n".join(instructions))
    if tools:
        parts.append("Tools the final step may call (the caller runs them and sends their results back in the "
                     "next turn):\n" + describe_tools(tools))
    if earlier:
        parts.append("Conversation so far:\n" + "\n".join(filter(None, (_render(t) for t in earlier))))
    parts.append(("Current request (answer this):\n" if earlier else "Request:\n") + current.text.strip())
    if progress:
        parts.append("Tool calls already made for this request, and their results:\n" + "\n".join(filter(None, (_render(t) for t in progress))))
    return "\n\n".join(parts)


def _tool_names(turns: list[Turn]) -> list[Turn]:
    """Tool turns get the name of the call they answer (the Chat API sends only its id)."""
    names = {c.id: c.name for t in turns for c in t.tool_calls}
    return [t if t.role != "tool" or t.name else Turn(t.role, t.text, t.tool_calls, t.call_id, names.get(t.call_id or ""), t.param)
            for t in turns]


# --------------------------------------------------------------------------------- shared pieces


class Part(Open):
    """A content part; text is read, other kinds are refused by the API adapters below."""

    type: str
    text: Optional[str] = None
    refusal: Optional[str] = None


def _parts_text(parts: Union[str, list[Part], None], param: str, allowed: tuple[str, ...]) -> str:
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    texts = []
    for j, part in enumerate(parts):
        if part.type not in allowed:
            raise unsupported(f"{param}.content[{j}].type", f"{part.type!r} content is not supported; this model reads text ("
                              + ", ".join(allowed) + ")")
        texts.append(part.text if part.text is not None else f"(refused: {part.refusal})" if part.refusal else "")
    return "\n".join(texts)


class JSONSchemaSpec(Open):
    name: str = "response"
    json_schema: Optional[dict[str, Any]] = Field(None, alias="schema")
    strict: Optional[bool] = None
    description: Optional[str] = None


def _json_format(kind: str, spec: Optional[JSONSchemaSpec], param: str) -> Optional[JSONFormat]:
    if kind == "text":
        return None
    if kind == "json_object":
        return JSONFormat(type="json_object")
    if spec is None or not spec.json_schema:
        raise APIError(400, f"{param}: a json_schema format needs its schema", param=param, code="invalid_request")
    return JSONFormat(type="json_schema", name=spec.name, schema=checked_schema(spec.json_schema, param), strict=spec.strict)


def checked_schema(schema: Any, param: str) -> Any:
    """A caller's JSON schema, checked here (see ``json_schemas``) so a broken one is the caller's 400
    naming the parameter and the place inside the schema, not a failed run."""
    try:
        json_schemas.check_schema(schema)
    except json_schemas.SchemaProblem as exc:
        inside = f" at {exc.where()}" if exc.path else ""
        raise APIError(400, f"{param}: not a usable JSON schema{inside}: {exc.message}", param=param, code="invalid_json_schema") from None
    return schema


def object_schema(schema: dict[str, Any], param: str) -> dict[str, Any]:
    """A function's parameters: an object schema (arguments are a JSON object), or {} for none, as OpenAI requires."""
    kind = schema.get("type")
    if schema and kind != "object" and kind != ["object"]:
        raise APIError(400, f"{param}: a function's parameters must be a JSON schema of type \"object\", got type {kind!r}; "
                            "put a single value in a property of an object", param=param, code="invalid_function_parameters")
    return schema


def unique_tools(tools: list[FunctionTool], param: str) -> list[FunctionTool]:
    """Tool names are how a call names its function: two tools of one name are a 400, as at OpenAI."""
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise APIError(400, f"{param}[{i}]: the tool name {tool.name!r} is used twice; tool names must be unique",
                           param=f"{param}[{i}]", code="duplicate_tool_name")
        seen.add(tool.name)
    return tools


def _stop(value: Union[str, list[str], None]) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _neutral(param: str, value: Any, neutral: tuple, why: str) -> None:
    if value not in neutral:
        raise unsupported(param, why)


def _cap(*values: Optional[int]) -> Optional[int]:
    given = [v for v in values if v is not None]
    return min(given) if given else None


@dataclass
class Accepted:
    """What a request asks of a run, whichever API it came through."""

    model: str
    turns: list[Turn]
    answer: AnswerFormat = field(default_factory=AnswerFormat)
    stream: bool = False
    include_usage: bool = False
    max_output_tokens: Optional[int] = None
    budget: Optional[ConductorOptions] = None
    seed: Optional[int] = None
    user: Optional[str] = None
    client_metadata: dict[str, str] = field(default_factory=dict)
    legacy_functions: bool = False  # Chat: the caller used `functions`; answer with `function_call`
    instructions: Optional[str] = None  # Responses: echoed in the response object

    def question(self) -> str:
        return render_question(self.turns, self.answer)

    def current_request(self) -> str:
        """The last user turn alone: what the request asks, without the instructions and history around it."""
        return next((t.text.strip() for t in reversed(self.turns) if t.role == "user"), "")


# ---------------------------------------------------------------------------------- chat completions


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


class FunctionDef(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None
    strict: Optional[bool] = None

    def tool(self, param: str) -> FunctionTool:
        parameters = object_schema(checked_schema(self.parameters, param), param) if self.parameters is not None else {"type": "object", "properties": {}}
        return FunctionTool(name=self.name, description=self.description or "", parameters=parameters or {"type": "object", "properties": {}},
                            strict=self.strict)


class ChatTool(Open):
    type: str
    function: Optional[FunctionDef] = None


class ChatResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Optional[JSONSchemaSpec] = None


class StreamOptions(Strict):
    include_usage: bool = False
    include_obfuscation: Optional[bool] = None  # no obfuscation padding is sent either way


class SamplingParams(Strict):
    """What the Chat and the legacy Completions requests share, with OpenAI's ranges (all honoured)."""

    stop: Union[str, list[str], None] = None
    max_tokens: Optional[Count] = Field(None, ge=1)
    temperature: Optional[Number] = Field(None, ge=0, le=2)
    top_p: Optional[Number] = Field(None, ge=0, le=1)
    frequency_penalty: Optional[Number] = Field(None, ge=-2, le=2)
    presence_penalty: Optional[Number] = Field(None, ge=-2, le=2)
    seed: Optional[Count] = None
    user: Optional[str] = None
    conductor: Optional[ConductorOptions] = None  # the extension field

    @field_validator("stop")
    @classmethod
    def _stop_count(cls, value: Union[str, list[str], None]) -> Union[str, list[str], None]:
        if isinstance(value, list) and len(value) > 4:
            raise ValueError("at most 4 stop sequences")
        return value


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


def _tool_choice(raw: Any, tools: list[FunctionTool], param: str, *, responses: bool) -> ToolChoice:
    """A tool_choice of either API as "none" | "auto" | "required" | NamedTool; allowed_tools narrows ``tools``."""
    if raw is None:
        return "auto"
    if isinstance(raw, str):
        if raw not in ("none", "auto", "required"):
            raise APIError(400, f"{param}: expected none, auto, required or a function", param=param, code="invalid_request")
        if raw == "required" and not tools:
            raise APIError(400, f"{param}: \"required\" needs at least one tool; send tools or leave {param} out",
                           param=param, code="invalid_request")
        return raw  # type: ignore[return-value]
    kind = raw.get("type", "function")  # the deprecated function_call is {"name": ...}
    if kind == "function":
        name = raw.get("name") if responses or "function" not in raw else (raw.get("function") or {}).get("name")
        if name not in {t.name for t in tools}:
            raise APIError(400, f"{param}: {name!r} is not one of the tools", param=param, code="invalid_request")
        return NamedTool(name=name)
    if kind == "allowed_tools":
        spec = raw if responses else raw.get("allowed_tools", {})
        allowed = {(t.get("name") if responses else (t.get("function") or {}).get("name")) for t in spec.get("tools", [])}
        unknown = allowed - {t.name for t in tools}
        if unknown or not allowed:
            raise APIError(400, f"{param}.tools: {sorted(unknown) or 'no tools'} are not among the request's tools", param=f"{param}.tools",
                           code="invalid_request")
        tools[:] = [t for t in tools if t.name in allowed]
        mode = spec.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise APIError(400, f"{param}.mode: expected auto or required", param=f"{param}.mode", code="invalid_request")
        return mode
    raise unsupported(f"{param}.type", f"{kind!r} is not supported; only function tools")


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


# --------------------------------------------------------------------------------------- responses


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


def parse(model: type[BaseModel], data: dict) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message, param = validation_message(exc.errors())
        raise APIError(400, message, code="invalid_request", param=param) from None


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


__all__ = ["Accepted", "ChatCompletionRequest", "ConductorOptions", "ResponsesRequest", "Turn", "apply_request_limits",
           "interpret_chat", "interpret_responses", "parse", "render_question"]
