"""Numeric answers (RLPR style): relative tolerance, percent/currency, separators, units, 1e5, ×10^5."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from .base import Grade, GraderError, register_grader
from .extract import answer_phrase, final_segment, last_boxed

_MULTIPLIERS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}

# Possessive quantifiers, and a match may only start where a number, sign or currency can: a long run of
# spaces or signs is scanned once, not once per position.
_NUMBER = re.compile(
    r"(?=[-−+$€£¥₹.\dUEG])(?P<sign>[-−+])?\s*+(?P<cur>US\$|USD|EUR|GBP|[$€£¥₹])?\s*+(?P<sign2>[-−])?"
    r"(?P<mant>(?:\d{1,3}(?:,\d{3})++|\d++)(?:\.\d++)?|\.\d++)"
    r"(?:\s*+[eE](?P<exp>[-+−]?\d++)|\s*+(?:\\times|\\cdot|×|\*|x)\s*+10\s*+\^\s*+\{?\s*+(?P<exp2>[-+−]?\d++)\s*+\}?)?"
    r"(?:\s*+/\s*+(?P<den>\d++(?:\.\d++)?)(?![\d.]))?"
    r"(?P<pct>\s*+(?:%|percent\b|per\s*+cent\b))?"
    r"(?:\s*+(?P<mult>thousand|million|billion|trillion)\b)?",
    re.I,
)


@dataclass
class Number:
    value: float
    percent: bool
    text: str

    def readings(self) -> list[float]:
        """A percent can mean its fraction (45% = 0.45) or its number (45)."""
        return [self.value / 100.0, self.value] if self.percent else [self.value]


def _clean(text: str) -> str:
    s = text.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",").replace("\\!", "").replace("−", "-")
    s = re.sub(r"\\[dt]?frac\s*+\{\s*+([-\d.]++)\s*+\}\s*+\{\s*+([\d.]++)\s*+\}", r"\1/\2", s)
    s = re.sub(r"\\(?:text|mathrm|textbf)\s*+\{([^{}]*+)\}", r"\1", s)
    s = re.sub(r"(?<=\d)\\?\s(?=\d{3}\b)", "", s)  # thin-space thousands: 1\ 000 / 1 000
    return s


def parse_numbers(text: str) -> list[Number]:
    out: list[Number] = []
    for m in _NUMBER.finditer(_clean(text)):
        try:
            value = float(m.group("mant").replace(",", ""))
        except ValueError:
            continue
        exp = m.group("exp") or m.group("exp2")
        if exp:
            value *= 10.0 ** int(exp.replace("−", "-"))
        if m.group("den"):
            den = float(m.group("den"))
            if den == 0:
                continue
            value /= den
        if m.group("mult"):
            value *= _MULTIPLIERS[m.group("mult").lower()]
        if m.group("sign") in ("-", "−") or m.group("sign2"):
            value = -value
        out.append(Number(value, bool(m.group("pct")), m.group(0).strip()))
    return out


def extract_number(response: str) -> Optional[Number]:
    """The number in \\boxed{} / after "the answer is" (its first number), else the reply's last number."""
    seg = final_segment(response)
    for part in (last_boxed(seg), answer_phrase(seg)):
        if part:
            found = parse_numbers(part)
            if found:
                return found[0]
    found = parse_numbers(seg)
    return found[-1] if found else None


def _reference(reference: Any) -> Number:
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        if not math.isfinite(reference):
            raise GraderError(f"numeric reference must be finite, got {reference!r}")
        return Number(float(reference), False, repr(reference))
    if isinstance(reference, str):
        found = parse_numbers(reference)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise GraderError(f"numeric reference {reference!r} holds {len(found)} numbers; give exactly one")
    raise GraderError(f"numeric reference must be a number or a string with one number (e.g. '45%', '$1,200'), got {reference!r}")


@register_grader("numeric")
def grade_numeric(
    response: str, reference: Any, *, rel_tol: float = 1e-3, abs_tol: float = 1e-9, fallback_exact: bool = False
) -> Grade:
    """1.0 if the extracted number is within ``rel_tol`` (relative) or ``abs_tol`` of the reference.

    ``fallback_exact=True`` (RLPR, whose references are sometimes words) grades a reference that is
    not one number by normalised exact match instead of raising GraderError.
    """
    if rel_tol < 0 or abs_tol < 0:
        raise GraderError("rel_tol and abs_tol must be >= 0")
    try:
        ref = _reference(reference)
    except GraderError:
        if not fallback_exact or not isinstance(reference, str):
            raise
        from .exact import grade_exact

        return grade_exact(response, reference)
    got = extract_number(response)
    if got is None:
        return Grade(0.0, None, "no number found in the response")
    for a in got.readings():
        for b in ref.readings():
            if math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol):
                how = "" if (a == got.value and b == ref.value) else " (percent read as a fraction)"
                return Grade(1.0, got.text, f"{a:g} ≈ {b:g} within rel_tol={rel_tol:g}{how}")
    return Grade(0.0, got.text, f"{got.value:g} is not within rel_tol={rel_tol:g} of {ref.value:g}")
