"""Anthropic's Messages API through the official ``anthropic`` SDK (``AsyncAnthropic``).

System messages go to the ``system`` parameter (the API takes no system turn). The SDK's retries are
off: ``Worker.call`` retries, and errors map to ProviderError exactly as for OpenAI-compatible
endpoints (429/5xx/529/timeouts retryable, Retry-After honoured).

No sampling parameters are sent: the Messages API version the SDK (2.x) speaks rejects
``temperature``/``top_p``/``top_k`` with a 400, and the SDK no longer takes them. A proxy or an older
API version that wants them can get them through ``options.extra_body``. Options: ``AnthropicOptions``
(e.g. ``extra_body = { thinking = ... }``).
"""

from __future__ import annotations

import time
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..answer_format import AnswerFormat
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion, Usage
from .base import Provider, ProviderError, TokenCallback
from .common import TRANSPORT_ERRORS, api_key, split_system, status_error, transport_error

# An error event inside a 200 stream carries only its type; its HTTP equivalent decides retrying.
STREAM_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "timeout_error": 504, "overloaded_error": 529,
}

try:
    import anthropic
except ImportError:  # pragma: no cover - depends on the install
    anthropic = None  # type: ignore[assignment]


def _usage(usage: Any) -> Usage:
    # Cached prompt tokens are reported apart from input_tokens; all of them were read by the model.
    prompt = sum(getattr(usage, f, 0) or 0 for f in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    return Usage(input_tokens=prompt, output_tokens=getattr(usage, "output_tokens", 0) or 0)


class AnthropicOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stop_sequences: Optional[list[str]] = None
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into the request body as is


class AnthropicProvider(Provider):
    native = frozenset({"stop"})  # tools and JSON formats are prompted (answer_format.prepare)
    Options = AnthropicOptions
    key_envs = ("ANTHROPIC_API_KEY",)
    requires = ("anthropic",)
    extra = "anthropic"

    def __init__(self, spec: WorkerSpec):
        if anthropic is None:
            raise PoolConfigError(f"worker {spec.name!r}: provider 'anthropic' needs the SDK: pip install 'openconductor[anthropic]'")
        super().__init__(spec)
        self._client: Optional["anthropic.AsyncAnthropic"] = None

    def client(self) -> "anthropic.AsyncAnthropic":
        if self._client is None:
            kwargs: dict[str, Any] = dict(api_key=api_key(self.spec, self.key_variables(self.spec)), max_retries=0, timeout=self.spec.timeout_s)
            if self.spec.base_url:
                kwargs["base_url"] = self.spec.base_url
            self._client = anthropic.AsyncAnthropic(**kwargs)
        return self._client

    def params(self, messages: list[dict[str, str]], max_tokens: int, answer: Optional[AnswerFormat] = None) -> dict[str, Any]:
        system, turns = split_system(messages)
        if not turns:
            raise ProviderError(f"worker {self.spec.name!r}: the Messages API needs at least one user message")
        params: dict[str, Any] = dict(
            model=self.spec.model,
            max_tokens=max_tokens,
            messages=[{"role": m["role"], "content": m["content"]} for m in turns],
        )
        if system:
            params["system"] = system
        o = self.options
        if o.stop_sequences is not None:
            params["stop_sequences"] = list(o.stop_sequences)
        if answer is not None and answer.stop:
            params["stop_sequences"] = answer.stop
        if o.extra_body:
            params["extra_body"] = dict(o.extra_body)
        return params

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        # The Messages API takes no grammar, seed or temperature (see the module docstring).
        start = time.perf_counter()
        try:
            params = self.params(messages, max_tokens, answer)
            client = self.client()
            if on_token is None:
                message = await client.messages.create(**params)
            else:
                async with client.messages.stream(**params) as stream:
                    async for piece in stream.text_stream:
                        on_token(piece)
                    message = await stream.get_final_message()
            blocks = getattr(message, "content", None)
            if not blocks:
                raise ProviderError("the endpoint returned no content blocks", retryable=True)
            text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
            return Completion(
                text=text,
                usage=_usage(message.usage),
                latency_s=time.perf_counter() - start,
                finish_reason=message.stop_reason,
                model=message.model,
            )
        except ProviderError:
            raise
        except anthropic.APIStatusError as exc:
            status = exc.status_code
            if status < 400:  # an error event in a stream that started with 200
                kind = (exc.body or {}).get("error", {}).get("type") if isinstance(exc.body, dict) else None
                status = STREAM_ERROR_STATUS.get(kind or "", 500)
            raise status_error(status, exc.message, exc.response.headers, key_envs=self.key_variables(self.spec)) from exc
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}", retryable=True) from exc
        except (ValueError, KeyError, anthropic.APIResponseValidationError) as exc:
            # A 200 whose body is not a message (malformed JSON, wrong shape).
            raise ProviderError(f"malformed response: {exc}", retryable=True) from exc
        except anthropic.APIError as exc:
            raise ProviderError(f"error in the stream: {exc.message}", retryable=True) from exc
        except TRANSPORT_ERRORS as exc:  # the connection dropped while the stream was being read
            raise transport_error(exc) from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
