"""What a round produced, as a recursive round reads it: one typed verdict per step (``StepRecord.verdict``).

Only the question and the workers' own output go into a verdict (``evidence.py`` computes them): a tool step's
exit status and error, whether a program reproduces the examples the question itself gives, whether two answers
agree. Nothing of the grader's hidden tests or reference answer, which the executor never holds.

This module depends on pydantic alone, so ``records`` can hold verdicts without an import cycle.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field

SHOWN_CHARS = 120  # a verdict's line quotes at most this much of an error, an output or an example


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """One line of at most ``limit`` characters: a prompt line stays a line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ToolVerdict(BaseModel):
    """A tool step (the python worker): how its program ended and what it printed."""

    status: str  # the tool's own word: ok, error, empty, or a sandbox status (timeout, memory, ...)
    exit_code: Optional[int] = None
    timed_out: bool = False
    error_tail: list[str] = Field(default_factory=list)  # the last lines of stderr (the exception's own last)
    printed: str = ""  # what it printed (cut)

    def line(self) -> str:
        if self.status == "ok":
            return f"program ran, printed: {clip(self.printed, 60)}"
        if self.timed_out or self.status == "timeout":
            return "program timed out" + (f" after printing: {clip(self.printed, 40)}" if self.printed.strip() else "")
        if self.status == "empty":
            return "program ran but printed nothing"
        last = self.error_tail[-1] if self.error_tail else f"exit code {self.exit_code}" if self.exit_code is not None else self.status
        return f"error: {clip(last)}"


class ExampleResult(BaseModel):
    """One example of the question run against a step's program."""

    call: str  # the call as the question writes it, e.g. "make_a_pile(3)"
    expected: str  # as the question writes it
    passed: bool
    got: Optional[str] = None  # repr of what the program returned (None when it raised)
    error: Optional[str] = None  # what it raised, or why the example could not run

    def describe(self) -> str:
        """The failing example as a repair instruction names it."""
        outcome = f"raised {self.error}" if self.error else f"returned {self.got}"
        return f"{self.call} should return {self.expected}, but it {outcome}"


class ExamplesVerdict(BaseModel):
    """How many of the question's own examples a step's program reproduces."""

    entry_point: str
    total: int  # examples found in the question
    passed: int = 0
    program: bool = True  # the step's reply holds a program that defines ``entry_point``
    load_error: Optional[str] = None  # the program did not load (a syntax error, a missing import, a reply cut short)
    results: list[ExampleResult] = Field(default_factory=list)
    unavailable: Optional[str] = None  # the sandbox could not run it here: nothing is known

    @property
    def all_passed(self) -> bool:
        return self.unavailable is None and self.program and self.load_error is None and self.passed == self.total

    @property
    def failures(self) -> list[ExampleResult]:
        return [r for r in self.results if not r.passed]

    def line(self) -> str:
        if self.unavailable is not None:
            return f"examples not run: {clip(self.unavailable, 60)}"
        if not self.program:
            return f"no program defining {self.entry_point}() in the reply"
        if self.load_error is not None:
            return f"program does not load: {clip(self.load_error)}"
        text = f"program ran: {self.passed}/{self.total} examples reproduced"
        failed = self.failures
        return text + (f"; first failure: {clip(failed[0].describe(), 100)}" if failed else "")


class Agreement(BaseModel):
    """Whether this step's answer agrees with an earlier step's."""

    step: int
    agrees: bool


class StepVerdict(BaseModel):
    """Everything a later round may read about one step. Empty fields: that check does not apply."""

    tool: Optional[ToolVerdict] = None
    examples: Optional[ExamplesVerdict] = None
    answer: Optional[str] = None  # the answer it states, normalised as the exact grader compares (None: none found)
    agreement: list[Agreement] = Field(default_factory=list)

    def line(self) -> str:
        """One compact line: what ran and how, and with whom the answer agrees."""
        parts = [v.line() for v in (self.tool, self.examples) if v is not None]
        if not parts:
            parts.append(f"answered: {clip(self.answer, 60)}" if self.answer else "answered")
        agree = [str(a.step) for a in self.agreement if a.agrees]
        differ = [str(a.step) for a in self.agreement if not a.agrees]
        if agree:
            parts.append("agrees with step " + ", ".join(agree))
        if differ:
            parts.append("differs from step " + ", ".join(differ))
        return "; ".join(parts)
