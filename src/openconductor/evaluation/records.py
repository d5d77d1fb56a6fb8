"""One graded run of the evaluator: ``EvalRecord``, a line of ``results.jsonl``."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, Field

from ..records import Run
from ..tasks import Question, Task, agrade

RESULTS_FILE = "results.jsonl"


class EvalError(ValueError):
    """Bad eval input: a results file from another setup, a baseline that is not among the policies, ..."""


class EvalRecord(BaseModel):
    """One graded run: a line of results.jsonl."""

    task: str
    policy: str
    question_id: str
    repeat: int
    question: str  # the exact text the policy was asked (question + answer-format instruction)
    domain: str = ""
    run_id: str
    seed: int
    status: str
    final_answer: str
    correct: bool
    score: float
    extracted: Optional[str] = None
    reason: str = ""
    steps: int
    calls: int
    tokens: int
    worker_tokens: int
    conductor_tokens: int
    cost_usd: float
    wall_s: float
    workers_used: list[str] = Field(default_factory=list)  # per step, in order
    accesses: list[Union[Literal["all"], list[int]]] = Field(default_factory=list)  # per step, in order (older files: empty)
    plan_fallback: Optional[str] = None
    error: Optional[str] = None
    finished_at: float = Field(default_factory=time.time)

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.task, self.policy, self.question_id, self.repeat)

    @property
    def planned(self) -> bool:
        """Whether the policy produced a workflow (an unparseable plan without a fallback did not)."""
        return self.status != "plan_failed"


def load_records(path: Path) -> list[EvalRecord]:
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(EvalRecord.model_validate_json(line))
        except ValueError as exc:
            # A last line cut short by a crash is dropped (it is re-run); anything else is someone else's file.
            if n == len(lines):
                continue
            raise EvalError(f"{path}:{n}: not an eval record: {exc}") from exc
    return records


def drop_partial_line(path: Path) -> None:
    """A crash mid-write leaves a last line without its newline; cut it so appends start clean."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def question_seed(base: int, task: str, question_id: str, repeat: int) -> int:
    """The sampling seed of one (question, repeat): the same for every policy, stable across runs."""
    digest = hashlib.sha256(f"{base}|{task}|{question_id}|{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


def question_domain(task: Task, question: Question) -> str:
    """The question's domain (its metadata's, else its task's): what per-domain tables and lookup policies key on."""
    return str(question.metadata.get("domain") or task.domain)


async def record_from_run(task: Task, question: Question, label: str, repeat: int, seed: int, run: Run) -> EvalRecord:
    if run.final_answer:
        try:
            result = await agrade(question, run.final_answer)
            correct, score, extracted, reason = result.correct, result.score, result.extracted, result.reason
        except Exception as exc:  # a malformed reference or a grader bug: this record scores 0, the eval goes on
            logging.getLogger(__name__).warning("grading %s/%s failed, scored 0: %s: %s", task.name, question.id, type(exc).__name__, exc)
            correct, score, extracted, reason = False, 0.0, None, f"grader failed: {type(exc).__name__}: {str(exc)[:300]}"
    else:
        correct, score, extracted, reason = False, 0.0, None, f"no answer (run {run.status})"
    totals = run.totals
    return EvalRecord(
        task=task.name, policy=label, question_id=question.id, repeat=repeat, question=task.text(question),
        domain=question_domain(task, question), run_id=run.id, seed=seed, status=run.status,
        final_answer=run.final_answer, correct=correct, score=score, extracted=extracted, reason=reason,
        steps=len(run.steps), calls=totals.calls, tokens=totals.usage.total_tokens,
        worker_tokens=totals.worker_usage.total_tokens, conductor_tokens=totals.conductor_usage.total_tokens,
        cost_usd=totals.usage.cost_usd, wall_s=totals.wall_s, workers_used=[s.worker_name for s in run.steps],
        accesses=[s.access for s in run.steps],
        plan_fallback=run.plan.fallback if run.plan else None, error=run.error,
    )
