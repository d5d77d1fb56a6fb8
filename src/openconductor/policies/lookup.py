"""Per-domain and per-kind baselines: a lookup table (one fixed workflow per question kind or domain) and
the oracle per-domain router (each domain's best worker, one step).

They key on ``PlanRequest.kind`` (the question's task, e.g. ``rg:gcd``) and ``PlanRequest.domain`` (e.g.
``math``), which every eval task gives; a table entry names either. A lookup table file names workers,
so it survives reordering the pool::

    description = "code goes to the coder and is run; the rest to the strongest model"
    [domains.code]
    steps = [
      { worker = "qwen-coder", subtask = "Write a Python program that prints the answer.", access = [] },
      { worker = "python", subtask = "Run the program.", access = "all" },
    ]
    [default]
    steps = [{ worker = "qwen-coder", subtask = "Solve the overall task and give the final answer." }]

Run one with ``--policy lookup:FILE.toml``; the oracle with ``--policy oracle`` on a pool whose workers
declare per-domain skills (the simulated pools do).

A question without a kind or domain in the table (``conductor ask``, the server) runs ``[default]``, unless the
file names ``familiar`` (a folder holding a ``familiar.json``, relative to the file; ``conductor fit`` writes one
beside the table it ships): then the question runs the entry of its nearest training question's kind where it is
at least the file's threshold similar, and ``[default]`` (the fit's best fixed workflow) where it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..configfile import read_config
from ..records import FamiliarityCheck, PlanRecord
from ..workflow import Step, Workflow
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, register_policy
from ..workflow.wordings import SOLVE
from .fixed import FixedWorkflowError, FixedWorkflowSpec

if TYPE_CHECKING:
    from ..pool import PoolSpec
    from ..conductor.familiar import Familiarity

Entry = Union[Workflow, FixedWorkflowSpec]  # ids in the pool, or worker names resolved against it


class LookupTableSpec(BaseModel):
    """A lookup table file: ``[domains.NAME]`` workflows (NAME: a question kind or domain) and an optional
    ``[default]`` for the others."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    domains: dict[str, FixedWorkflowSpec] = Field(min_length=1)
    default: Optional[FixedWorkflowSpec] = None
    familiar: Optional[str] = None  # a folder with a familiar.json (relative to this file): a kind for questions without one


def load_table_file(path: str | Path) -> LookupTableSpec:
    path = Path(path).expanduser()
    data = read_config(path, FixedWorkflowError, what="lookup table file")
    try:
        return LookupTableSpec.model_validate(data)
    except ValidationError as exc:
        raise FixedWorkflowError(f"{path}: not a lookup table file: {exc}") from exc


class LookupOptions(PolicyOptions):
    positional = "table"
    table: str  # a lookup table file (TOML/YAML)


