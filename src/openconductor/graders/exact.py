"""Exact string answers: normalised (case, whitespace, outer quotes/markup, final period) equality."""

from __future__ import annotations

from typing import Any

from .base import Grade, GraderError, register_grader
from .extract import nfkc_keeping_numbers, trim
from .final_answer import final_answers, judge, unstated_reply
from .statement import refusal


def normalize_text(text: str, case_sensitive: bool = False) -> str:
    # NFKC folds look-alikes (full-width letters and digits) but keeps superscripts, subscripts and
    # vulgar fractions: "2⁵" must not become "25", nor "10²" "102".
    s = trim(nfkc_keeping_numbers(text), "*_`\"'“”‘’")
    s = s.rstrip(".!").strip()
    s = " ".join(s.split())
    return s if case_sensitive else s.casefold()


@register_grader("exact")
def grade_exact(response: str, reference: Any, *, case_sensitive: bool = False) -> Grade:
    """1.0 if the stated answer (its \\boxed{}, "Final answer: …", "the answer is …"; every one of them,
    see openconductor.graders.final_answer), or with none the whole reply, equals a reference string.

    ``reference`` may be a list of accepted strings.
    """
    refs = reference if isinstance(reference, (list, tuple)) else [reference]
    if not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise GraderError(f"exact reference must be a non-empty string or a list of them, got {reference!r}")
    wanted = {normalize_text(r, case_sensitive) for r in refs}

    def match(text: str) -> Grade:
        if normalize_text(text, case_sensitive) in wanted:
            return Grade(1.0, text.strip(), "normalised exact match")
        return Grade(0.0, text.strip()[:200], "no normalised exact match with the reference")

    statements = final_answers(response, reference="\n".join(refs))
    if statements:
        return judge(statements, lambda s: match(s.text), key=lambda g: normalize_text(g.extracted or "", case_sensitive))
    seg, why = unstated_reply(response)
    if not seg:
        return Grade(0.0, None, "empty response")
    why = why or refusal(seg, "\n".join(refs))
    return Grade(0.0, None, why) if why else match(seg)
