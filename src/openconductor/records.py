"""The one record every part shares: a ``Run`` (plan + steps + answer + totals).

The CLI prints it, the trace store saves it, the server returns and streams it, ``eval`` scores it
and the trainer's reward grades it. Nothing re-derives it.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Iterable, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .verdicts import StepVerdict


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cpu_s: float = 0.0  # CPU seconds a tool worker's program used (LM calls leave it 0)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def total(cls, usages: "Iterable[Usage]") -> "Usage":
        """The sum of ``usages``, made once (``sum()`` would make a Usage per term)."""
        inp = out = 0
        cost = cpu = 0.0
        for u in usages:
            inp, out, cost, cpu = inp + u.input_tokens, out + u.output_tokens, cost + u.cost_usd, cpu + u.cpu_s
        return cls(input_tokens=inp, output_tokens=out, cost_usd=cost, cpu_s=cpu)

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cpu_s=self.cpu_s + other.cpu_s,
        )


class ToolCall(BaseModel):
    """A call of a caller-offered tool, in OpenAI's terms (``arguments`` is JSON text)."""

    id: str
    name: str
    arguments: str = "{}"


class Completion(BaseModel):
    """What one worker call returns, whatever the provider."""

    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)  # the caller's tools, when the call was offered them
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: Optional[str] = None
    model: Optional[str] = None
    cached: bool = False
    # What a tool worker did beyond its text (sandbox status, exit code, CPU time, output sizes, ...).
    detail: dict[str, Any] = Field(default_factory=dict)
    # The engine's own timings of this call (llama.cpp: prompt_n / cache_n prompt tokens processed / reused, prompt_ms,
    # predicted_n, predicted_ms, draft_n, ...), for benchmarks; never stored (not in dumps, caches or records).
    timings: dict[str, Any] = Field(default_factory=dict, exclude=True)


StepStatus = Literal["pending", "running", "ok", "error", "skipped"]
# cancelled: stopped from outside (Ctrl-C, a client that went away); the finished steps are kept.
RunStatus = Literal["running", "ok", "limit", "error", "plan_failed", "cancelled"]


class StepRecord(BaseModel):
    index: int
    worker: int  # ordinal id as the conductor saw it
    worker_name: str
    subtask: str
    access: Union[Literal["all"], list[int]]
    visible: list[int] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)  # the exact context sent
    output: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: Optional[str] = None
    status: StepStatus = "pending"
    error: Optional[str] = None
    error_code: Optional[str] = None  # e.g. context_length_exceeded (the server answers 400 for it)
    attempts: int = 0
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    detail: dict[str, Any] = Field(default_factory=dict)  # a tool worker's Completion.detail
    # Answered from the response cache / replay store: usage and latency are the original call's.
    cached: bool = False
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    # A step run by the conductor itself (recursion) holds the nested round.
    nested: Optional["Run"] = None
    # Set on a step the executor added after the plan, saying why (a plan that ended in a tool step).
    appended: Optional[str] = None
    # What a later round may read about this step (evidence.py): its tool's outcome, the question's examples, agreement.
    verdict: Optional[StepVerdict] = None


class PlannedStep(BaseModel):
    """One step of a workflow as recorded: what ``Workflow.to_dict`` writes and stored traces hold."""

    worker: int  # ordinal id in the pool the conductor was shown
    subtask: str
    access: Union[Literal["all"], list[int]] = Field(default_factory=list)


class WorkflowRecord(BaseModel):
    """The workflow a plan chose (``Workflow.from_dict`` reads it back)."""

    reasoning: str = ""
    steps: list[PlannedStep] = Field(default_factory=list)


class FamiliarityCheck(BaseModel):
    """A trained conductor's test of whether a question is like those it trained on (conductor/familiar.py)."""

    similarity: float  # to the nearest training question
    nearest: str  # that question's group (its kind); "" when the question shares no n-gram with any
    threshold: float
    gated: bool  # under the threshold: the checkpoint's fallback workflow ran instead of a plan


class PlanRecord(BaseModel):
    # Policies assign ``workflow = Workflow.to_dict()``: validated on assignment, it is stored typed.
    model_config = ConfigDict(validate_assignment=True)

    policy: str
    raw: str = ""  # the conductor's full text (last attempt)
    workflow: Optional[WorkflowRecord] = None
    attempts: int = 0
    errors: list[str] = Field(default_factory=list)  # one per failed attempt, typed code + message
    fallback: Optional[str] = None  # set when a declared fallback replaced the conductor's plan
    familiarity: Optional[FamiliarityCheck] = None  # set where the pool gates unfamiliar questions (unfamiliar = "best-fixed")
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0


class Totals(BaseModel):
    calls: int = 0  # worker calls (conductor calls are counted in conductor_usage)
    worker_usage: Usage = Field(default_factory=Usage)
    conductor_usage: Usage = Field(default_factory=Usage)
    per_worker: dict[str, Usage] = Field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def usage(self) -> Usage:
        return self.worker_usage + self.conductor_usage


class Run(BaseModel):
    id: str = Field(default_factory=lambda: secrets.token_hex(8))  # 16 random hex digits (a uuid4's 16 first held a fixed "4")
    question: str
    policy: str
    pool: str = ""
    workers: list[str] = Field(default_factory=list)  # names, in the ordinal order shown to the conductor
    depth: int = 0
    created_at: float = Field(default_factory=time.time)
    plan: Optional[PlanRecord] = None
    steps: list[StepRecord] = Field(default_factory=list)
    final_answer: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)  # the final step asks the caller to run these
    status: RunStatus = "running"
    limits_hit: list[str] = Field(default_factory=list)
    error: Optional[str] = None
    totals: Totals = Field(default_factory=Totals)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # What the pool said when it loaded (a worker that cannot run on this machine, and the fix).
    warnings: list[str] = Field(default_factory=list)

    @property
    def workflow_steps(self) -> int:
        return len(self.steps)


StepRecord.model_rebuild()
