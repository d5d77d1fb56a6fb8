"""What a pool file says: its workers, its conductor settings, its limits and its fixed workflows (no I/O beyond
reading and parsing the file; the live pool that calls the workers is ``pool.py``).

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

from importlib import resources
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .budget import Limits
from .configfile import did_you_mean, problems, read_config
from .providers.base import TOOLS, provider_class, provider_options
from .records import Usage
from .workflow import Step, Workflow

# How a conductor's prompt shows the pool: ordinal ids only; names; names and descriptions; "profile": the
# descriptions and, per area, the workers ranked by measured accuracy; "ranking": names and that ranking only (for a
# conductor that picks by the ranking: 303 prompt tokens against "profile"'s 689 on 20 generated simulated pools).
PoolView = Literal["ids", "names", "descriptions", "profile", "ranking"]
RANKED_VIEWS = ("profile", "ranking")  # the views that show the measured ranking (and need it measured)
# The views that say what each worker is (a description or its place in the ranking), not only what it is called:
# the ones a conductor can read on pools whose workers it never saw.
WORKER_VIEWS = ("descriptions", *RANKED_VIEWS)


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
    # A question unlike every question the trained conductor learned from (conductor/familiar.py): "plan" it as any
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
# say whether saved results (a fit's stages, an evaluation folder) still hold for a pool. (Not local_gguf's draft: it can
# tip a near-tie, local_gguf.LocalGGUFOptions.)
SPEED_OPTIONS = frozenset({"threads", "threads_batch"})


def outcome_options(options: dict[str, Any]) -> dict[str, Any]:
    """A worker's options less ``SPEED_OPTIONS``: what digests and response-cache keys see."""
    return {k: v for k, v in options.items() if k not in SPEED_OPTIONS}


def outcome_settings(worker: dict[str, Any]) -> dict[str, Any]:
    """A worker's settings as JSON (``WorkerSpec.model_dump(mode="json")``), less ``SPEED_OPTIONS``."""
    return {**worker, "options": outcome_options(worker.get("options", {}))}


# A fixed workflow (``[workflows.NAME]``; ``--policy fixed:NAME`` runs it, see policies/fixed.py): workers named, not numbered.
class FixedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    worker: str  # a worker's name in the pool
    subtask: str = Field(min_length=1)
    access: Union[Literal["all"], list[int]] = Field(default_factory=list)


class FixedWorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    steps: list[FixedStep] = Field(min_length=1)

    @model_validator(mode="after")
    def _earlier_only(self) -> "FixedWorkflowSpec":
        for i, step in enumerate(self.steps):
            if step.access != "all" and any(not 0 <= j < i for j in step.access):
                raise ValueError(f"step {i}: access {step.access} may only name earlier steps (0..{i - 1})")
        return self

    def check_workers(self, names: list[str], where: str) -> None:
        unknown = sorted({s.worker for s in self.steps} - set(names))
        if unknown:
            hints = "".join(did_you_mean(u, names) for u in unknown)
            raise ValueError(f"{where}: unknown worker(s) {', '.join(unknown)}{hints}; the pool has {', '.join(names)}")

    def resolve(self, spec: "PoolSpec") -> Workflow:
        steps = tuple(
            Step(spec.index(s.worker), s.subtask, ("all" if i else ()) if s.access == "all" else tuple(s.access))
            for i, s in enumerate(self.steps)
        )
        return Workflow(steps, reasoning=self.description or "fixed workflow")


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


def worker_index(spec: "PoolSpec", worker: Optional[str | int]) -> int:
    """A worker named by name or id in ``spec`` (the strongest when None); ValueError names the pool's workers."""
    if worker is None:
        return spec.strongest_index()
    if isinstance(worker, bool):
        raise ValueError(f"a worker is a name or an id, not {worker!r}")
    if isinstance(worker, int) or (str(worker).isascii() and str(worker).isdigit()):
        index = int(worker)
        if not 0 <= index < len(spec.workers):
            raise ValueError(f"worker id {index} is not in the pool (0..{len(spec.workers) - 1})")
        return index
    try:
        return spec.index(str(worker))
    except KeyError:
        raise ValueError(f"unknown worker {worker!r}; the pool has {', '.join(w.name for w in spec.workers)}") from None
