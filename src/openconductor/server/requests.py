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
almost anything. ``interpret_chat`` (``chat_request.py``) / ``interpret_responses`` (``responses_request.py``) turn a
request into ``Accepted``; this module holds what they share (the conversation, tools, formats, limits).
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


# ----------------------------------------------------------------- shared by the chat and legacy requests


class FunctionDef(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None
    strict: Optional[bool] = None

    def tool(self, param: str) -> FunctionTool:
        parameters = object_schema(checked_schema(self.parameters, param), param) if self.parameters is not None else {"type": "object", "properties": {}}
        return FunctionTool(name=self.name, description=self.description or "", parameters=parameters or {"type": "object", "properties": {}},
                            strict=self.strict)


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


def parse(model: type[BaseModel], data: dict) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message, param = validation_message(exc.errors())
        raise APIError(400, message, code="invalid_request", param=param) from None


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


__all__ = ["Accepted", "ConductorOptions", "SamplingParams", "StreamOptions", "Turn", "apply_request_limits", "parse",
           "render_question"]
