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
import os
import random
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .answer_format import AnswerFormat, AnswerFormatError, AnswerUncheckable, off_the_loop, prepare
from .budget import Limits
from .configfile import did_you_mean, problems, read_config
from .policies.fixed import FixedWorkflowSpec
from .providers.base import TOOLS, Provider, ProviderError, TokenCallback, absent_modules, make_provider, provider_class, provider_options
from .records import Completion, Usage

# How a conductor's prompt shows the pool: ordinal ids only; names; names and descriptions; "profile": the
# descriptions and, per area, the workers ranked by measured accuracy; "ranking": names and that ranking only (for a
# conductor that picks by the ranking: 303 prompt tokens against "profile"'s 689 on 20 generated simulated pools).
PoolView = Literal["ids", "names", "descriptions", "profile", "ranking"]
RANKED_VIEWS = ("profile", "ranking")  # the views that show the measured ranking (and need it measured)
# The views that say what each worker is (a description or its place in the ranking), not only what it is called:
# the ones a conductor can read on pools whose workers it never saw.
WORKER_VIEWS = ("descriptions", *RANKED_VIEWS)

if TYPE_CHECKING:
    from .cache import ResponseCache

log = logging.getLogger(__name__)

# Pool members that run a tool instead of a language model (no tokens; never a "strongest" default): the
# kinds registered with register_provider(..., tool=True).
TOOL_PROVIDERS = TOOLS


class PoolConfigError(ValueError):
    """A pool file that cannot be used; the message names the file and the field."""


FALLBACK_HELP = '"strongest", "none" or "worker:<name>"'


class WorkerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    provider: str  # a registered provider: openai | anthropic | gemini | local_gguf | transformers | simulated | conductor | ...
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
    # Measured accuracy alone per area (0-1), e.g. { math = 0.84, coding = 0.48 }: a conductor shown the pool with
    # show = "profile" or "ranking" also reads, per area, the workers ranked by it. Simulated workers left without one are
    # measured in the simulated world when shown (sim/pools.py ``measured_profile``).
    profile: dict[str, float] = Field(default_factory=dict)
    # Provider-specific settings, checked against the provider's own ``Options`` model (see ``provider_options``).
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _one_line_name(cls, name: str) -> str:
        # A name is written into the conductor's one-line reasoning and matched there as a word: a line break,
        # a control character or edge spaces in it would split that line or never match.
        if not name or name != name.strip() or not name.isprintable():
            raise ValueError(f"a worker's name is one line of printable text without leading or trailing spaces; got {name!r}")
        return name

    @field_validator("profile")
    @classmethod
    def _accuracies(cls, profile: dict[str, float]) -> dict[str, float]:
        bad = {area: value for area, value in profile.items() if not 0.0 <= value <= 1.0}  # NaN fails too
        if bad:
            raise ValueError(f"profile holds accuracies from 0 to 1 (0.84 for 84 %); got {bad}")
        return profile

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, name: str) -> str:
        provider_class(name)  # raises naming the registered ones
        return name

    @field_validator("options")
    @classmethod
    def _provider_options(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "provider" in info.data:  # else the provider itself was the error
            provider_options(info.data["provider"], options)  # raises naming the bad option
        return options

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.price_input_per_m + usage.output_tokens * self.price_output_per_m) / 1e6


BUILTIN_CONDUCTOR = "builtin:"  # a checkpoint shipped in the package: data/conductors/<name>


class ConductorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    worker: Optional[str] = None  # name of a pool worker that runs the conductor prompt
    backend: Optional[WorkerSpec] = None  # or a backend that is not itself a worker
    max_steps: int = Field(5, ge=1)
    max_attempts: int = Field(3, ge=1)  # parse failures are resampled this many times in all
    # What runs when every attempt failed: "strongest" (the pool's strongest worker alone), "none" (the
    # run ends plan_failed) or "worker:<name>" (that worker alone; the name is checked against the pool).
    fallback: str = "strongest"
    # What a prompted (untrained) conductor is told of each worker: its name and description by default, so
    # it can tell gpt-4o from gpt-4o-mini; "ids" is the paper's ordinal-only view, for a conductor that learns
    # strengths from reward. A trained checkpoint is always shown the pool as it was trained (its manifest).
    show: PoolView = "descriptions"
    fine_grained_access: bool = True  # allow index lists besides "all"/[]
    temperature: float = 0.7
    max_tokens: int = 768
    # A trained conductor that plans for this pool (a `conductor train` output dir, relative to the pool
    # file, or builtin:NAME for one shipped in the package): it replaces the backend, prompted as it was
    # trained. `--conductor DIR` overrides it; `--conductor none` plans with the prompted backend instead.
    checkpoint: Optional[str] = None
    # "trained": a checkpoint whose manifest records the subtasks it was taught writes only those, whole (it then
    # chooses an instruction and cannot splice two into one); "free": any text the format admits.
    subtasks: Literal["trained", "free"] = "trained"
    # A question unlike every question the trained conductor learned from (policies/familiar.py): "plan" it as any
    # other, or run the fit's best fixed workflow instead ("best-fixed"; the checkpoint's familiar.json, which
    # `conductor fit` writes, holds the questions, the threshold and that workflow).
    unfamiliar: Literal["plan", "best-fixed"] = "plan"

    @field_validator("fallback")
    @classmethod
    def _fallback_form(cls, value: str) -> str:
        if value in ("strongest", "none") or (value.startswith("worker:") and value[len("worker:"):].strip()):
            return value
        raise ValueError(f"fallback must be {FALLBACK_HELP}, got {value!r}")

    @property
    def gates_unfamiliar(self) -> bool:
        """Whether a question unlike the trained conductor's training questions runs its fallback (a prompted conductor has none)."""
        return self.unfamiliar == "best-fixed" and bool(self.checkpoint)

    @property
    def fallback_worker(self) -> Optional[str]:
        return self.fallback[len("worker:"):].strip() if self.fallback.startswith("worker:") else None


