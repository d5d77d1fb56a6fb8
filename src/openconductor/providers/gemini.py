"""Google Gemini through the ``google-genai`` SDK (``Client(...).aio.models.generate_content[_stream]``).

System messages become ``system_instruction``; assistant turns become ``model`` turns. The SDK's
retries are off (its default when no ``HttpRetryOptions`` is given): ``Worker.call`` retries, and
errors map to ProviderError as for every provider. A 429's wait comes from the Retry-After header or,
as Google sends it, from the ``google.rpc.RetryInfo`` detail (``"retryDelay": "7s"``).
``base_url`` goes to ``HttpOptions(base_url=...)``. Options: ``GeminiOptions``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from ..answer_format import AnswerFormat
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion, Usage
from .base import Provider, ProviderError, TokenCallback
from .common import TRANSPORT_ERRORS, api_key, split_system, status_error, transport_error

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError:  # pragma: no cover - depends on the install
    genai = None  # type: ignore[assignment]


def retry_delay(details: Any) -> Optional[float]:
    """Seconds from a ``google.rpc.RetryInfo`` entry of an error body (``"retryDelay": "1.5s"``)."""
    error = details.get("error", details) if isinstance(details, dict) else {}
    entries = error.get("details") if isinstance(error, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and str(entry.get("@type", "")).endswith("google.rpc.RetryInfo"):
            value = str(entry.get("retryDelay", "")).strip()
            try:
                return max(0.0, float(value.removesuffix("s")))
            except ValueError:
                return None
    return None


def to_contents(turns: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": str(m["content"])}]} for m in turns]


def _text(response: Any) -> Optional[str]:
    """The first candidate's text parts (thought parts excluded); None when there is no candidate."""
    candidates = getattr(response, "candidates", None)
    if not candidates:
        return None
    content = candidates[0].content
    parts = (content.parts if content is not None else None) or []
    return "".join(p.text for p in parts if p.text and not p.thought)


def _usage(meta: Any) -> Usage:
    if meta is None:
        return Usage()
    # Thinking tokens are billed as output.
    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
    return Usage(input_tokens=meta.prompt_token_count or 0, output_tokens=output)


class GeminiOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_version: Optional[str] = None  # default: the SDK's
    top_k: Optional[float] = None
    stop_sequences: Optional[list[str]] = None
    thinking_budget: Optional[int] = None


class GeminiProvider(Provider):
    Options = GeminiOptions
    key_envs = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    requires = ("google.genai",)
    extra = "gemini"

    def __init__(self, spec: WorkerSpec):
        if genai is None:
            raise PoolConfigError(f"worker {spec.name!r}: provider 'gemini' needs the SDK: pip install 'openconductor[gemini]'")
        super().__init__(spec)
        self._client: Optional["genai.Client"] = None

    def client(self) -> "genai.Client":
        if self._client is None:
            key = api_key(self.spec, self.key_variables(self.spec))
            options: dict[str, Any] = {"timeout": int(self.spec.timeout_s * 1000)}  # milliseconds
            if self.spec.base_url:
                options["base_url"] = self.spec.base_url
            if self.options.api_version is not None:
                options["api_version"] = self.options.api_version
            self._client = genai.Client(api_key=key, http_options=genai_types.HttpOptions(**options))
        return self._client

    native = frozenset({"stop"})  # tools and JSON formats are prompted (answer_format.prepare)

    def config(self, system: str, max_tokens: int, temperature: float, seed: Optional[int],
               answer: Optional[AnswerFormat] = None) -> "genai_types.GenerateContentConfig":
        o = self.options
        config: dict[str, Any] = {"temperature": temperature, "max_output_tokens": max_tokens}
        if system:
            config["system_instruction"] = system
        if self.spec.top_p is not None:
            config["top_p"] = self.spec.top_p
        if seed is not None:
            config["seed"] = seed
        if o.top_k is not None:
            config["top_k"] = o.top_k
        if o.stop_sequences is not None:
            config["stop_sequences"] = list(o.stop_sequences)
        if o.thinking_budget is not None:
            config["thinking_config"] = genai_types.ThinkingConfig(thinking_budget=o.thinking_budget)
        if answer is not None:
            config.update(answer.penalties())
            if answer.top_p is not None:
                config["top_p"] = answer.top_p
            if answer.stop:
                config["stop_sequences"] = answer.stop
        return genai_types.GenerateContentConfig(**config)

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        start = time.perf_counter()
        try:
            system, turns = split_system(messages)
            if not turns:
                raise ProviderError(f"worker {self.spec.name!r}: Gemini needs at least one user message")
            request = dict(model=self.spec.model, contents=to_contents(turns), config=self.config(system, max_tokens, temperature, seed, answer))
            models = self.client().aio.models
            if on_token is None:
                last = await models.generate_content(**request)
                text = _text(last)
            else:
                pieces: list[str] = []
                last, answered = None, False
                # aclosing: a stream cut mid-way still releases its connection now, not at loop shutdown.
                async with contextlib.aclosing(await models.generate_content_stream(**request)) as stream:
                    async for chunk in stream:
                        last = chunk
                        piece = _text(chunk)
                        answered = answered or piece is not None
                        if piece:
                            pieces.append(piece)
                            on_token(piece)
                text = "".join(pieces) if answered else None
            if text is None:
                feedback = getattr(last, "prompt_feedback", None)
                if feedback is not None and feedback.block_reason:
                    # A blocked prompt is blocked again on retry: fail at once and say why.
                    reason = getattr(feedback.block_reason, "value", feedback.block_reason)
                    raise ProviderError(f"Gemini blocked the prompt: {reason} {feedback.block_reason_message or ''}".strip())
                raise ProviderError("the endpoint returned no candidates", retryable=True)
            candidate = last.candidates[0] if last is not None and last.candidates else None
            finish = candidate.finish_reason if candidate is not None else None
            return Completion(
                text=text,
                usage=_usage(last.usage_metadata),
                latency_s=time.perf_counter() - start,
                finish_reason=str(getattr(finish, "value", finish)) if finish is not None else None,
                model=last.model_version or self.spec.model,
            )
        except ProviderError:
            raise
        except genai_errors.APIError as exc:
            headers = getattr(exc.response, "headers", None)
            raise status_error(exc.code, str(exc.message or exc.details), headers, retry_delay(exc.details), self.key_variables(self.spec)) from exc
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        except (ValueError, KeyError) as exc:
            # A 200 whose body is not a GenerateContentResponse (malformed JSON, wrong shape).
            raise ProviderError(f"malformed response: {exc}", retryable=True) from exc

    async def aclose(self) -> None:
        close = getattr(self._client.aio, "aclose", None) if self._client is not None else None
        if close is not None:  # older google-genai releases have no async close
            await close()
