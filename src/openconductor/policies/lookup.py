"""Per-domain baselines: a lookup table (one fixed workflow per question domain) and the oracle
per-domain router (each domain's best worker, one step).

Both key on ``PlanRequest.domain``, the question's domain or kind where the caller knows it (every eval
task does). A lookup table file names workers, so it survives reordering the pool::

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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..configfile import read_config
from ..records import PlanRecord
from ..workflow import Step, Workflow
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, register_policy
from .baselines import SOLVE
from .fixed import FixedWorkflowError, FixedWorkflowSpec

if TYPE_CHECKING:
    from ..pool import PoolSpec

Entry = Union[Workflow, FixedWorkflowSpec]  # ids in the pool, or worker names resolved against it


class LookupTableSpec(BaseModel):
    """A lookup table file: ``[domains.NAME]`` workflows and an optional ``[default]`` for other domains."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    domains: dict[str, FixedWorkflowSpec] = Field(min_length=1)
    default: Optional[FixedWorkflowSpec] = None


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
    """One fixed workflow per question domain (``default`` for the domains the table does not name)."""

    Options = LookupOptions

    def __init__(self, table: Union[str, Path, Mapping[str, Entry]], *, default: Optional[Entry] = None, name: str = "lookup"):
        if isinstance(table, (str, Path)):
            spec = load_table_file(table)
            self.source, self.name = str(table), f"lookup:{Path(table).stem}"
            self.table: dict[str, Entry] = dict(spec.domains)
            self.default: Optional[Entry] = spec.default
        else:
            self.source, self.name = "", name
            self.table, self.default = dict(table), default

    def workflow_for(self, domain: Optional[str], pool: "PoolSpec") -> Workflow:
        entry = self.table.get(domain or "", self.default)
        if entry is None:
            raise PolicyError(f"{self.name}: no workflow for domain {domain!r} and no default; the table has {', '.join(sorted(self.table))}")
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
        return {**super().fingerprint(pool), "table": rendered, "default": default}

    async def plan(self, request: PlanRequest) -> Plan:
        workflow = Workflow(()) if request.previous is not None else self.workflow_for(request.domain, request.pool.spec)
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))


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
