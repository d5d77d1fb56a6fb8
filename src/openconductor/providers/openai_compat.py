"""Any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, Together…

Retries are ours (``Worker.call``), so the SDK's own are off; errors are mapped to ProviderError with
``retryable`` and ``retry_after`` (from the Retry-After header) set.
"""

from __future__ import annotations

import time
from typing import Optional

import openai

from ..answer_format import AnswerFormat, NamedTool, new_call_id
from ..pool import Provider, ProviderError, TokenCallback, WorkerSpec
from ..records import Completion, ToolCall, Usage
from .common import RETRYABLE_STATUS, TRANSPORT_ERRORS, api_key, retry_after_seconds, status_error, transport_error  # noqa: F401


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


def _tool_calls(raw) -> list[ToolCall]:
    return [ToolCall(id=c.id or new_call_id(), name=c.function.name, arguments=c.function.arguments or "{}")
            for c in raw or [] if getattr(c, "function", None) is not None]


class OpenAICompatProvider(Provider):
    """Options: ``extra_body`` (sent as is), ``grammar`` (true: the server takes a GBNF ``grammar``
    field, as llama.cpp's server does, so the LM conductor constrains its plans there)."""

    native = frozenset({"tools", "json_schema", "stop"})

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        self.supports_grammar = bool(spec.options.get("grammar", False))
        self._client: Optional[openai.AsyncOpenAI] = None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = api_key(self.spec, None if self.spec.base_url else "OPENAI_API_KEY") or "not-needed"
            self._client = openai.AsyncOpenAI(
                base_url=self.spec.base_url, api_key=key, max_retries=0, timeout=self.spec.timeout_s
            )
        return self._client

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        params = dict(model=self.spec.model, messages=messages, max_tokens=max_tokens, temperature=temperature)
        if self.spec.top_p is not None:
            params["top_p"] = self.spec.top_p
        if seed is not None:
            params["seed"] = seed
        if answer is not None:
            params.update(answer_params(answer))
        extra = dict(self.spec.options.get("extra_body", {}))
        if grammar is not None:
            extra["grammar"] = grammar  # the field llama.cpp's server reads (GBNF)
        if extra:
            params["extra_body"] = extra
        start = time.perf_counter()
        try:
            if on_token is None:
                response = await self.client().chat.completions.create(**params)
                if not getattr(response, "choices", None):
                    raise ProviderError("the endpoint returned no choices", retryable=True)
                choice = response.choices[0]
                text = choice.message.content or ""
                usage = response.usage
                return Completion(
                    text=text,
                    tool_calls=_tool_calls(choice.message.tool_calls),
                    usage=Usage(input_tokens=getattr(usage, "prompt_tokens", 0) or 0, output_tokens=getattr(usage, "completion_tokens", 0) or 0),
                    latency_s=time.perf_counter() - start,
                    finish_reason=choice.finish_reason,
                    model=response.model,
                )
            return await self._stream(params, on_token, start)
        except ProviderError:
            raise
        except openai.APIStatusError as exc:
            raise status_error(exc.status_code, exc.message, exc.response.headers) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}", retryable=True) from exc
        except (ValueError, TypeError, AttributeError, openai.APIResponseValidationError) as exc:
            # A 200 whose body is not a chat completion (malformed JSON, wrong shape).
            raise ProviderError(f"malformed response: {exc}", retryable=True) from exc
        except openai.APIError as exc:
            # An error event inside a 200 stream (the server failed mid-generation).
            raise ProviderError(f"error in the stream: {exc.message}", retryable=True) from exc
        except TRANSPORT_ERRORS as exc:  # the connection dropped while the stream was being read
            raise transport_error(exc) from exc

    async def _stream(self, params: dict, on_token: TokenCallback, start: float) -> Completion:
        params = dict(params, stream=True, stream_options={"include_usage": True})
        stream = await self.client().chat.completions.create(**params)
        parts: list[str] = []
        calls: dict[int, dict] = {}  # tool calls arrive in pieces, keyed by index
        usage = Usage()
        finish = None
        model = None
        async for chunk in stream:
            model = chunk.model or model
            if chunk.usage is not None:
                usage = Usage(input_tokens=chunk.usage.prompt_tokens or 0, output_tokens=chunk.usage.completion_tokens or 0)
            if chunk.choices:
                delta = chunk.choices[0].delta
                if delta is not None and delta.content:
                    parts.append(delta.content)
                    on_token(delta.content)
                for piece in (delta.tool_calls or []) if delta is not None else []:
                    call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    if piece.function is not None:
                        call["name"] += piece.function.name or ""
                        call["arguments"] += piece.function.arguments or ""
                finish = chunk.choices[0].finish_reason or finish
        if finish is None and not parts and not calls:
            raise ProviderError("the stream ended without any choices", retryable=True)
        return Completion(text="".join(parts), tool_calls=[ToolCall(**{**calls[i], "id": calls[i]["id"] or new_call_id()}) for i in sorted(calls)], usage=usage,
                          latency_s=time.perf_counter() - start, finish_reason=finish, model=model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
