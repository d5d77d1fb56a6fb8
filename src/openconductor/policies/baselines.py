"""Hand-made baselines as policies, so they run on the same executor as the conductor."""

from __future__ import annotations

import functools
import random
from typing import TYPE_CHECKING, Mapping, Optional

from ..records import PlanRecord, Usage
from ..workflow import Access, Step, Workflow, WorkflowError, parse_and_validate
from ..workflow.wordings import MOA_AGGREGATE, RANDOM_LAST, RANDOM_STEP, REVISE, SOLVE
from ..spec import worker_index
from .base import Count, Plan, PlanRequest, Policy, PolicyOptions, PositiveCount, WorkerRef, register_policy

if TYPE_CHECKING:
    from ..pool import PoolSpec



def _worker_index(request: PlanRequest, worker: Optional[str | int]) -> int:
    return worker_index(request.pool.spec, worker)


def _workers(request: PlanRequest) -> list[int]:
    """Pool members that answer questions (not the conductor itself)."""
    return [i for i, w in enumerate(request.pool.spec.workers) if w.provider != "conductor"]


def _plan(name: str, steps: list[Step], reasoning: str) -> Plan:
    workflow = _workflow(tuple(steps), reasoning)
    return Plan(workflow, PlanRecord(policy=name, raw=workflow.render(), workflow=workflow.to_record()))


@functools.lru_cache(maxsize=256)
def _workflow(steps: tuple[Step, ...], reasoning: str) -> Workflow:
    """One Workflow per distinct plan (they are immutable): a baseline plans the same few for every request, rendered once."""
    return Workflow(steps, reasoning=reasoning)


class SingleOptions(PolicyOptions):
    positional = "worker"
    worker_options = ("worker",)
    worker: Optional[WorkerRef] = None  # default: the pool's strongest worker


@register_policy("single")
class SingleWorker(Policy):
    """One worker answers the question directly."""

    Options = SingleOptions

    def __init__(self, worker: Optional[str | int] = None):
        self.worker = worker
        self.name = "single" if worker is None else f"single:{worker}"

    async def plan(self, request: PlanRequest) -> Plan:
        i = _worker_index(request, self.worker)
        return _plan(self.name, [Step(i, SOLVE, ())], "single worker")


class SelfReflectionOptions(SingleOptions):
    rounds: Count = 2


@register_policy("self-reflection")
class SelfReflection(Policy):
    """One worker answers, then revises its answer ``rounds`` times with every attempt in context."""

    Options = SelfReflectionOptions

    def __init__(self, worker: Optional[str | int] = None, rounds: int = 2):
        self.worker, self.rounds = worker, rounds
        self.name = f"self-reflection:{rounds}"

    async def plan(self, request: PlanRequest) -> Plan:
        i = _worker_index(request, self.worker)
        steps = [Step(i, SOLVE, ())]
        steps += [Step(i, REVISE, "all") for _ in range(self.rounds)]
        return _plan(self.name, steps, f"self-reflection with {self.rounds} revision(s)")


class MoAOptions(PolicyOptions):
    positional = "aggregator"
    worker_options = ("aggregator",)
    aggregator: Optional[WorkerRef] = None  # a worker, "random", or None: the strongest
    proposers: Optional[PositiveCount] = None  # None: every worker once


