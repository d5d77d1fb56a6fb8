"""What a request asks of its final answer: tools it may call, a JSON format, stop sequences, sampling.

The executor gives an ``AnswerFormat`` to the workflow's final step only (earlier steps write for the
team, not for the caller). Providers declare what they take natively (``Provider.native``: "tools",
"json_schema", "stop"); for the rest ``prepare`` adapts the call once for every provider:

- tools without native tool calling: the tools are described in the prompt and the reply must be a
  JSON object, ``{"content": ...}`` or ``{"tool_calls": [{"name", "arguments"}]}``, constrained by a JSON
  schema where the backend takes one (in-process llama.cpp does), parsed back into tool calls;
- a JSON format without native support: asked for in the prompt, then validated;
- stop sequences without native support: cut after generation.

``Prepared.finish`` checks every reply (native or not) before it becomes the answer: tool names exist,
arguments are JSON objects, JSON output parses and matches its schema. A reply that does not is an
``AnswerFormatError`` (the worker retries the call), except one that could not be checked within its
budget, ``AnswerUncheckable``: that cost is the schema's, and another sample would pay it again.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field

from . import json_schemas
from .records import Completion, ToolCall

Feature = Literal["tools", "json_schema", "stop"]
PROMPTED_MAX_CALLS = 4  # tool calls in one prompted reply, unless the request sets max_tool_calls


class AnswerFormatError(ValueError):
    """A reply that does not match what the request asked for (unknown tool, invalid JSON, schema)."""


class AnswerUncheckable(AnswerFormatError):
    """A reply that could not be checked against the schema within the budget: the schema's cost, not the
    sample's, so the worker does not sample again (each try would spend the budget once more)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class FunctionTool(Strict):
    """A function the caller offers; the caller runs it and sends the result back in the next turn."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: Optional[bool] = None


class NamedTool(Strict):
    name: str


ToolChoice = Union[Literal["auto", "none", "required"], NamedTool]


class JSONFormat(Strict):
    """``json_object`` (any JSON object) or ``json_schema`` (an object matching ``schema``)."""

    type: Literal["json_object", "json_schema"]
    name: str = "response"
    json_schema: Optional[dict[str, Any]] = Field(None, alias="schema")
    strict: Optional[bool] = None
    description: Optional[str] = None


class AnswerFormat(Strict):
    tools: list[FunctionTool] = Field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: Optional[int] = Field(None, ge=1)
    json_format: Optional[JSONFormat] = None
    stop: list[str] = Field(default_factory=list, max_length=4)
    # Sampling, applied by the providers that take it (Anthropic's current API takes none).
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, ge=0, le=1)
    frequency_penalty: Optional[float] = Field(None, ge=-2, le=2)
    presence_penalty: Optional[float] = Field(None, ge=-2, le=2)

    @property
    def offered_tools(self) -> list[FunctionTool]:
        """The tools the reply may call under ``tool_choice``."""
        if self.tool_choice == "none":
            return []
        if isinstance(self.tool_choice, NamedTool):
            return [t for t in self.tools if t.name == self.tool_choice.name]
        return self.tools

    def features(self) -> set[str]:
        needed = set()
        if self.offered_tools:
            needed.add("tools")
        if self.json_format is not None:
            needed.add("json_schema")
        if self.stop:
            needed.add("stop")
        return needed

    def is_empty(self) -> bool:
        """Nothing asked of the answer: the final step is called like any other."""
        return not self.features() and self.temperature is None and self.top_p is None and not self.penalties()

    def penalties(self) -> dict[str, float]:
        return {k: v for k, v in (("frequency_penalty", self.frequency_penalty), ("presence_penalty", self.presence_penalty)) if v}


# ------------------------------------------------------------------------------------------ prompting


def _tool_line(tool: FunctionTool) -> str:
    line = f"- {tool.name}"
    if tool.description:
        line += f": {tool.description}"
    return line + f"\n  arguments (JSON schema): {json.dumps(tool.parameters, ensure_ascii=False)}"


def describe_tools(tools: list[FunctionTool]) -> str:
    """The tools as one text block (also how the conductor and the workers learn that tools exist)."""
    return "\n".join(_tool_line(t) for t in tools)


def content_schema(fmt: Optional[JSONFormat]) -> dict[str, Any]:
    if fmt is None:
        return {"type": "string"}
    if fmt.type == "json_schema" and fmt.json_schema:
        return fmt.json_schema
    return {"type": "object"}


def tool_reply_schema(answer: AnswerFormat) -> dict[str, Any]:
    """JSON schema of a prompted reply: an answer, or calls of the offered tools (with their arguments)."""
    calls = [{"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters or {"type": "object"}},
              "required": ["name", "arguments"], "additionalProperties": False} for t in answer.offered_tools]
    # Small models repeat a call until they run out of tokens: a bound keeps the reply complete.
    limit = 1 if not answer.parallel_tool_calls else (answer.max_tool_calls or PROMPTED_MAX_CALLS)
    array: dict[str, Any] = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls}, "minItems": 1, "maxItems": limit}
    call_branch = {"type": "object", "properties": {"tool_calls": array}, "required": ["tool_calls"], "additionalProperties": False}
    if answer.tool_choice == "required" or isinstance(answer.tool_choice, NamedTool):
        return call_branch
    answer_branch = {"type": "object", "properties": {"content": content_schema(answer.json_format)}, "required": ["content"],
                     "additionalProperties": False}
    return {"anyOf": [answer_branch, call_branch]}


def _tools_instruction(answer: AnswerFormat) -> str:
    must = answer.tool_choice == "required" or isinstance(answer.tool_choice, NamedTool)
    answer_form = '' if must else '{"content": <your answer>} to give your answer, or\n'
    return ("You can call these tools; the caller runs them and sends you their results:\n" + describe_tools(answer.offered_tools)
            + "\n\nReply with only one JSON object:\n" + answer_form
            + '{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments>}}]} to call tools first.')


def _json_instruction(fmt: JSONFormat) -> str:
    if fmt.type == "json_schema" and fmt.json_schema:
        return "Reply with only a JSON object that matches this JSON schema:\n" + json.dumps(fmt.json_schema, ensure_ascii=False)
    return "Reply with only a valid JSON object."


def _append(messages: list[dict], text: str) -> list[dict]:
    """``text`` added to the last user message (a worker's context is one user message)."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            m["content"] = f"{m.get('content', '')}\n\n{text}"
            return out
    return out + [{"role": "user", "content": text}]


# ------------------------------------------------------------------------------------------- replies


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _json_object(text: str) -> Any:
    """The JSON value in ``text``, tolerating a Markdown code fence or prose around one object."""
    stripped = text.strip()
    fence = re.match(r"^```[a-zA-Z]*\s*(.*?)\s*```$", stripped, re.DOTALL)
    if fence:
        stripped = fence.group(1)
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):  # a model's text: 5,000-digit numbers and 10,000 brackets are its to write
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(stripped[start:end + 1])
            except (ValueError, RecursionError):
                pass
        raise AnswerFormatError(f"the reply is not valid JSON: {text[:200]!r}") from None


