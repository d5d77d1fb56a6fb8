"""Each step's verdict (``verdicts.StepVerdict``), computed as the step finishes, and the lines a round is shown.

What goes in: the question as the workers see it, the step's own output and its tool's report, and the earlier
steps it could see. The grader's hidden tests and reference never reach the executor, so they cannot reach here.

* a tool step (the python worker): its status, exit code, timeout, stderr's last lines and what it printed;
* a code question with examples in its text (``question_examples``): how many of them the step's program
  reproduces, run in the sandbox;
* any answer: the answer it states, normalised as the exact grader compares answers, and whether it agrees with
  each earlier step it could see (two programs agree when they give the same results on the examples).
"""

from __future__ import annotations

import logging
from typing import Optional

from .question_examples import entry_point, parse_examples, run_examples
from .records import Run, StepRecord
from .verdicts import Agreement, ExamplesVerdict, StepVerdict, ToolVerdict, clip

log = logging.getLogger(__name__)

ERROR_LINES = 3  # stderr's last lines kept: the exception, and the line that raised it
ANSWER_TAIL = 1_000  # a reply's answer is read from its last characters: the statement rule's cost grows with the text


def tool_verdict(output: str, detail: dict) -> ToolVerdict:
    """The python tool's report: its ``detail`` and the ``[python: ...]``/``[stdout]``/``[stderr]`` parts of its text."""
    status = str(detail.get("status", "ok"))
    printed, stderr = output, ""
    if output.startswith("[python:"):
        head, _, rest = output.partition("\n")
        printed, _, stderr = rest.partition("[stderr]\n")
        printed = printed.removeprefix("[stdout]\n")
        if not stderr.strip():
            stderr = head  # no stderr: the header says why it ended ("timed out", "printed nothing")
        if status == "empty":
            printed = ""
    tail = [line for line in stderr.splitlines() if line.strip()][-ERROR_LINES:]
    return ToolVerdict(status=status, exit_code=detail.get("exit_code"), timed_out=bool(detail.get("timed_out")) or status == "timeout",
                       error_tail=[clip(line, 200) for line in tail], printed=clip(printed, 300))


def stated_answer(output: str) -> Optional[str]:
    """The answer a reply states, normalised as the exact grader compares them; None when it states none. Read from
    the reply's last ``ANSWER_TAIL`` characters, where an answer is stated: the statement rule's cost grows with
    the text, and this runs once per step."""
    from .graders.exact import normalize_text
    from .graders.final_answer import final_answers

    statements = final_answers(output[-ANSWER_TAIL:])
    return clip(normalize_text(statements[-1].text), 200) if statements else None


def _program_and_examples(question: str, output: str) -> tuple[Optional[str], list, str]:
    """(the question's entry point, its own examples, the reply's program defining it or ""): text work only."""
    from .graders.code_grade import _defines, extract_code

    entry = entry_point(question)
    examples = parse_examples(question, entry) if entry else []
    if entry is None or not examples:
        return entry, [], ""
    code = extract_code(output, entry)
    return entry, examples, code if code.strip() and _defines(code, entry) else ""


async def examples_of(question: str, output: str) -> Optional[ExamplesVerdict]:
    """How many of the question's own examples the reply's program reproduces; None where the question gives none."""
    # Text work only, in place: 4-15 ms for the hostile 900 KB question, where a thread would still hold the GIL.
    entry, examples, code = _program_and_examples(question, output)
    if entry is None or not examples:
        return None
    if not code:
        return ExamplesVerdict(entry_point=entry, total=len(examples), program=False)
    return await run_examples(code, entry, examples)


def _signature(verdict: StepVerdict) -> Optional[tuple]:
    """What two steps must share to agree: the results on the examples for programs, else the stated answer."""
    ex = verdict.examples
    if ex is not None and ex.program and ex.unavailable is None:
        return ("examples", ex.load_error, tuple((r.passed, r.got, r.error) for r in ex.results))
    if verdict.tool is not None:
        return ("answer", stated_answer(verdict.tool.printed)) if verdict.tool.status == "ok" and stated_answer(verdict.tool.printed) else None
    return ("answer", verdict.answer) if verdict.answer else None


async def step_verdict(question: str, record: StepRecord, visible: list[StepRecord], tool: bool) -> Optional[StepVerdict]:
    """The verdict of a finished step (None for one that failed: its error says why). Never raises: evidence is
    what a later round may read, not a reason for this one to fail."""
    if record.status != "ok":
        return None
    try:
        if tool:
            verdict = StepVerdict(tool=tool_verdict(record.output, record.detail))
        else:
            verdict = StepVerdict(examples=await examples_of(question, record.output), answer=stated_answer(record.output))
        mine = _signature(verdict)
        if mine is not None:
            for other in visible:
                theirs = _signature(other.verdict) if other.verdict is not None else None
                if theirs is not None and theirs[0] == mine[0]:
                    verdict.agreement.append(Agreement(step=other.index, agrees=theirs == mine))
        return verdict
    except Exception as exc:  # a check that breaks leaves the step as it was, and says so in the log
        log.warning("no verdict for step %d: %s: %s", record.index, type(exc).__name__, exc)
        return None


def _examples_score(steps: list[StepRecord]) -> Optional[tuple[int, int]]:
    """(the program loads, examples reproduced) of the last step whose program was run on the examples; None if none was."""
    for step in reversed(steps):
        ex = step.verdict.examples if step.verdict is not None and step.status == "ok" else None
        if ex is not None and ex.unavailable is None:
            loads = ex.program and ex.load_error is None
            return int(loads), ex.passed if loads else 0
    return None


def does_worse(revised: list[StepRecord], previous: list[StepRecord]) -> bool:
    """Whether a revision's program does worse on the question's examples than the one it revises: it does not load
    where that one did, or reproduces fewer. False where either was not run on examples (nothing is known)."""
    new, old = _examples_score(revised), _examples_score(previous)
    return new is not None and old is not None and new < old


def step_line(step: StepRecord) -> str:
    """One line for a step: its worker and verdict (or why it has none)."""
    if step.status != "ok":
        what = f"failed: {clip(step.error or step.status, 100)}"
    elif step.nested is not None:
        what = round_outcome(step.nested)
    elif step.verdict is not None:
        what = step.verdict.line()
    else:
        what = "answered"
    return f"step {step.index} ({step.worker_name}): {what}"


def evidence_lines(steps: list[StepRecord]) -> str:
    """The round as a recursive round's prompt shows it: one line per step."""
    return "\n".join(step_line(s) for s in steps)


def round_outcome(nested: Run) -> str:
    """What a recursive round decided: accepted, or revised with its steps."""
    if not nested.steps:
        return "recursive round accepted the answer"
    return f"recursive round revised it in {len(nested.steps)} step(s), {nested.status}"


def round_lines(run: Run, depth: int = 0) -> list[str]:
    """Each round of a run and its steps' verdicts, nested rounds indented (``conductor trace``)."""
    pad = "  " * depth
    lines = [f"{pad}round {depth}: {len(run.steps)} step(s), {run.status}"]
    for step in run.steps:
        lines.append(f"{pad}  {step_line(step)}")
        if step.nested is not None:
            lines += round_lines(step.nested, depth + 1)
    return lines
