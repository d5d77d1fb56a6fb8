"""Worker pools: declared in a TOML/YAML file, shown to the conductor as ordinal ids.

A pool file looks like::

    name = "my-pool"
    [[workers]]
    name = "gpt"
    provider = "openai"            # openai | anthropic | gemini | local_gguf | transformers | simulated | conductor | python | retrieval
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    max_tokens = 1024
    price_input_per_m = 0.15
    price_output_per_m = 0.60

    [conductor]                   # which backend writes the workflows (optional)
    worker = "gpt"                # a worker above, or an inline [conductor.backend] table
    max_steps = 5

    [limits]
    max_calls = 12
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .answer_format import AnswerFormat, AnswerFormatError, prepare
from .budget import Limits
from .policies.fixed import FixedWorkflowSpec
from .records import Completion, Usage

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore

if TYPE_CHECKING:
    from .cache import ResponseCache

log = logging.getLogger(__name__)

ProviderName = Literal[
    "openai", "anthropic", "gemini", "local_gguf", "transformers", "simulated", "conductor", "python", "retrieval"
]
# Pool members that run a tool instead of a language model (no tokens; never a "strongest" default).
TOOL_PROVIDERS = frozenset({"python", "retrieval"})


class PoolConfigError(ValueError):
    """A pool file that cannot be used; the message names the file and the field."""


class WorkerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    provider: ProviderName
    model: str = ""
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None
    temperature: float = 0.2
    top_p: Optional[float] = None
    max_tokens: int = 1024
    timeout_s: float = 120.0
    concurrency: int = 4
    max_retries: int = 3
    # A Retry-After longer than this fails the call at once instead of stalling the request.
    max_retry_after_s: float = 60.0
    price_input_per_m: float = 0.0
    price_output_per_m: float = 0.0
    description: str = ""
    # Provider-specific settings (e.g. n_ctx for local models, latency/skill for simulated ones).
    options: dict[str, Any] = Field(default_factory=dict)

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.price_input_per_m + usage.output_tokens * self.price_output_per_m) / 1e6


class ConductorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    worker: Optional[str] = None  # name of a pool worker that runs the conductor prompt
    backend: Optional[WorkerSpec] = None  # or a backend that is not itself a worker
    max_steps: int = 5
    max_attempts: int = 3  # parse failures are resampled this many times in all
    fallback: str = "strongest"  # "strongest" | "worker:<name>" | "none"
    show: Literal["ids", "names", "descriptions"] = "ids"
    fine_grained_access: bool = True  # allow index lists besides "all"/[]
    temperature: float = 0.7
    max_tokens: int = 768


class PoolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "pool"
    workers: list[WorkerSpec]
    conductor: ConductorSpec = Field(default_factory=ConductorSpec)
    limits: Limits = Field(default_factory=Limits)
    # Which worker the "strongest" fallback and single-worker baselines use by default.
    strongest: Optional[str] = None
    # Named fixed workflows (``--policy fixed:NAME``), see policies/fixed.py.
    workflows: dict[str, FixedWorkflowSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "PoolSpec":
        if not self.workers:
            raise ValueError("a pool needs at least one worker")
        names = [w.name for w in self.workers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"worker names must be unique; repeated: {', '.join(dupes)}")
        for ref in (self.conductor.worker, self.strongest):
            if ref is not None and ref not in names:
                raise ValueError(f"unknown worker {ref!r}; the pool has {', '.join(names)}")
        for name, workflow in self.workflows.items():
            workflow.check_workers(names, f"workflows.{name}")
        return self

    def index(self, name: str) -> int:
        for i, w in enumerate(self.workers):
            if w.name == name:
                return i
        raise KeyError(name)

    def strongest_index(self) -> int:
        """The declared strongest worker, else the most expensive (price as a proxy for strength)."""
        if self.strongest:
            return self.index(self.strongest)
        candidates = [i for i, w in enumerate(self.workers) if w.provider != "conductor" and w.provider not in TOOL_PROVIDERS]
        candidates = candidates or [i for i, w in enumerate(self.workers) if w.provider != "conductor"]
        return max(candidates, key=lambda i: (self.workers[i].price_output_per_m, -i))

    def subset(self, indices: list[int]) -> "PoolSpec":
        """A renumbered sub-pool (randomized pools): ordinal ids follow ``indices``' order."""
        workers = [self.workers[i] for i in indices]
        names = {w.name for w in workers}
        strongest = self.strongest if self.strongest in names else None
        conductor = self.conductor
        if conductor.worker and conductor.worker not in names:
            backend = self.workers[self.index(conductor.worker)]
            conductor = conductor.model_copy(update={"worker": None, "backend": backend})
        return self.model_copy(update={"workers": workers, "strongest": strongest, "conductor": conductor})