T = TypeVar("T")

# Reply checks run on one thread of their own: off the event loop (a full reply to a large schema takes tens
# of milliseconds), and one at a time, so that costly schemas contend with the loop for the GIL from one
# thread, not from every thread of the default executor, and never queue behind local generations there.
_REPLY_CHECKS: ThreadPoolExecutor


def _new_reply_checks() -> None:
    global _REPLY_CHECKS
    _REPLY_CHECKS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reply-check")


_new_reply_checks()
# A forked child has the executor but not its thread: work sent there would never run.
os.register_at_fork(after_in_child=_new_reply_checks)


async def off_the_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on the reply-check thread (``check_json``, ``Prepared.finish``)."""
    return await asyncio.get_running_loop().run_in_executor(_REPLY_CHECKS, fn, *args)


def check_json(text: str, fmt: JSONFormat) -> str:
    """The reply as JSON text, or AnswerFormatError naming what is wrong."""
    value = _json_object(text)
    if not isinstance(value, dict) and not (fmt.type == "json_schema" and fmt.json_schema):
        raise AnswerFormatError("the reply is JSON but not an object, as response_format json_object requires")
    if fmt.type == "json_schema" and fmt.json_schema:
        try:  # bounded: neither the schema nor the reply is ours (callers run this through ``off_the_loop``)
            error = json_schemas.first_error(value, fmt.json_schema)
        except json_schemas.ValidationTooCostly as exc:
            raise AnswerUncheckable(f"the reply could not be checked against the JSON schema {fmt.name!r}: {exc}") from None
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            raise AnswerFormatError(f"the reply does not match the JSON schema {fmt.name!r} at {path}: {error.message}")
    return json.dumps(value, ensure_ascii=False) if not _is_json(text) else text.strip()


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def check_tool_calls(calls: list[ToolCall], answer: AnswerFormat) -> list[ToolCall]:
    offered = {t.name for t in answer.offered_tools}
    for call in calls:
        if call.name not in offered:
            raise AnswerFormatError(f"the reply calls {call.name!r}, which is not an offered tool ({', '.join(sorted(offered)) or 'none'})")
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            raise AnswerFormatError(f"the arguments of the call to {call.name!r} are not valid JSON: {call.arguments[:200]!r}") from None
        if not isinstance(args, dict):
            raise AnswerFormatError(f"the arguments of the call to {call.name!r} are not a JSON object")
    if not answer.parallel_tool_calls:
        calls = calls[:1]
    if answer.max_tool_calls is not None:
        calls = calls[: answer.max_tool_calls]
    return calls


def _cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def _read_prompted(text: str, answer: AnswerFormat) -> tuple[str, list[ToolCall]]:
    try:
        value = _json_object(text)
    except AnswerFormatError:
        # A reply cut off inside {"content": "...: keep the text written so far (finish_reason says length).
        partial = re.match(r'^\s*\{\s*"content"\s*:\s*"((?:[^"\\]|\\.)*)', text, re.DOTALL)
        if partial is None:
            raise
        body = partial.group(1)
        for end in range(len(body), max(-1, len(body) - 6), -1):  # drop a half-written escape at the end
            try:
                return json.loads(f'"{body[:end]}"'), []
            except json.JSONDecodeError:
                continue
        return body, []
    if not isinstance(value, dict):
        raise AnswerFormatError(f"the reply is not a JSON object: {text[:200]!r}")
    if "tool_calls" in value:
        raw = value["tool_calls"]
        if not isinstance(raw, list) or not raw:
            raise AnswerFormatError("the reply's tool_calls is not a non-empty list")
        calls, seen = [], set()
        for item in raw:
            if not isinstance(item, dict) or "name" not in item:
                raise AnswerFormatError(f"a tool call without a name: {item!r}"[:200])
            args = item.get("arguments", {})
            arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            if (item["name"], arguments) not in seen:  # the same call twice in one reply is one call
                seen.add((item["name"], arguments))
                calls.append(ToolCall(id=new_call_id(), name=str(item["name"]), arguments=arguments))
        return "", calls
    if "content" in value:
        content = value["content"]
        return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False), []
    raise AnswerFormatError(f'the reply has neither "content" nor "tool_calls": {text[:200]!r}')


# ------------------------------------------------------------------------------------------ preparing


@dataclass
class Prepared:
    """One call adapted to a provider: what to send it, and how to read and check its reply."""

    messages: list[dict]
    native: Optional[AnswerFormat]  # what the provider itself is asked to do (None: nothing)
    answer: AnswerFormat
    prompted_tools: bool = False
    prompted_json: bool = False
    cut_stop: bool = False

    @property
    def streams(self) -> bool:
        """Whether the provider's tokens are the answer's text as it will be returned."""
        return not (self.prompted_tools or self.cut_stop)

    def finish(self, completion: Completion) -> Completion:
        text, calls = completion.text, list(completion.tool_calls)
        if self.prompted_tools:
            text, calls = _read_prompted(text, self.answer)
            if calls:
                completion.finish_reason = "tool_calls"
        if self.cut_stop:
            text, cut = _cut_at_stop(text, self.answer.stop)
            if cut:
                completion.finish_reason = "stop"
        if calls:
            calls = check_tool_calls(calls, self.answer)
        elif self.answer.json_format is not None and completion.finish_reason != "length":
            text = check_json(text, self.answer.json_format)
        return completion.model_copy(update={"text": text, "tool_calls": calls})


def prepare(messages: list[dict], answer: AnswerFormat, native: frozenset[str]) -> Prepared:
    """Adapt one final-step call to a provider that natively takes ``native`` (see the module docstring)."""
    needed = answer.features()
    sampling = answer.model_dump(include={"temperature", "top_p", "frequency_penalty", "presence_penalty"}, exclude_none=True)
    prompted_tools = "tools" in needed and "tools" not in native
    prompted_json = "json_schema" in needed and "json_schema" not in native and not prompted_tools
    cut_stop = "stop" in needed and ("stop" not in native or prompted_tools)
    update: dict[str, Any] = dict(sampling)
    if "tools" in needed and not prompted_tools:
        update.update(tools=answer.tools, tool_choice=answer.tool_choice, parallel_tool_calls=answer.parallel_tool_calls)
    if prompted_tools:
        messages = _append(messages, _tools_instruction(answer))
        if "json_schema" in native:  # constrained decoding: the reply always has the prompted shape
            update["json_format"] = JSONFormat(type="json_schema", name="reply", schema=tool_reply_schema(answer))
    elif answer.json_format is not None:
        if prompted_json:
            messages = _append(messages, _json_instruction(answer.json_format))
        else:
            update["json_format"] = answer.json_format
    if answer.stop and not cut_stop:
        update["stop"] = answer.stop
    native_answer = AnswerFormat(**update) if update else None
    return Prepared(messages, native_answer, answer, prompted_tools, prompted_json, cut_stop)
