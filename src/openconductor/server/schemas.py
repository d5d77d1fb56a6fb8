"""Request models (strict, our own) and the OpenAI-style error shape.

Responses are built with the openai SDK's types (see app.py); requests are validated here because the
SDK's request types are TypedDicts that accept almost anything.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..budget import Limits


class APIError(Exception):
    """Any error the API answers with; rendered as OpenAI's {"error": {...}} object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", code: Optional[str] = None,
                 param: Optional[str] = None, headers: Optional[dict[str, str]] = None, extra: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        error.update(self.extra)
        return {"error": error}


def validation_message(errors: list[dict]) -> tuple[str, Optional[str]]:
    """One readable message from pydantic errors, and the first offending parameter."""
    parts, param = [], None
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p not in ("body",))
        param = param or loc or None
        message = e.get("msg", "invalid")
        if e.get("type") == "extra_forbidden":
            message = "unknown or unsupported parameter"
        parts.append(f"{loc or 'body'}: {message}")
    return "; ".join(parts), param


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(Strict):
    type: Literal["text", "input_text", "output_text"]
    text: str


class ConductorOptions(Strict):
    """The extension body field ``conductor``: lower this request's budget below its key's ceiling."""

    max_calls: Optional[int] = Field(None, ge=1)
    max_tokens: Optional[int] = Field(None, ge=1)
    max_cost_usd: Optional[float] = Field(None, gt=0)
    max_depth: Optional[int] = Field(None, ge=0)

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


# ------------------------------------------------------------------------------------ chat completions


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[TextPart], None] = None
    name: Optional[str] = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content)


class StreamOptions(Strict):
    include_usage: bool = True


class ChatCompletionRequest(Strict):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    seed: Optional[int] = None
    user: Optional[str] = None
    metadata: Optional[dict[str, str]] = None
    n: Literal[1] = 1
    conductor: Optional[ConductorOptions] = None
    # Accepted for client compatibility but not applied: the pool file sets each worker's sampling and
    # output length; a whole-request token cap is `conductor.max_tokens`.
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, ge=0, le=1)
    max_tokens: Optional[int] = Field(None, ge=1)
    max_completion_tokens: Optional[int] = Field(None, ge=1)
    store: Optional[bool] = None

    @field_validator("messages")
    @classmethod
    def _last_is_user(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        turns = [m for m in messages if m.role not in ("system", "developer")]
        if not turns or turns[-1].role != "user":
            raise ValueError("the last non-system message must come from the user (it is the request to solve)")
        if not turns[-1].text().strip():
            raise ValueError("the last user message is empty")
        return messages

    def turns(self) -> list[tuple[str, str]]:
        return [(m.role, m.text()) for m in self.messages]


# ---------------------------------------------------------------------------------------- responses


class InputMessage(Strict):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[TextPart]]

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "\n".join(p.text for p in self.content)


class ResponsesRequest(Strict):
    model: str
    input: Union[str, list[InputMessage]]
    instructions: Optional[str] = None
    stream: bool = False
    seed: Optional[int] = None
    user: Optional[str] = None
    metadata: Optional[dict[str, str]] = None
    conductor: Optional[ConductorOptions] = None
    temperature: Optional[float] = Field(None, ge=0, le=2)  # accepted, not applied (see ChatCompletionRequest)
    top_p: Optional[float] = Field(None, ge=0, le=1)
    max_output_tokens: Optional[int] = Field(None, ge=1)
    store: Optional[bool] = None

    @field_validator("input")
    @classmethod
    def _has_request(cls, value: Union[str, list[InputMessage]]) -> Union[str, list[InputMessage]]:
        convo = [(value if isinstance(value, str) else "")] if isinstance(value, str) else [
            m.text() if m.role == "user" else None for m in value if m.role not in ("system", "developer")]
        if not convo or convo[-1] is None or not convo[-1].strip():
            raise ValueError("input must end with a non-empty user message (it is the request to solve)")
        return value

    def turns(self) -> list[tuple[str, str]]:
        turns = [("system", self.instructions)] if self.instructions else []
        if isinstance(self.input, str):
            return turns + [("user", self.input)]
        return turns + [(m.role, m.text()) for m in self.input]


# ------------------------------------------------------------------------------------------ question


def render_question(turns: list[tuple[str, str]]) -> str:
    """A conversation becomes the overall task: instructions, earlier turns, then the current request."""
    instructions = [text.strip() for role, text in turns if role in ("system", "developer") and text.strip()]
    convo = [(role, text.strip()) for role, text in turns if role not in ("system", "developer")]
    *earlier, (_, current) = convo
    if not instructions and not earlier:
        return current
    parts = []
    if instructions:
        parts.append("Instructions:\n" + "\n\n".join(instructions))
    if earlier:
        parts.append("Conversation so far:\n" + "\n".join(f"{role.capitalize()}: {text}" for role, text in earlier))
        parts.append("Current request (answer this):\n" + current)
    else:
        parts.append("Request:\n" + current)
    return "\n\n".join(parts)
