"""Exact string answers: normalised (case, whitespace, outer quotes/markup, final period) equality."""

from __future__ import annotations

import unicodedata
from typing import Any

from .base import Grade, GraderError, register_grader
from .extract import answer_phrase, final_segment, last_boxed, trim


def normalize_text(text: str, case_sensitive: bool = False) -> str:
    s = trim(unicodedata.normalize("NFKC", text), "*_`\"'“”‘’")
    s = s.rstrip(".!").strip()
    s = " ".join(s.split())
    return s if case_sensitive else s.casefold()


@register_grader("exact")
def grade_exact(response: str, reference: Any, *, case_sensitive: bool = False) -> Grade:
    """1.0 if the whole answer, its \\boxed{} or its "the answer is …" part equals a reference string.

    ``reference`` may be a list of accepted strings.
    """
    refs = reference if isinstance(reference, (list, tuple)) else [reference]
    if not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise GraderError(f"exact reference must be a non-empty string or a list of them, got {reference!r}")
    wanted = {normalize_text(r, case_sensitive) for r in refs}
    seg = final_segment(response)
    candidates = [seg, last_boxed(seg), answer_phrase(seg)]
    tried = [c for c in candidates if c]
    if not tried:
        return Grade(0.0, None, "empty response")
    for cand in tried:
        if normalize_text(cand, case_sensitive) in wanted:
            return Grade(1.0, cand.strip(), "normalised exact match")
    shown = tried[-1] if len(tried) > 1 else tried[0]
    return Grade(0.0, shown.strip()[:200], "no normalised exact match with the reference")
