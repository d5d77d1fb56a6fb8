"""What every remote provider shares: API keys from the environment and HTTP-error mapping.

Retries are ours (``Worker.call``), so each SDK's own retries are off and its errors become a
``ProviderError`` with ``retryable``, ``status`` and ``retry_after`` set the same way for every backend.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from email.utils import parsedate_to_datetime
from typing import Iterable, Mapping, Optional


from ..pool import WorkerSpec
from .base import ProviderError

# Rate limits, overload and transient server errors; 529 is Anthropic's "overloaded".
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Timeouts, dropped connections and cut streams of whichever HTTP stack an SDK uses.

    The SDKs wrap these when sending a request, but not always while reading a streamed body.
    """
    found: list[type[BaseException]] = []
    for module, name in (("httpx", "TransportError"), ("httpx2", "TransportError"), ("aiohttp", "ClientError")):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


TRANSPORT_ERRORS = _transport_errors()


def transport_error(exc: BaseException) -> ProviderError:
    return ProviderError(f"request failed: {type(exc).__name__} {exc}".strip(), retryable=True)


def retry_after_seconds(headers: Optional[Mapping[str, str]]) -> Optional[float]:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def api_key(spec: WorkerSpec, envs: Iterable[str]) -> Optional[str]:
    """The worker's API key from the first of ``envs`` that is set (``Provider.key_variables``).

    Returns None when no variable applies (e.g. a keyless local server). Pools are checked for unset
    keys when they load; a key unset since then is a non-retryable ProviderError naming the variable.
    """
    envs = list(envs)
    if not envs:
        return None
    for env in envs:
        key = os.environ.get(env)
        if key:
            return key
    names = " or ".join(envs)
    raise ProviderError(f"worker {spec.name!r}: the environment variable {names} (its API key) is not set")


# How OpenAI, vLLM, llama.cpp's server, Anthropic and Gemini word a prompt over the model's context.
CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context window|exceeds? the (?:available )?context|prompt is too long"
    r"|input token count .* exceeds|exceed_context_size|too many tokens|reduce the length of the (?:messages|prompt)",
    re.IGNORECASE,
)


def should_retry(headers: Optional[Mapping[str, str]]) -> Optional[bool]:
    """The server's own verdict from ``x-should-retry`` (OpenAI's header, which openconductor's server sends
    with ``false`` after a whole workflow failed): True or False, else None (the status decides)."""
    value = (headers.get("x-should-retry") or "").strip().lower() if headers is not None else ""
    return {"true": True, "false": False}.get(value)


def status_error(status: int, message: str, headers: Optional[Mapping[str, str]] = None, retry_after: Optional[float] = None,
                 key_envs: Iterable[str] = ()) -> ProviderError:
    """An HTTP error status as a ProviderError: 429/5xx/408 retryable, Retry-After honoured; a prompt over
    the model's context is coded ``context_length_exceeded`` (the caller must shorten it: no retry helps).
    ``key_envs``: where the worker's key came from, named in a 401/403. ``x-should-retry`` overrides the status either way: the server knows whether a retry can help (a 502
    from an upstream conductor has already retried every worker call; a retry would run its workflow again)."""
    if retry_after is None:
        retry_after = retry_after_seconds(headers)
    overflow = status in (400, 413, 422) and CONTEXT_OVERFLOW.search(message or "") is not None
    verdict = should_retry(headers)
    envs = " or ".join(key_envs)
    # A refused key: say where it came from, so a wrong value is found without reading the provider's code.
    hint = f" (the API key comes from {envs}: check its value)" if status in (401, 403) and envs else ""
    return ProviderError(
        f"HTTP {status}: {message}{hint}",
        retryable=verdict if verdict is not None else status in RETRYABLE_STATUS and not overflow,
        status=status,
        retry_after=retry_after,
        code="context_length_exceeded" if overflow else None,
    )


def split_system(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """System messages joined into one instruction (Anthropic/Gemini take it apart from the turns)."""
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    turns = [m for m in messages if m.get("role") != "system"]
    return system, turns
