"""The policy interface: ``plan(request) -> Plan``. The LM conductor and every baseline implement it.

Each policy declares its options as a pydantic model (``Policy.Options``): ``make_policy`` validates what
it is given against it (from Python, a server preset's ``policy_options`` or the command line's
``--policy name:key=value``, whose values arrive as strings), so a bad option is a ``PolicyError``
that names it, and ``Policy.check`` validates a policy against a pool before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, ClassVar, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from ..conductor.prompt import Previous
from ..records import PlanRecord
from ..spec import worker_index
from ..workflow import Workflow

if TYPE_CHECKING:
    from ..budget import Budget
    from ..pool import Pool, PoolSpec


@dataclass
class PlanRequest:
    question: str
    pool: "Pool"
    max_steps: int = 5
    previous: Optional[Previous] = None
    depth: int = 0
    seed: Optional[int] = None
    budget: Optional["Budget"] = None  # the request's budget: a policy that calls a model reserves each call on it
    # Where the caller knows them (an eval task does): the question's domain (math, code, ...) and its kind
    # (the task or generator it comes from), for policies that key on them (policies/lookup.py).
    domain: Optional[str] = None
    kind: Optional[str] = None
    # The user's current request alone, where ``question`` renders a whole conversation (the server: instructions,
    # earlier turns, tools): what a trained conductor's familiarity test compares (conductor/familiar.py).
    request_text: Optional[str] = None


@dataclass
class Plan:
    """A workflow (None if planning failed) and the record of how it was made."""

    workflow: Optional[Workflow]
    record: PlanRecord
    # Ask for a review of this round: once it has run, the executor plans a recursive round that sees it (its
    # steps' verdicts, its answer) as a conductor step would, though the pool has no conductor among its workers.
    review: bool = False
    # A recursive round's plan: if what it revised did better on the question's examples (evidence.does_worse),
    # the answer it was asked to check stands.
    keep_better: bool = False


class PolicyError(ValueError):
    """A policy that cannot be made or used: an unknown name, a bad option, a worker the pool lacks."""


def literal(text: str) -> Any:
    """A command-line value as what it reads as: true/false, an int, a float, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _count(minimum: int) -> Callable[[Any, ValidationInfo], int]:
    def check(value: Any, info: ValidationInfo) -> int:
        value = literal(value) if isinstance(value, str) else value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:  # True is an int to Python, not a count
            raise ValueError(f"{info.field_name} must be a whole number >= {minimum}, got {value!r}")
        return value

    return check


def _worker(value: Any, info: ValidationInfo) -> Union[str, int]:
    # A worker is named as written: "true", "a,b" or "1e3" are names, never values to convert.
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{info.field_name}: a worker is a name or an id, not {value!r}")
    return value


Count = Annotated[int, BeforeValidator(_count(0))]
PositiveCount = Annotated[int, BeforeValidator(_count(1))]
WorkerRef = Annotated[Union[str, int], BeforeValidator(_worker)]  # a worker's name, or its id in the pool


class PolicyOptions(BaseModel):
    """A policy's options. ``positional`` is the one ``--policy name:ARG`` sets; ``worker_options`` name a
    pool worker (checked against the pool by ``Policy.check``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    positional: ClassVar[Optional[str]] = None
    worker_options: ClassVar[tuple[str, ...]] = ()


class Policy:
    name: str = "policy"
    Options: ClassVar[type[PolicyOptions]] = PolicyOptions

    async def plan(self, request: PlanRequest) -> Plan:
        raise NotImplementedError

    def check(self, pool: "PoolSpec") -> None:
        """Raise PolicyError if this policy cannot plan on ``pool`` (a worker or workflow it names is not
        there): eval and ask check before any question runs. By default: the options that name workers."""
        for key in self.Options.worker_options:
            value = getattr(self, key, None)
            if value is not None:
                try:
                    worker_index(pool, value)
                except ValueError as exc:
                    raise PolicyError(str(exc)) from None

    def fingerprint(self, pool: "PoolSpec") -> dict[str, Any]:
        """What decides this policy's plans on ``pool`` (eval refuses to resume results made with a
        different one). By default its class and plain settings; a policy with more state (a model,
        the pool's conductor settings) adds it."""
        plain = {k: v for k, v in sorted(vars(self).items()) if isinstance(v, (str, int, float, bool, type(None)))}
        return {"class": type(self).__name__, **plain}


_POLICIES: dict[str, type[Policy]] = {}


def register_policy(name: str):
    """Register a Policy class under ``name`` (its ``Options`` say what ``make_policy`` accepts)."""

    def deco(cls: type[Policy]) -> type[Policy]:
        _POLICIES[name] = cls
        return cls

    return deco


def _load_builtins() -> None:
    """Import every module of this package: each registers its policies (a new file needs no other edit)."""
    import importlib
    import pkgutil

    from .. import policies as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in ("base", "specs"):
            importlib.import_module(f"{package.__name__}.{module.name}")


def policy_class(name: str) -> type[Policy]:
    _load_builtins()
    if name not in _POLICIES:
        raise PolicyError(f"unknown policy {name!r}; choose one of: {', '.join(sorted(_POLICIES))}")
    return _POLICIES[name]


def options_problem(name: str, options: type[PolicyOptions], exc: ValidationError) -> str:
    """One line per bad option: an unknown one with the accepted ones, a bad value with its reason."""
    parts = []
    accepted = ", ".join(options.model_fields) or "none"
    for e in exc.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown option {key!r} (accepted: {accepted})")
        elif e["type"] == "value_error":
            parts.append(e["msg"].removeprefix("Value error, "))
        else:
            parts.append(f"{key}: {e['msg']}")
    return f"policy {name!r}: bad option(s): " + "; ".join(parts)


def make_policy(name: str, **options: Any) -> Policy:
    """The policy registered as ``name`` with ``options`` validated by its ``Options`` (PolicyError if not)."""
    cls = policy_class(name)
    try:
        valid = cls.Options.model_validate(options)
    except ValidationError as exc:
        raise PolicyError(options_problem(name, cls.Options, exc)) from None
    # What only the policy itself can tell (a router file that is not a model, ...) raises its own ValueError.
    return cls(**dict(valid))


def policy_names() -> list[str]:
    _load_builtins()
    return sorted(_POLICIES)
