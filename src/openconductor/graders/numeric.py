"""Numeric answers (RLPR / GSM8K style): the stated answer read as one whole expression, within a tolerance."""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from .base import Grade, GraderError, register_grader
from .final_answer import final_answers, judge, unstated_reply
from .statement import refusal
from .numexpr import Side, Unreadable, read_number

# With no explicit answer, the reply's last sentence that holds a digit is read (". " ends a sentence;
# "3.5" and "5!" do not).
_SENTENCE = re.compile(r"(?<=[.?])\s++")


def _readings(side: Side) -> list[float]:
    """A percent can mean its fraction (45% = 0.45) or its number of percent (45)."""
    return [side.value / 100.0, side.value] if side.percent else [side.value]


def _reference(reference: Any) -> Side:
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        if not math.isfinite(reference):
            raise GraderError(f"numeric reference must be finite, got {reference!r}")
        return Side(float(reference))
    if isinstance(reference, str):
        try:
            sides = read_number(reference)
        except Unreadable as exc:
            raise GraderError(
                f"numeric reference {reference!r} is not one number ({exc}); give exactly one number, e.g. '45%', '$1,200'"
            ) from None
        if len(sides) == 1:
            return sides[0]
        raise GraderError(f"numeric reference {reference!r} is an equation; give exactly one number")
    raise GraderError(f"numeric reference must be a number or a string with one number (e.g. '45%', '$1,200'), got {reference!r}")


def _last_sentence(seg: str) -> Optional[str]:
    """The reply's last sentence with a digit in it, for a reply that states no explicit answer."""
    for line in reversed(seg.splitlines()):
        if any(ch.isdigit() for ch in line):
            for sentence in reversed(_SENTENCE.split(line)):
                if any(ch.isdigit() for ch in sentence):
                    return sentence.strip()
    return None


def _match(text: str, ref: Side, rel_tol: float, abs_tol: float) -> Grade:
    """Grade one stated answer: every side of it must be within tolerance of the reference."""
    try:
        sides = read_number(text)
    except Unreadable as exc:
        return Grade(0.0, text.strip()[:200], f"not read as one number: {exc}")
    notes = set()
    for side in sides:
        hit = next(((a, b) for a in _readings(side) for b in _readings(ref) if math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)), None)
        if hit is None:
            return Grade(0.0, text.strip()[:200], f"{side.value:g} is not within rel_tol={rel_tol:g} of {ref.value:g}")
        if hit != (side.value, ref.value):
            notes.add(" (percent read as a fraction)")
    value = sides[-1].value
    return Grade(1.0, text.strip()[:200], f"{value:g} ≈ {ref.value:g} within rel_tol={rel_tol:g}{''.join(notes)}")


@register_grader("numeric")
def grade_numeric(
    response: str, reference: Any, *, rel_tol: float = 1e-3, abs_tol: float = 1e-9, fallback_exact: bool = False
) -> Grade:
    """1.0 if the stated answer, read as a whole expression, is within ``rel_tol`` (relative) or
    ``abs_tol`` of the reference; every stated final answer must be (openconductor.graders.final_answer).

    ``fallback_exact=True`` (RLPR, whose references are sometimes words) grades a reference that is
    not one number by normalised exact match instead of raising GraderError.
    """
    if not (rel_tol >= 0 and abs_tol >= 0):
        raise GraderError("rel_tol and abs_tol must be >= 0")
    try:
        ref = _reference(reference)
    except GraderError:
        if not fallback_exact or not isinstance(reference, str):
            raise
        from .exact import grade_exact

        return grade_exact(response, reference)
    statements = final_answers(response, reference=reference)
    if statements:
        return judge(statements, lambda s: _match(s.text, ref, rel_tol, abs_tol), key=_value_key)
    seg, why = unstated_reply(response)
    sentence = _last_sentence(seg)
    if sentence is None:
        return Grade(0.0, None, "no number found in the response")
    why = why or refusal(sentence, reference)
    if why:
        return Grade(0.0, None, why)
    return _match(sentence, ref, rel_tol, abs_tol)


def _value_key(g: Grade) -> Any:
    """Two stated answers agree when they read as the same values."""
    if g.extracted is None:
        return None
    try:
        return tuple(round(s.value, 9) for s in read_number(g.extracted))
    except Unreadable:
        return g.extracted