@register_policy("moa")
class MixtureOfAgents(Policy):
    """Proposers answer independently, one aggregator synthesises: ``proposers`` + 1 calls.

    By default every worker proposes once and the strongest aggregates. ``proposers=N`` takes every
    worker once and then draws the rest at random; ``aggregator="random"`` draws the aggregator. The
    paper's baseline is 7 proposers and 1 aggregator (8 calls). Draws are seeded by the request's seed
    and question, so a run is reproducible.
    """

    Options = MoAOptions

    def __init__(self, aggregator: Optional[str | int] = None, proposers: Optional[int] = None):
        self.aggregator, self.proposers = aggregator, proposers
        self.name = "moa"

    def check(self, pool: "PoolSpec") -> None:
        if self.aggregator != "random":  # drawn per question, not a worker's name
            super().check(pool)

    async def plan(self, request: PlanRequest) -> Plan:
        from ..pool import TOOL_PROVIDERS

        # Tools (python, retrieval) answer nothing on their own: they neither propose nor aggregate.
        workers = [i for i in _workers(request) if request.pool.spec.workers[i].provider not in TOOL_PROVIDERS]
        rng = random.Random(f"moa|{request.seed}|{request.question}")
        count = len(workers) if self.proposers is None else self.proposers
        proposers = workers[:count] + [rng.choice(workers) for _ in range(count - len(workers))]
        steps = [Step(i, SOLVE, ()) for i in proposers]
        aggregator = rng.choice(workers) if self.aggregator == "random" else _worker_index(request, self.aggregator)
        steps.append(Step(aggregator, MOA_AGGREGATE, "all"))
        return _plan(self.name, steps, f"{len(proposers)} proposers and one aggregator")


class RandomOptions(PolicyOptions):
    seed: Optional[int] = None


@register_policy("random")
class RandomWorkflow(Policy):
    """A random workflow: 1..max_steps steps, random workers and access lists (a floor to beat)."""

    Options = RandomOptions

    def __init__(self, seed: Optional[int] = None):
        self.rng = random.Random(seed)
        self.name = "random"

    async def plan(self, request: PlanRequest) -> Plan:
        rng = random.Random(self.rng.random() if request.seed is None else request.seed)
        workers = _workers(request)
        n = rng.randint(1, request.max_steps)
        steps = []
        for i in range(n):
            access: Access = "all" if i and rng.random() < 0.5 else tuple(sorted(rng.sample(range(i), rng.randint(0, i))))
            last = i == n - 1
            subtask = RANDOM_LAST if last else RANDOM_STEP
            steps.append(Step(rng.choice(workers), subtask, access))
        return _plan(self.name, steps, "random workflow")


class GivenWorkflow(Policy):
    """Returns a workflow decided elsewhere (a sampled completion in training, a replayed trace).

    ``recursive`` answers verification rounds: by default it accepts the previous answer. ``raw`` is
    the text the workflow was parsed from (recorded as the plan's raw output; default: its rendering).
    """

    def __init__(self, workflow: Workflow, *, name: str = "given", recursive: Optional[Workflow] = None, raw: Optional[str] = None):
        self.workflow, self.name, self.raw = workflow, name, raw
        self.recursive = recursive if recursive is not None else Workflow(())

    async def plan(self, request: PlanRequest) -> Plan:
        recursive = request.previous is not None
        workflow = self.recursive if recursive else self.workflow
        raw = workflow.render() if recursive or self.raw is None else self.raw
        return Plan(workflow, PlanRecord(policy=self.name, raw=raw, workflow=workflow.to_record()))


class GivenPlans(Policy):
    """Plans written elsewhere, one raw conductor output per question (a trained model's batched plans):
    each is parsed as the conductor's output is, and one that does not parse is a failed plan (no
    fallback, as in training). ``usage``: what writing each plan cost, counted as the conductor's tokens.
    A verification round accepts the answer it is shown."""

    def __init__(self, texts: Mapping[str, str], *, max_steps: int, usage: Optional[Mapping[str, Usage]] = None, name: str = "given-plans"):
        self.texts, self.max_steps, self.usage, self.name = dict(texts), max_steps, dict(usage or {}), name

    async def plan(self, request: PlanRequest) -> Plan:
        if request.previous is not None:
            return Plan(Workflow(()), PlanRecord(policy=self.name, raw="", workflow=Workflow(()).to_record()))
        if request.question not in self.texts:
            raise ValueError(f"{self.name}: no plan was written for this question")
        text = self.texts[request.question]
        record = PlanRecord(policy=self.name, raw=text, usage=self.usage.get(request.question, Usage()))
        try:
            workflow = parse_and_validate(text, len(request.pool.spec.workers), max_steps=self.max_steps)
        except WorkflowError as exc:
            record.errors.append(f"{exc.code}: {exc}")
            return Plan(None, record)
        record.workflow = workflow.to_record()
        return Plan(workflow, record)