def load_pool(path: str | Path) -> PoolSpec:
    path = Path(path)
    if not path.exists():
        raise PoolConfigError(f"pool file not found: {path}")
    text = path.read_text()
    try:
        data = yaml.safe_load(text) if path.suffix in {".yaml", ".yml"} else tomllib.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise PoolConfigError(f"{path}: not valid {'YAML' if path.suffix in {'.yaml', '.yml'} else 'TOML'}: {exc}") from exc
    try:
        return PoolSpec.model_validate(data or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise PoolConfigError(f"{path}: {problems}") from exc


def default_pool_path() -> Path:
    return Path(str(resources.files("openconductor").joinpath("data/local_pool.toml")))


def load_default_pool() -> PoolSpec:
    return load_pool(default_pool_path())


# ------------------------------------------------------------------------------------ runtime workers


class ProviderError(RuntimeError):
    """A worker call that failed. ``retryable`` errors are retried with backoff."""

    def __init__(self, message: str, *, retryable: bool = False, status: Optional[int] = None, retry_after: Optional[float] = None,
                 code: Optional[str] = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.code = code  # a typed cause callers act on, e.g. "context_length_exceeded"


class WorkerCallError(RuntimeError):
    """All attempts of a worker call failed; carries the attempts made."""

    def __init__(self, worker: str, message: str, attempts: int, code: Optional[str] = None):
        super().__init__(f"worker {worker!r} failed after {attempts} attempt(s): {message}")
        self.worker = worker
        self.attempts = attempts
        self.code = code


TokenCallback = Callable[[str], None]


class Provider:
    """One backend kind. Subclasses implement ``complete``; they raise ProviderError on failure.

    ``native``: what of a request's ``AnswerFormat`` the backend takes itself ("tools", "json_schema",
    "stop"); ``answer_format.prepare`` adapts the rest (prompted tools, prompted JSON, cut stops).
    """

    supports_grammar = False
    native: frozenset[str] = frozenset()

    def __init__(self, spec: WorkerSpec):
        self.spec = spec

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        grammar: Optional[str] = None,
        on_token: Optional[TokenCallback] = None,
        seed: Optional[int] = None,
        answer: Optional[AnswerFormat] = None,
    ) -> Completion:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


_PROVIDERS: dict[str, Callable[[WorkerSpec], Provider]] = {}


def register_provider(name: str):
    def deco(factory):
        _PROVIDERS[name] = factory
        return factory

    return deco


def make_provider(spec: WorkerSpec) -> Provider:
    from . import providers  # noqa: F401  (registers the built-in providers lazily)

    if spec.provider not in _PROVIDERS:
        raise PoolConfigError(f"worker {spec.name!r}: no provider named {spec.provider!r}")
    return _PROVIDERS[spec.provider](spec)


@dataclass
class Worker:
    spec: WorkerSpec
    provider: Provider
    semaphore: asyncio.Semaphore
    cache: Optional["ResponseCache"] = None

    @property
    def name(self) -> str:
        return self.spec.name

    async def call(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: Optional[int] = None,
        grammar: Optional[str] = None,
        on_token: Optional[TokenCallback] = None,
        temperature: Optional[float] = None,
        seed: Optional[int] = None,
        on_retry: Optional[Callable[[int, str], None]] = None,
        answer: Optional[AnswerFormat] = None,
    ) -> tuple[Completion, int]:
        """Call with the worker's concurrency limit and retries. Returns (completion, attempts).

        With a response cache, an earlier call with the same key (``cache.py``: the same messages and
        sampling settings, or for the replay store the same content) is returned as stored, marked
        ``cached``, with its original usage and attempts. A call with an ``answer`` format (a request's
        final step) is not cached: the cache key does not cover it.
        """
        limit = max_tokens if max_tokens is not None else self.spec.max_tokens
        temp = self.spec.temperature if temperature is None else temperature
        if answer is not None:
            return await self._call_for_answer(messages, limit, on_token, temp, seed, on_retry, answer)
        if self.cache is None:
            return await self._call(messages, limit, grammar, on_token, temp, seed, on_retry)
        key = self.cache.key(self.spec, self.provider, messages, max_tokens=limit, temperature=temp, grammar=grammar, seed=seed)
        async with self.cache.lock(key):
            hit = await self.cache.aget(key, self.name)
            if hit is not None:
                completion, attempts = hit
                if on_token is not None and completion.text:
                    on_token(completion.text)
                return completion, attempts
            completion, attempts = await self._call(messages, limit, grammar, on_token, temp, seed, on_retry)
            await self.cache.aput(key, self.name, completion, attempts)
            return completion, attempts

    async def _call_for_answer(self, messages, limit, on_token, temp, seed, on_retry, answer) -> tuple[Completion, int]:
        prepared = prepare(messages, answer, self.provider.native)
        return await self._call(prepared.messages, limit, None, on_token if prepared.streams else None,
                                temp if answer.temperature is None else answer.temperature, seed, on_retry, prepared)

    async def _call(self, messages, limit, grammar, on_token, temp, seed, on_retry, prepared=None) -> tuple[Completion, int]:
        attempts = 0
        while True:
            attempts += 1
            try:
                async with self.semaphore:
                    start = time.perf_counter()
                    async with asyncio.timeout(self.spec.timeout_s):  # unlike wait_for, no extra task per call
                        completion = await self.provider.complete(
                            messages, max_tokens=limit, temperature=temp, grammar=grammar, on_token=on_token, seed=seed,
                            answer=prepared.native if prepared is not None else None,
                        )
                    if not completion.latency_s:
                        completion.latency_s = time.perf_counter() - start
                if prepared is not None:
                    completion = prepared.finish(completion)
                completion.usage.cost_usd = self.spec.cost(completion.usage)
                return completion, attempts
            except asyncio.TimeoutError:
                error = ProviderError(f"timed out after {self.spec.timeout_s:g}s", retryable=True)
            except ProviderError as exc:
                error = exc
            except AnswerFormatError as exc:  # e.g. invalid JSON for a JSON response_format: sample again
                error = ProviderError(str(exc), retryable=True, code="invalid_answer_format")
            except Exception as exc:  # a provider bug or an unmapped SDK error: fail the step, not the run
                log.exception("worker %s: unexpected error from provider %s", self.name, self.spec.provider)
                error = ProviderError(f"unexpected {type(exc).__name__}: {exc}")
            if not error.retryable or attempts > self.spec.max_retries:
                raise WorkerCallError(self.name, str(error), attempts, error.code) from error
            if error.retry_after is not None and error.retry_after > self.spec.max_retry_after_s:
                raise WorkerCallError(
                    self.name,
                    f"{error}; the server asks to wait {error.retry_after:g}s (more than max_retry_after_s = {self.spec.max_retry_after_s:g})",
                    attempts,
                ) from error
            delay = error.retry_after if error.retry_after is not None else min(8.0, 0.25 * 2 ** (attempts - 1))
            delay *= 1.0 if error.retry_after is not None else random.uniform(0.8, 1.2)
            log.warning("worker %s: %s; retry %d in %.2fs", self.name, error, attempts, delay)
            if on_retry is not None:
                on_retry(attempts, str(error))  # streamed tokens of the failed attempt are void
            await asyncio.sleep(delay)


class Pool:
    """A pool spec with live providers. Async context manager; closes providers on exit."""

    def __init__(self, spec: PoolSpec, cache: Optional["ResponseCache"] = None):
        self.spec = spec
        self.cache = cache
        self.workers = [Worker(w, make_provider(w), asyncio.Semaphore(w.concurrency), cache) for w in spec.workers]

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.workers]

    def conductor_backend(self) -> Worker:
        """The worker that runs the LM conductor's prompt."""
        c = self.spec.conductor
        if c.worker is not None:
            return self.workers[self.spec.index(c.worker)]
        if c.backend is not None:
            if not hasattr(self, "_backend"):
                self._backend = Worker(c.backend, make_provider(c.backend), asyncio.Semaphore(c.backend.concurrency), self.cache)
            return self._backend
        raise PoolConfigError(
            f"pool {self.spec.name!r} declares no conductor backend; add [conductor] worker = \"NAME\" "
            "or pick a baseline policy (--policy single|moa|self-reflection)"
        )

    async def aclose(self) -> None:
        for w in self.workers:
            await w.provider.aclose()
        if hasattr(self, "_backend"):
            await self._backend.provider.aclose()

    async def __aenter__(self) -> "Pool":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