# Worker options that set how fast a worker runs, never what it answers: left out of the digests that
# say whether saved results (a fit's stages, an evaluation folder) still hold for a pool.
SPEED_OPTIONS = frozenset({"threads", "threads_batch"})


def outcome_options(options: dict[str, Any]) -> dict[str, Any]:
    """A worker's options less ``SPEED_OPTIONS``: what digests and response-cache keys see."""
    return {k: v for k, v in options.items() if k not in SPEED_OPTIONS}


def outcome_settings(worker: dict[str, Any]) -> dict[str, Any]:
    """A worker's settings as JSON (``WorkerSpec.model_dump(mode="json")``), less ``SPEED_OPTIONS``."""
    return {**worker, "options": outcome_options(worker.get("options", {}))}


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
        for field, ref in (("conductor.worker", self.conductor.worker), ("strongest", self.strongest),
                           ("conductor.fallback", self.conductor.fallback_worker)):
            if ref is not None and ref not in names:
                raise ValueError(f"{field}: unknown worker {ref!r}{did_you_mean(ref, names)}; the pool has {', '.join(names)}")
        fallback = self.conductor.fallback_worker
        if fallback is not None and self.workers[self.index(fallback)].provider == "conductor":
            raise ValueError(f"conductor.fallback: {fallback!r} is the conductor itself; fall back to a worker that answers")
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
        if conductor.fallback_worker is not None and conductor.fallback_worker not in names:
            conductor = conductor.model_copy(update={"fallback": "strongest"})
        return self.model_copy(update={"workers": workers, "strongest": strongest, "conductor": conductor})

    def for_execution(self) -> "PoolSpec":
        """The pool that runs plans written elsewhere (training rewards): a conductor backend declared apart
        from the workers, and a trained checkpoint, never plan there, so they are dropped, and a machine
        without the backend's SDK (a GPU box without llama.cpp) can still train on the pool."""
        conductor = self.conductor.model_copy(update={"backend": None, "checkpoint": None})
        return self.model_copy(update={"conductor": conductor})

    def with_local_threads(self, threads: int) -> "PoolSpec":
        """Every in-process llama.cpp worker, the conductor backend included, decoding with ``threads`` threads
        (and processing prompts with as many, unless its ``threads_batch`` says otherwise)."""

        def local(w: Optional[WorkerSpec]) -> Optional[WorkerSpec]:
            if w is None or w.provider != "local_gguf":
                return w
            return w.model_copy(update={"options": {"threads_batch": threads, **w.options, "threads": threads}})

        conductor = self.conductor.model_copy(update={"backend": local(self.conductor.backend)})
        return self.model_copy(update={"workers": [local(w) for w in self.workers], "conductor": conductor})

    def outcome_view(self, include: Optional[set[str]] = None) -> dict[str, Any]:
        """``include``'s fields (default: all) as JSON, without the options that change only speed (``SPEED_OPTIONS``)."""
        view = self.model_dump(mode="json", include=include)
        if "workers" in view:
            view["workers"] = [outcome_settings(w) for w in view["workers"]]
        if (view.get("conductor") or {}).get("backend"):
            view["conductor"]["backend"] = outcome_settings(view["conductor"]["backend"])
        return view

    def all_workers(self) -> list[WorkerSpec]:
        """Every worker the pool runs: its members and, if declared apart, the conductor backend."""
        return self.workers + ([self.conductor.backend] if self.conductor.backend is not None else [])


def load_pool(path: str | Path) -> PoolSpec:
    path = Path(path)
    data = read_config(path, PoolConfigError, what="pool file")

    def where(loc: tuple) -> str:
        # workers.2.options -> worker 'gpt' (workers.2.options): the name is what a user searches for
        dotted = ".".join(str(p) for p in loc)
        workers = data.get("workers")
        if len(loc) >= 2 and loc[0] == "workers" and isinstance(loc[1], int) and isinstance(workers, list) and loc[1] < len(workers):
            name = workers[loc[1]].get("name") if isinstance(workers[loc[1]], dict) else None
            if name:
                return f"worker {name!r} ({dotted})"
        if loc[:2] == ("conductor", "backend"):
            return f"conductor backend ({dotted})"
        return dotted

    try:
        spec = PoolSpec.model_validate(data)
    except ValidationError as exc:
        raise PoolConfigError(f"{path}: {problems(exc, where, PoolSpec)}") from exc
    checkpoint = spec.conductor.checkpoint
    if checkpoint and not checkpoint.startswith(BUILTIN_CONDUCTOR) and not Path(checkpoint).expanduser().is_absolute():
        # Relative to the pool file, like every path a config names, so the pool works from any directory.
        spec.conductor.checkpoint = str((path.parent / Path(checkpoint).expanduser()).resolve())
    return spec


def default_pool_path() -> Path:
    return Path(str(resources.files("openconductor").joinpath("data/local_pool.toml")))


def load_default_pool() -> PoolSpec:
    return load_pool(default_pool_path())


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
                from .providers.transformers_local import applied, trained_conductor

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
