"""Any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, Together…

The Chat Completions wire format is spoken directly over one pooled aiohttp session per worker, not
through the openai SDK: under load the SDK's request transformation, response models and httpcore's
connection pool (scanned per request) cost 4-5 ms of CPU per call on the 2-core development machine,
against ~0.4 ms here (``benchmarks/server_load.py`` measures the server as a whole). Retries are ours
(``Worker.call``); HTTP errors map to ProviderError with ``retryable``, ``retry_after`` (Retry-After)
and ``code`` (context_length_exceeded) set, as for every provider (``common.status_error``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

from ..answer_format import AnswerFormat, NamedTool, new_call_id
from ..pool import WorkerSpec
from ..workflow import FormatGrammar
from ..records import Completion, ToolCall, Usage
from .base import Provider, ProviderError, TokenCallback
from .common import TRANSPORT_ERRORS, api_key, status_error, transport_error

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def answer_params(answer: AnswerFormat) -> dict:
    """A request's answer format as Chat Completions parameters (tools, response_format, stop, sampling)."""
    params: dict = dict(answer.penalties())
    if answer.top_p is not None:
        params["top_p"] = answer.top_p
    if answer.stop:
        params["stop"] = answer.stop
    if answer.tools:
        params["tools"] = [{"type": "function", "function": t.model_dump(exclude_none=True)} for t in answer.tools]
        choice = answer.tool_choice
        params["tool_choice"] = {"type": "function", "function": {"name": choice.name}} if isinstance(choice, NamedTool) else choice
        if not answer.parallel_tool_calls:
            params["parallel_tool_calls"] = False
    fmt = answer.json_format
    if fmt is not None:
        if fmt.type == "json_object" or not fmt.json_schema:
            params["response_format"] = {"type": "json_object"}
        else:
            schema = fmt.model_dump(include={"name", "json_schema", "strict", "description"}, by_alias=True, exclude_none=True)
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
    return params


def _error_message(body: bytes) -> str:
    """The message of an OpenAI-style error body, else the body itself (shortened)."""
    try:
        error = json.loads(body).get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)
        if error:
            return str(error)
    except (ValueError, AttributeError):
        pass
    return body[:500].decode("utf-8", "replace")


def _usage(raw: Optional[dict]) -> Usage:
    raw = raw or {}
    return Usage(input_tokens=raw.get("prompt_tokens") or 0, output_tokens=raw.get("completion_tokens") or 0)


def _tool_calls(raw: Optional[list]) -> list[ToolCall]:
    return [ToolCall(id=c.get("id") or new_call_id(), name=c["function"]["name"], arguments=c["function"].get("arguments") or "{}")
            for c in raw or [] if c.get("function")]


class OpenAIOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into the request body as is
    # The server takes a GBNF ``grammar`` field (llama.cpp's server does): the LM conductor constrains its plans there.
    grammar: bool = False
    # The server constrains decoding to a ``response_format`` json_schema (OpenAI, vLLM, llama.cpp's server): without a
    # grammar, the LM conductor's plans are asked for in the planning format's JSON schema. false: free text, resampled.
    json_schema: bool = True


