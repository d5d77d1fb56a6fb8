"""Any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, Together…

Retries are ours (``Worker.call``), so the SDK's own are off; errors are mapped to ProviderError with
``retryable`` and ``retry_after`` (from the Retry-After header) set.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import openai
from pydantic import BaseModel, ConfigDict, Field

from ..pool import Provider, ProviderError, TokenCallback, WorkerSpec
from ..records import Completion, Usage
from .common import RETRYABLE_STATUS, TRANSPORT_ERRORS, api_key, retry_after_seconds, status_error, transport_error  # noqa: F401


class OpenAIOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into the request body as is
    # The server takes a GBNF ``grammar`` field (llama.cpp's server does): the LM conductor constrains its plans there.
    grammar: bool = False


class OpenAICompatProvider(Provider):
    Options = OpenAIOptions
    key_envs = ("OPENAI_API_KEY",)
    requires = ("openai",)

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        self.supports_grammar = self.options.grammar
        self._client: Optional[openai.AsyncOpenAI] = None

    @classmethod
    def key_variables(cls, spec: WorkerSpec) -> tuple[str, ...]:
        # A custom base_url (vLLM, Ollama, llama.cpp server) may be keyless; api.openai.com is not.
        if spec.base_url and not spec.api_key_env:
            return ()
        return super().key_variables(spec)

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = api_key(self.spec, self.key_variables(self.spec)) or "not-needed"
            self._client = openai.AsyncOpenAI(
                base_url=self.spec.base_url, api_key=key, max_retries=0, timeout=self.spec.timeout_s
            )
        return self._client

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None) -> Completion:
        params = dict(model=self.spec.model, messages=messages, max_tokens=max_tokens, temperature=temperature)
        if self.spec.top_p is not None:
            params["top_p"] = self.spec.top_p
        if seed is not None:
            params["seed"] = seed
        extra = dict(self.options.extra_body)
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
                finish = chunk.choices[0].finish_reason or finish
        if finish is None and not parts:
            raise ProviderError("the stream ended without any choices", retryable=True)
        return Completion(text="".join(parts), usage=usage, latency_s=time.perf_counter() - start, finish_reason=finish, model=model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
