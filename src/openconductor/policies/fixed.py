"""Fixed workflows: the same hand-written steps for every question (a baseline the conductor must beat).

Declared in the pool file under ``[workflows.NAME]`` or in a TOML/YAML file of their own, with
workers named (not numbered), so a workflow survives reordering the pool::

    [workflows.code-then-run]
    description = "the coder writes a program, the python worker runs it"
    steps = [
      { worker = "qwen-coder", subtask = "Write a Python program that prints the answer.", access = [] },
      { worker = "python", subtask = "Run the program.", access = "all" },
    ]

Run one with ``--policy fixed:code-then-run`` (a name in the pool file) or ``--policy fixed:FILE.toml``.
A verification round (a recursive conductor step) accepts the answer it is shown.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..configfile import did_you_mean
from ..records import PlanRecord
from ..workflow import Step, Workflow
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, register_policy

if TYPE_CHECKING:
    from ..pool import PoolSpec


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


class FixedWorkflowError(ValueError):
    """A fixed workflow that cannot be used: missing file, bad fields, unknown workers or name."""


def load_workflow_file(path: Path) -> FixedWorkflowSpec:
    if not path.exists():
        raise FixedWorkflowError(f"workflow file not found: {path}")
    text = path.read_text()
    try:
        data = yaml.safe_load(text) if path.suffix in {".yaml", ".yml"} else tomllib.loads(text)
        return FixedWorkflowSpec.model_validate(data or {})
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise FixedWorkflowError(f"{path}: not a workflow file: {exc}") from exc


class FixedOptions(PolicyOptions):
    positional = "workflow"
    workflow: str  # a [workflows.NAME] of the pool file, or a workflow file's path


@register_policy("fixed")
class FixedWorkflow(Policy):
    """``workflow``: the name of a ``[workflows.NAME]`` table of the pool file, or a workflow file's path."""

    Options = FixedOptions

    def __init__(self, workflow: str):
        self.source = str(workflow)
        self.name = f"fixed:{self.source}"
        path = Path(self.source).expanduser()
        self.spec = load_workflow_file(path) if path.suffix in {".toml", ".yaml", ".yml"} else None

    def resolve(self, pool: "PoolSpec") -> Workflow:
        spec = self.spec
        if spec is None:
            if self.source not in pool.workflows:
                known = ", ".join(sorted(pool.workflows)) or "none"
                raise FixedWorkflowError(
                    f"pool {pool.name!r} declares no workflow {self.source!r} (declared: {known}); "
                    "add [workflows.NAME] to the pool file or pass a workflow file (fixed:FILE.toml)"
                )
            spec = pool.workflows[self.source]
        try:
            spec.check_workers([w.name for w in pool.workers], f"workflow {self.source!r}")
        except ValueError as exc:
            raise FixedWorkflowError(str(exc)) from None
        return spec.resolve(pool)

    def check(self, pool: "PoolSpec") -> None:
        try:
            self.resolve(pool)
        except FixedWorkflowError as exc:
            raise PolicyError(str(exc)) from None

    async def plan(self, request: PlanRequest) -> Plan:
        workflow = Workflow(()) if request.previous is not None else self.resolve(request.pool.spec)
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))
