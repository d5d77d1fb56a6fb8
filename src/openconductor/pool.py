"""The live pool: the workers a pool file declares (``spec.PoolSpec``), built into providers and called with
retries, concurrency limits and a response cache; ``check_pool`` says what this machine lacks to run one.

The pool file's schema and its loading are ``spec.py``; its names are importable from here too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Optional

from .answer_format import AnswerFormat, AnswerFormatError, AnswerUncheckable, off_the_loop, prepare
from .providers.base import Provider, ProviderError, TokenCallback, absent_modules, make_provider, provider_class
from .records import Completion
from .spec import (  # noqa: F401  (the pool file's names, importable from the pool as before)
    BUILTIN_CONDUCTOR,
    FALLBACK_HELP,
    RANKED_VIEWS,
    SPEED_OPTIONS,
    TOOL_PROVIDERS,
    WORKER_VIEWS,
    ConductorSpec,
    FixedStep,
    FixedWorkflowSpec,
    PoolConfigError,
    PoolSpec,
    PoolView,
    WorkerSpec,
    default_pool_path,
    load_default_pool,
    load_pool,
    outcome_options,
    outcome_settings,
)

if TYPE_CHECKING:
    from .cache import ResponseCache

log = logging.getLogger(__name__)


@dataclass
class Missing:
    """Something a pool needs that this machine lacks: an API key, a provider's SDK or a model's weights package."""

    kind: Literal["key", "sdk"]
    what: str  # "OPENAI_API_KEY" (or "A or B"), or the module to install
    fix: str
    workers: list[str]


def missing_requirements(spec: PoolSpec) -> list[Missing]:
    """Every API key variable that is unset and every provider SDK or model package that is not installed, with the
    workers that need them (the conductor backend included): a pool is used whole, so all count."""
    found: dict[tuple[str, str], Missing] = {}
    for worker in spec.all_workers():
        cls = provider_class(worker.provider)
        absent = absent_modules(cls)
        if absent:
            fix = f"pip install 'openconductor[{cls.extra}]'" if cls.extra else f"pip install {absent[0]}"
            found.setdefault(("sdk", absent[0]), Missing("sdk", absent[0], fix, [])).workers.append(worker.name)
        for what, fix in cls.absent_packages(worker):
            found.setdefault(("sdk", what), Missing("sdk", what, fix, [])).workers.append(worker.name)
        envs = cls.key_variables(worker)
        if envs and not any(os.environ.get(env) for env in envs):
            names = " or ".join(envs)
            found.setdefault(("key", names), Missing("key", names, f"set {names}", [])).workers.append(worker.name)
    return list(found.values())


def check_pool(spec: PoolSpec) -> None:
    """Raise one PoolConfigError naming every missing key variable and SDK, and the workers that need them."""
    missing = missing_requirements(spec)
    if not missing:
        return

    def who(m: Missing) -> str:
        return f"{'worker' if len(m.workers) == 1 else 'workers'} {', '.join(repr(w) for w in m.workers)}"

    keys = [f"{m.what} ({who(m)})" for m in missing if m.kind == "key"]
    sdks = [f"{m.what} for {who(m)}: {m.fix}" for m in missing if m.kind == "sdk"]
    parts = []
    if keys:
        parts.append(f"API key variable(s) not set: {', '.join(keys)}; export them, or remove those workers from the pool")
    if sdks:
        parts.append(f"not installed: {'; '.join(sdks)}")
    raise PoolConfigError(f"pool {spec.name!r} cannot run here: " + ". ".join(parts))


# ------------------------------------------------------------------------------------ runtime workers


class WorkerCallError(RuntimeError):
    """All attempts of a worker call failed; carries the attempts made."""

    def __init__(self, worker: str, message: str, attempts: int, code: Optional[str] = None):
        super().__init__(f"worker {worker!r} failed after {attempts} attempt(s): {message}")
        self.worker = worker
        self.attempts = attempts
        self.code = code


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
                    completion = await off_the_loop(prepared.finish, completion)
                completion.usage.cost_usd = self.spec.cost(completion.usage)
                return completion, attempts
            except asyncio.TimeoutError:
                retry = self.provider.retry_timeouts
                error = ProviderError(f"timed out after {self.spec.timeout_s:g}s" + ("" if retry else
                                      " (an in-process model is not retried: the timed-out generation still runs; raise timeout_s)"), retryable=retry)
            except ProviderError as exc:
                error = exc
            except AnswerFormatError as exc:  # e.g. invalid JSON for a JSON response_format: sample again
                error = ProviderError(str(exc), retryable=not isinstance(exc, AnswerUncheckable), code="invalid_answer_format")
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
    """A pool spec with live providers. Async context manager; closes providers on exit.

    Construction checks what every worker needs (``check_pool``) and builds every provider, the
    conductor backend included, so a missing key or SDK is reported before any call. A pool whose
    ``[conductor] checkpoint`` names a trained conductor plans with it (as ``conductor ask`` does);
    to plan with the declared backend instead, clear the checkpoint first.
    """

    def __init__(self, spec: PoolSpec, cache: Optional["ResponseCache"] = None, *, _view_of: Optional[tuple["Pool", list[int]]] = None):
        workers: list[Worker]
        backend: Optional[Worker]
        if _view_of is None:
            if spec.conductor.checkpoint is not None:
                from .conductor.checkpoint import applied, trained_conductor

                if not applied(spec):
                    spec, _ = trained_conductor(spec, spec.conductor.checkpoint)
            check_pool(spec)
            workers = [self._worker(w, cache) for w in spec.workers]
            backend = self._worker(spec.conductor.backend, cache) if spec.conductor.backend is not None else None
            unavailable = {w.name: why for w in workers if (why := w.provider.unavailable()) is not None}
        else:  # a view (see ``view``): the parent's live workers, renumbered
            parent, indices = _view_of
            workers, backend = [parent.workers[i] for i in indices], parent._conductor_worker()
            unavailable = {w.name: parent.unavailable[w.name] for w in workers if w.name in parent.unavailable}
        self.spec, self.cache = spec, cache
        self.workers: list[Worker] = workers
        self._backend = backend
        self._owner = _view_of is None  # a view leaves closing the shared workers to its parent
        # Workers that cannot run here (worker name -> why and the fix): the executor does not call them.
        self.unavailable: dict[str, str] = unavailable
        self.warnings = [self._unavailable_warning(name, why) for name, why in unavailable.items()]
        for warning in self.warnings if self._owner else ():
            log.warning("%s", warning)

    def _unavailable_warning(self, name: str, why: str) -> str:
        answerer = self.answering_worker()
        instead = f"its steps fail and worker {self.workers[answerer].name!r} answers instead" if answerer is not None else "its steps fail"
        return f"warning: pool {self.spec.name!r}: worker {name!r} cannot run on this machine, so {instead}. {why}"

    def answering_worker(self) -> Optional[int]:
        """The model worker that gives the answer when a plan ends in a tool step that has none: the strongest
        model (``PoolSpec.strongest_index``), else the first model that can run here; None if there is none."""
        def answers(i: int) -> bool:
            w = self.spec.workers[i]
            return w.provider not in TOOL_PROVIDERS and w.provider != "conductor" and w.name not in self.unavailable

        best = self.spec.strongest_index()
        return best if answers(best) else next((i for i in range(len(self.workers)) if answers(i)), None)

    @staticmethod
    def _worker(spec: WorkerSpec, cache: Optional["ResponseCache"]) -> Worker:
        return Worker(spec, make_provider(spec), asyncio.Semaphore(spec.concurrency), cache)

    def view(self, indices: list[int]) -> "Pool":
        """A renumbered sub-pool (``PoolSpec.subset``) that shares this pool's live workers, so their
        concurrency limits, clients and cache hold across every view; closing a view closes nothing."""
        return Pool(self.spec.subset(indices), self.cache, _view_of=(self, list(indices)))

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.workers]

    def _conductor_worker(self) -> Optional[Worker]:
        c = self.spec.conductor
        if c.worker is not None:
            return self.workers[self.spec.index(c.worker)]
        return self._backend

    def conductor_backend(self) -> Worker:
        """The worker that runs the LM conductor's prompt."""
        backend = self._conductor_worker()
        if backend is None:
            raise PoolConfigError(
                f"pool {self.spec.name!r} declares no conductor backend; add [conductor] worker = \"NAME\" "
                "or pick a baseline policy (--policy single|moa|self-reflection)"
            )
        return backend

    async def aclose(self) -> None:
        if not self._owner:
            return
        for w in self.workers:
            await w.provider.aclose()
        if self._backend is not None:
            await self._backend.provider.aclose()

    async def __aenter__(self) -> "Pool":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
