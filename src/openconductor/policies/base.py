"""The policy interface: ``plan(request) -> Plan``. The LM conductor and every baseline implement it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..records import PlanRecord, StepRecord
from ..workflow import Workflow

if TYPE_CHECKING:
    from ..budget import Budget
    from ..pool import Pool, PoolSpec


@dataclass
class Previous:
    """What a recursive round sees: the answer so far and the steps its access list allows."""

    answer: str
    steps: list[StepRecord] = field(default_factory=list)
    instruction: str = ""  # the subtask the outer round gave the conductor step


@dataclass
class PlanRequest:
    question: str
    pool: "Pool"
    max_steps: int = 5
    previous: Optional[Previous] = None
    depth: int = 0
    seed: Optional[int] = None
    budget: Optional["Budget"] = None  # the request's budget: a policy that calls a model reserves each call on it


@dataclass
class Plan:
    """A workflow (None if planning failed) and the record of how it was made."""

    workflow: Optional[Workflow]
    record: PlanRecord


class Policy:
    name: str = "policy"

    async def plan(self, request: PlanRequest) -> Plan:
        raise NotImplementedError

    def fingerprint(self, pool: "PoolSpec") -> dict[str, Any]:
        """What decides this policy's plans on ``pool`` (eval refuses to resume results made with a
        different one). By default its class and plain settings; a policy with more state (a model,
        the pool's conductor settings) adds it."""
        plain = {k: v for k, v in sorted(vars(self).items()) if isinstance(v, (str, int, float, bool, type(None)))}
        return {"class": type(self).__name__, **plain}


_POLICIES: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str):
    def deco(factory):
        _POLICIES[name] = factory
        return factory

    return deco


def make_policy(name: str, **options) -> Policy:
    from . import baselines, fixed, lm, router  # noqa: F401  (registers the built-in policies)

    if name not in _POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(sorted(_POLICIES))}")
    return _POLICIES[name](**options)


def policy_names() -> list[str]:
    from . import baselines, fixed, lm, router  # noqa: F401

    return sorted(_POLICIES)