@register_policy("lookup")
class LookupTable(Policy):
    """One fixed workflow per question kind or domain (the kind's entry first; ``default`` for the rest)."""

    Options = LookupOptions

    def __init__(self, table: Union[str, Path, Mapping[str, Entry]], *, default: Optional[Entry] = None, name: str = "lookup",
                 familiar: Optional["Familiarity"] = None):
        self.familiar = familiar
        if isinstance(table, (str, Path)):
            spec = load_table_file(table)
            self.source, self.name = str(table), f"lookup:{Path(table).stem}"
            self.table: dict[str, Entry] = dict(spec.domains)
            self.default: Optional[Entry] = spec.default
            if spec.familiar is not None:
                from ..conductor.familiar import FamiliarityError, read_familiarity

                try:
                    self.familiar = read_familiarity(Path(table).expanduser().parent / spec.familiar)
                except FamiliarityError as exc:
                    raise PolicyError(f"{self.name}: {exc}") from None
        else:
            self.source, self.name = "", name
            self.table, self.default = dict(table), default

    def workflow_for(self, domain: Optional[str], pool: "PoolSpec", kind: Optional[str] = None) -> Workflow:
        key = next((k for k in (kind, domain) if k is not None and k in self.table), None)
        entry = self.table[key] if key is not None else self.default
        if entry is None:
            raise PolicyError(f"{self.name}: no workflow for kind {kind!r} or domain {domain!r} and no default; "
                              f"the table has {', '.join(sorted(self.table))}")
        if isinstance(entry, Workflow):
            return entry
        entry.check_workers([w.name for w in pool.workers], f"{self.name}, domain {domain!r}")
        return entry.resolve(pool)

    def check(self, pool: "PoolSpec") -> None:
        try:
            for domain in self.table:
                self.workflow_for(domain, pool)
            if self.default is not None:
                self.workflow_for(None, pool)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None

    def fingerprint(self, pool: "PoolSpec") -> dict:
        rendered = {d: self.workflow_for(d, pool).render() for d in sorted(self.table)}
        default = self.workflow_for(None, pool).render() if self.default is not None else None
        familiar = self.familiar.digest if self.familiar is not None else None
        return {**super().fingerprint(pool), "table": rendered, "default": default, **({"familiar": familiar} if familiar else {})}

    def nearest_kind(self, request: PlanRequest) -> tuple[Optional[str], Optional[FamiliarityCheck]]:
        """The table key a question without one of its own runs: its nearest training kind when familiar enough."""
        if self.familiar is None or any(k is not None and k in self.table for k in (request.kind, request.domain)):
            return request.kind, None
        similarity, group = self.familiar.nearest(request.request_text or request.question)
        gated = similarity < self.familiar.threshold or group not in self.table
        check = FamiliarityCheck(similarity=similarity, nearest=group, threshold=self.familiar.threshold, gated=gated)
        return (None if gated else group), check

    async def plan(self, request: PlanRequest) -> Plan:
        if request.previous is not None:
            return Plan(Workflow(()), PlanRecord(policy=self.name, raw=Workflow(()).render(), workflow=Workflow(()).to_record()))
        kind, check = self.nearest_kind(request)
        workflow = self.workflow_for(request.domain, request.pool.spec, kind)
        record = PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record())
        if check is not None:
            record.familiarity = check
        return Plan(workflow, record)


# ------------------------------------------------------------------------------------- the oracle


def declared_skills(spec: "PoolSpec") -> dict[str, dict[str, float]]:
    """Per-worker per-domain accuracies the pool's workers declare (``options.skills``: the simulated pools)."""
    return {w.name: dict(w.options.get("skills", {})) for w in spec.workers if w.options.get("skills")}


def best_by_domain(spec: "PoolSpec", domains: list[str]) -> dict[str, str]:
    """Each domain's worker with the highest declared skill (empty where the pool declares none)."""
    table = declared_skills(spec)
    return {d: max(table, key=lambda name: table[name].get(d, 0.0)) for d in domains} if table else {}


def best_single(spec: "PoolSpec", domains: list[str]) -> str:
    """The worker with the highest mean declared skill over ``domains``; without skills, the strongest."""
    table = declared_skills(spec)
    if not table:
        return spec.workers[spec.strongest_index()].name
    return max(table, key=lambda name: sum(table[name].get(d, 0.0) for d in domains) / len(domains))


@register_policy("oracle")
class OracleRouter(Policy):
    """The oracle per-domain router: one step on the worker that is best on the question's domain, by the
    skills the pool declares (``workers``: a domain -> worker table to use instead)."""

    def __init__(self, workers: Optional[Mapping[str, str]] = None):
        self.workers = dict(workers) if workers is not None else None
        self.name = "oracle"

    def worker_for(self, domain: Optional[str], pool: "PoolSpec") -> str:
        table = self.workers if self.workers is not None else best_by_domain(pool, [domain] if domain else [])
        if self.workers is None and not declared_skills(pool):
            raise PolicyError(f"the oracle router needs per-domain skills declared by the workers of pool {pool.name!r} "
                              "(options.skills, as in the simulated pools)")
        if domain not in table:
            raise PolicyError(f"the oracle router has no worker for domain {domain!r}")
        return table[domain]

    def check(self, pool: "PoolSpec") -> None:
        if self.workers is None and not declared_skills(pool):
            self.worker_for(None, pool)
        for name in (self.workers or {}).values():
            if name not in [w.name for w in pool.workers]:
                raise PolicyError(f"the oracle router names worker {name!r}, which pool {pool.name!r} lacks")

    def fingerprint(self, pool: "PoolSpec") -> dict:
        return {**super().fingerprint(pool), "workers": self.workers, "skills": declared_skills(pool)}

    async def plan(self, request: PlanRequest) -> Plan:
        spec = request.pool.spec
        if request.previous is not None:
            workflow = Workflow(())
        else:
            workflow = Workflow((Step(spec.index(self.worker_for(request.domain, spec)), SOLVE, ()),), reasoning="oracle per-domain router")
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))
