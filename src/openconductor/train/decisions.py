"""Targets for the conductor's decision after round 1, found by search (issue 67): ``conductor train-decisions``.

Per training question: round 1 runs (the coder answers, as ``--policy repair`` asks it) and is reviewed as the runtime
reviews a round (``Plan.review``), so the recursive round's prompt is recorded exactly as a conductor would be shown it
(``conductor_messages`` with the round's steps and their verdicts: what the program did on the question's own examples).
Then each decision is tried from that same round 1:

* ``accept``: the round's answer stands;
* ``revise``: the same coder answers again, told what failed (``policies.repair.repair_subtask``; the plain solve
  wording when nothing failed);
* ``escalate``: another worker (a stronger coder where the pool has one) gets the same instruction.

A revision that does worse on the question's examples keeps the previous answer, as the runtime does (``keep_better``).
The target of a question is its cheapest decision whose final answer the hidden tests pass (accept, then revise, then
escalate); where none passes, accept (nothing bought anything). The rows (prompt, target, each option's outcome) are
what the warm-up copies for recursive rounds; the summary is the oracle's room over always-accept.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..cache import ResponseCache
from ..conductor.prompt import Previous, conductor_messages
from ..evidence import does_worse
from ..evaluation import paired_bootstrap
from ..executor import solve
from ..policies.base import Plan, PlanRequest, Policy
from ..policies.baselines import GivenWorkflow, worker_index
from ..workflow.wordings import SOLVE
from ..policies.repair import _last_examples, repair_subtask
from ..pool import Pool, PoolSpec
from ..records import PlanRecord
from ..tasks import Question, Task
from ..workflow import Step, Workflow
from .search.candidates import strength_order
from .reward import grade_answer

OPTIONS = ("accept", "revise", "escalate")  # in order of cost: the target is the first that is right


class _Reviewed(Policy):
    """Round 1 as given, then a review round that records what the conductor is shown and accepts."""

    name = "decision-search"

    def __init__(self, workflow: Workflow):
        self.workflow = workflow
        self.previous: Optional[Previous] = None

    async def plan(self, request: PlanRequest) -> Plan:
        if request.previous is None:
            return Plan(self.workflow, PlanRecord(policy=self.name, raw=self.workflow.render(), workflow=self.workflow.to_record()), review=True)
        self.previous = request.previous
        accept = Workflow(())
        return Plan(accept, PlanRecord(policy=self.name, raw=accept.render(), workflow=accept.to_record()))


@dataclass
class DecisionRow:
    id: str
    template: str
    examples: str  # the round's verdict on the question's examples, as the prompt states it
    failed: bool  # the round's program failed the question's examples (what the fixed repair rule revises on)
    correct: dict[str, bool]  # option -> whether its final answer passes the hidden tests
    tokens: dict[str, int]  # option -> worker tokens it spent after round 1
    best: str  # the target decision ("accept" where no option is right)
    target: str  # the target as the conductor writes it (Workflow.render)
    prompt: list[dict] = field(default_factory=list)  # the recursive round's messages, as the runtime builds them


def examples_failed(previous: Previous) -> bool:
    """Whether the round's last checked program failed the question's examples (``--policy repair`` revises then)."""
    step, verdict = _last_examples(previous.steps)
    return step is not None and verdict is not None and not verdict.all_passed and verdict.unavailable is None


def option_workflows(previous: Previous, coder: int, other: Optional[int]) -> dict[str, Workflow]:
    """The decisions tried after a round whose steps ``previous`` holds (module docstring)."""
    step, verdict = _last_examples(previous.steps)
    failed = examples_failed(previous)
    instruction = repair_subtask(verdict, step.output) if failed and step is not None and verdict is not None else SOLVE
    why = verdict.line() if verdict is not None else "no examples were run"
    out = {"accept": Workflow((), reasoning="Reasoning: accept: " + why),
           "revise": Workflow((Step(coder, instruction, ()),), reasoning="Reasoning: the coder answers again, told what failed: " + why)}
    if other is not None:
        out["escalate"] = Workflow((Step(other, instruction, ()),), reasoning="Reasoning: another worker answers, told what failed: " + why)
    return out


async def _option(question: Question, text: str, pool: Pool, workflow: Workflow, previous: Previous, seed: int) -> tuple[bool, int]:
    """(whether the option's final answer is right, the worker tokens it spent)."""
    if workflow.is_accept:
        _, score = await grade_answer(question.grader, previous.answer, question.reference, question.grader_options)
        return score >= 1.0, 0
    run = await solve(text, GivenWorkflow(workflow, name="decision-option"), pool, seed=seed)
    answer = run.final_answer
    if does_worse(run.steps, previous.steps) or not answer.strip():
        answer = previous.answer  # the runtime's keep_better: a revision that does worse does not replace the answer
    _, score = await grade_answer(question.grader, answer, question.reference, question.grader_options)
    return score >= 1.0, run.totals.usage.total_tokens


async def search_question(task: Task, question: Question, pool: Pool, coder: int, other: Optional[int], seed: int = 0) -> DecisionRow:
    """Round 1, then every decision from it (module docstring)."""
    text = task.text(question)
    policy = _Reviewed(Workflow((Step(coder, SOLVE, ()),), reasoning="Reasoning: the coder answers; its program is run on the question's examples"))
    await solve(text, policy, pool, seed=seed)
    previous = policy.previous
    if previous is None:  # the review was not reached (a limit): nothing to decide
        raise RuntimeError(f"{question.id}: round 1 ended before its review; raise [limits] max_depth to at least 1")
    options = option_workflows(previous, coder, other)
    outcomes = {name: await _option(question, text, pool, wf, previous, seed) for name, wf in options.items()}
    correct = {name: ok for name, (ok, _) in outcomes.items()}
    best = next((name for name in OPTIONS if correct.get(name)), "accept")
    _, verdict = _last_examples(previous.steps)
    spec = pool.spec
    prompt = conductor_messages(text, spec, max_steps=spec.conductor.max_steps, previous=previous, show=spec.conductor.show)
    return DecisionRow(question.id, str(question.metadata.get("template", "")), verdict.line() if verdict else "no examples",
                       examples_failed(previous), correct, {name: tokens for name, (_, tokens) in outcomes.items()}, best, options[best].render(), prompt)


def summarize(rows: list[DecisionRow]) -> dict[str, Any]:
    """Counts: the best decisions, each fixed decision's right answers, the rule (revise when the examples fail) and the oracle."""
    n = len(rows)
    names = [o for o in OPTIONS if all(o in r.correct for r in rows)]
    fixed = {f"always_{o}": sum(r.correct[o] for r in rows) for o in names}
    rule = sum(r.correct["revise" if r.failed else "accept"] for r in rows)
    oracle = sum(any(r.correct.values()) for r in rows)
    accept = [int(r.correct["accept"]) for r in rows]
    gain, low, high = paired_bootstrap([int(any(r.correct.values())) for r in rows], accept) if rows else (0.0, 0.0, 0.0)
    return {"questions": n, "best": dict(Counter(r.best for r in rows)), **fixed, "revise_on_failed_examples": rule, "oracle": oracle,
            "oracle_gain_over_accept": oracle - fixed.get("always_accept", 0),
            "oracle_gain_points": f"{100 * gain:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]",
            "tokens": {o: sum(r.tokens[o] for r in rows) for o in names}}


async def decision_search(spec: PoolSpec, task: Task, *, coder: Optional[str] = None, escalate_to: Optional[str] = None,
                          replay: Optional[Path] = None, out: Optional[Path] = None, seed: int = 0) -> tuple[list[DecisionRow], dict]:
    """Every question of ``task`` searched in turn (a small pool answers one call at a time anyway); rows appended to ``out``."""
    first = worker_index(spec, coder)
    order = [i for i in strength_order(spec) if i != first]
    other = worker_index(spec, escalate_to) if escalate_to is not None else (order[0] if order else None)
    cache = ResponseCache(replay, match="context") if replay else None
    rows: list[DecisionRow] = []
    async with Pool(spec.for_execution(), cache) as pool:
        for question in task.questions:
            row = await search_question(task, question, pool, first, other, seed)
            rows.append(row)
            if out is not None:
                with out.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(asdict(row)) + "\n")
    if cache is not None:
        cache.close()
    return rows, summarize(rows)


def run_search(spec: PoolSpec, task: Task, **options: Any) -> tuple[list[DecisionRow], dict]:
    return asyncio.run(decision_search(spec, task, **options))
