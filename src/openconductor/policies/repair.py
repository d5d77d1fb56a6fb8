"""A fixed workflow that looks once: run the question's examples, repair once on failure (``--policy repair``).

The coder answers the question as ``single`` asks it (the same step, so a replayed run shares its first call). The
round then asks for review (``Plan.review``): the executor has run the program on the examples the question itself
gives (``evidence.py``). If it reproduces all of them, or the question gives none, the answer is accepted. If not,
the coder gets one repair step whose instruction names what failed (the example, what the program returned or
raised; or that it did not load, or that there was no program); its reply is the answer unless it does worse on the
examples than the program it repairs (it does not load, or reproduces fewer; ``keep_better=false`` takes it anyway).
The failing program is shown back only with ``show_program=true``. ``escalate_to=WORKER``: the repair step goes to that
worker (a stronger coder) instead of the coder, with the same instruction: "escalate on failure".

A baseline for a conductor that decides after the first round: the same decision, made by a rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..records import PlanRecord, StepRecord
from ..verdicts import ExamplesVerdict, clip
from ..workflow import Step, Workflow
from .base import Plan, PlanRequest, Policy, PolicyOptions, WorkerRef, register_policy
from ..workflow.wordings import SOLVE
from .baselines import worker_index

if TYPE_CHECKING:
    from ..pool import PoolSpec

MAX_PROGRAM_CHARS = 4000  # the program shown back to the coder (a runaway reply is cut, not pasted whole)
FAILURES_SHOWN = 2


def _last_examples(steps: list[StepRecord]) -> tuple[Optional[StepRecord], Optional[ExamplesVerdict]]:
    """The latest step whose program was checked against the question's examples, with its verdict."""
    for step in reversed(steps):
        if step.verdict is not None and step.verdict.examples is not None:
            return step, step.verdict.examples
    return None, None


def what_failed(verdict: ExamplesVerdict) -> str:
    """The failure as the repair instruction states it."""
    name = verdict.entry_point
    if not verdict.program:
        return f"An earlier reply did not contain a complete Python function named {name}."
    if verdict.load_error is not None:
        return f"An earlier program for {name} does not run: {clip(verdict.load_error, 300)}."
    shown = [f"- {clip(r.describe(), 300)}" for r in verdict.failures[:FAILURES_SHOWN]]
    return (f"An earlier program for {name} reproduces {verdict.passed} of the {verdict.total} examples in the task. "
            "It fails on:\n" + "\n".join(shown))


def repair_subtask(verdict: ExamplesVerdict, program: str, show_program: bool = False) -> str:
    """The one repair step's instruction: what failed, with ``show_program`` the program, and what to reply with.
    Without the program by default: shown its own program, the 0.5B coder copied it back unchanged in each of the
    first three HumanEval problems it failed (100-102)."""
    from ..graders.code_grade import extract_code

    code = extract_code(program, verdict.entry_point)[:MAX_PROGRAM_CHARS] if show_program and verdict.program else ""
    shown = f"\n\nThat program:\n```python\n{code}\n```\n\nFind the mistake and fix it." if code.strip() else ""
    # Short on purpose: a reply that repeats the docstring and adds test prints is what max_tokens cuts.
    return (f"{what_failed(verdict)}{shown}\n\nWrite {verdict.entry_point} again so that it gives the expected results. "
            "Reply with the whole function (signature included, no docstring, no tests) in one ```python code block.")


class RepairOptions(PolicyOptions):
    positional = "coder"
    worker_options = ("coder", "escalate_to")
    coder: Optional[WorkerRef] = None  # default: the pool's strongest worker
    escalate_to: Optional[WorkerRef] = None  # who repairs a failing program (default: the coder itself)
    show_program: bool = False  # show the failing program in the repair step (a small coder tends to copy it back)
    keep_better: bool = True  # a repair that does worse on the examples (fewer reproduced, or does not load) is not taken


@register_policy("repair")
class RepairOnce(Policy):
    """The coder answers; if its program fails the question's own examples, it repairs once (module docstring)."""

    Options = RepairOptions

    def __init__(self, coder: Optional[str | int] = None, show_program: bool = False, keep_better: bool = True,
                 escalate_to: Optional[str | int] = None):
        self.coder, self.show_program, self.keep_better, self.escalate_to = coder, show_program, keep_better, escalate_to
        self.name = ("repair" if coder is None else f"repair:{coder}") + ("" if escalate_to is None else f">{escalate_to}")

    def _coder(self, spec: "PoolSpec") -> int:
        return worker_index(spec, self.coder)

    async def plan(self, request: PlanRequest) -> Plan:
        coder = self._coder(request.pool.spec)
        if request.previous is None:
            workflow = Workflow((Step(coder, SOLVE, ()),), reasoning="the coder answers; its program is run on the question's examples")
            return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()), review=True)
        step, verdict = _last_examples(request.previous.steps)
        if step is None or verdict is None or verdict.all_passed or verdict.unavailable is not None:
            why = "no examples to run" if verdict is None else verdict.line()
            workflow = Workflow((), reasoning=f"accept: {why}")
        else:
            fixer = coder if self.escalate_to is None else worker_index(request.pool.spec, self.escalate_to)
            how = "repair once" if self.escalate_to is None else "escalate"
            workflow = Workflow((Step(fixer, repair_subtask(verdict, step.output, self.show_program), ()),), reasoning=f"{how}: {verdict.line()}")
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()), keep_better=self.keep_better)