class OpenAICompatProvider(Provider):
    """Options (``OpenAIOptions``): ``extra_body`` (merged into each request), ``grammar`` (true: the
    server takes a GBNF ``grammar`` field, as llama.cpp's server does, so the LM conductor constrains its plans there),
    ``json_schema`` (true, the default: else the conductor's plans are constrained by ``response_format`` json_schema)."""

    native = frozenset({"tools", "json_schema", "stop"})
    Options = OpenAIOptions
    key_envs = ("OPENAI_API_KEY",)
    requires = ("aiohttp",)

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        self.supports_grammar = self.options.grammar
        self.supports_json_schema = self.options.json_schema and not self.options.grammar
        self.url = (spec.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        self._session: Optional[aiohttp.ClientSession] = None

    @classmethod
    def key_variables(cls, spec: WorkerSpec) -> tuple[str, ...]:
        # A custom base_url (vLLM, Ollama, llama.cpp server) may be keyless; api.openai.com is not.
        if spec.base_url and not spec.api_key_env:
            return ()
        return super().key_variables(spec)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            key = api_key(self.spec, self.key_variables(self.spec))
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
            # One connection per concurrent call; idle ones close before a server's usual keep-alive does.
            connector = aiohttp.TCPConnector(limit=self.spec.concurrency, keepalive_timeout=15, ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.spec.timeout_s, sock_read=self.spec.timeout_s)
            self._session = aiohttp.ClientSession(connector=connector, headers=headers, timeout=timeout, raise_for_status=False)
        return self._session

    def params(self, messages, max_tokens: int, temperature: float, grammar: Optional[str], seed: Optional[int],
               answer: Optional[AnswerFormat]) -> dict[str, Any]:
        params: dict[str, Any] = dict(model=self.spec.model, messages=messages, max_tokens=max_tokens, temperature=temperature)
        if self.spec.top_p is not None:
            params["top_p"] = self.spec.top_p
        if seed is not None:
            params["seed"] = seed
        if answer is not None:
            params.update(answer_params(answer))
        params.update(self.options.extra_body)
        if isinstance(grammar, FormatGrammar) and self.supports_json_schema:
            # The same planning format, as the JSON schema the server decodes under; ``parse`` reads its JSON form.
            params["response_format"] = {"type": "json_schema", "json_schema": {"name": "workflow", "schema": grammar.format.json_schema()}}
        elif grammar is not None:
            params["grammar"] = grammar  # the field llama.cpp's server reads (GBNF)
        return params

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        params = self.params(messages, max_tokens, temperature, grammar, seed, answer)
        start = time.perf_counter()
        try:
            if on_token is not None:
                return await self._stream(params, on_token, start)
            async with self.session().post(self.url, data=json.dumps(params)) as response:
                body = await response.read()
                if response.status >= 400:
                    raise status_error(response.status, _error_message(body), response.headers, key_envs=self.key_variables(self.spec))
            data = json.loads(body)
            if data.get("error"):
                raise ProviderError(f"error in the response: {_error_message(body)}", retryable=True)
            if not data.get("choices"):
                raise ProviderError("the endpoint returned no choices", retryable=True)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            return Completion(text=message.get("content") or "", tool_calls=_tool_calls(message.get("tool_calls")),
                              usage=_usage(data.get("usage")), latency_s=time.perf_counter() - start,
                              finish_reason=choice.get("finish_reason"), model=data.get("model"))
        except ProviderError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # A 200 whose body is not a chat completion (malformed JSON, wrong shape).
            raise ProviderError(f"malformed response: {type(exc).__name__}: {exc}", retryable=True) from exc
        except TRANSPORT_ERRORS as exc:  # refused, reset, or dropped while the body was being read
            raise transport_error(exc) from exc

    async def _stream(self, params: dict, on_token: TokenCallback, start: float) -> Completion:
        params = dict(params, stream=True, stream_options={"include_usage": True})
        parts: list[str] = []
        calls: dict[int, dict] = {}  # tool calls arrive in pieces, keyed by index
        state: dict[str, Any] = {"usage": Usage(), "finish": None, "model": None, "done": False}

        def handle(line: bytes) -> None:
            line = line.strip()
            if not line.startswith(b"data:"):
                return  # blank lines, comments, `event:` lines
            payload = line[5:].strip()
            if payload == b"[DONE]":
                state["done"] = True
                return
            chunk = json.loads(payload)
            if chunk.get("error"):  # the server failed mid-generation
                # Retried unless the error says not to: an openconductor server's failed workflow (its stream's
                # headers went out before the run ended, so the error carries what x-should-retry would say).
                error = chunk["error"]
                retry = not (isinstance(error, dict) and error.get("should_retry") is False)
                raise ProviderError(f"error in the stream: {_error_message(payload)}", retryable=retry)
            state["model"] = chunk.get("model") or state["model"]
            if chunk.get("usage"):
                state["usage"] = _usage(chunk["usage"])
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    parts.append(delta["content"])
                    on_token(delta["content"])
                for piece in delta.get("tool_calls") or []:
                    call = calls.setdefault(piece.get("index", 0), {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece.get("id") or call["id"]
                    function = piece.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["arguments"] += function.get("arguments") or ""
                state["finish"] = choice.get("finish_reason") or state["finish"]

        async with self.session().post(self.url, data=json.dumps(params)) as response:
            if response.status >= 400:
                raise status_error(response.status, _error_message(await response.read()), response.headers,
                                   key_envs=self.key_variables(self.spec))
            buffer = b""
            async for piece in response.content.iter_any():
                buffer += piece
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    handle(line)
                if state["done"]:
                    break
            if buffer:
                handle(buffer)
        if state["finish"] is None and not parts and not calls:
            raise ProviderError("the stream ended without any choices", retryable=True)
        return Completion(text="".join(parts), tool_calls=[ToolCall(id=c["id"] or new_call_id(), name=c["name"], arguments=c["arguments"] or "{}")
                                                           for _, c in sorted(calls.items())],
                          usage=state["usage"], latency_s=time.perf_counter() - start, finish_reason=state["finish"], model=state["model"])

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
