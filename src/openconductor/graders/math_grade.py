"""Math answers (MATH500 style): math-verify first, then LaTeX normalisation and exact match."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Optional

from ._mathworker import MathVerifyTimeout, verify
from .base import Grade, GraderError, register_grader
from .extract import answer_phrase, brace_pairs, final_segment, last_boxed

# ------------------------------------------------------------------------------------ normalisation

_DROP = [
    r"\left", r"\right", r"\!", r"\,", r"\;", r"\:", r"\ ", r"\displaystyle", r"\limits",
    "$", r"\(", r"\)", r"\[", r"\]",
]  # fmt: skip
_UNIT_WORDS = r"(?:degrees?|units?|cm|meters?|m|km|inches|inch|feet|ft|dollars?|cents?|sq|square|hours?|minutes?|seconds?|mph)"
_TRAILING_UNIT = re.compile(r"(?<!\s)\s++" + _UNIT_WORDS + r"\Z")


def _unwrap(text: str, command: str) -> str:
    """Replace ``\\command{x}`` by ``x`` (nested braces kept); stops at the first unbalanced one."""
    out, i = [], 0
    pairs: Optional[dict[int, int]] = None
    pattern = re.compile(r"\\" + command + r"\s*+\{")
    while m := pattern.search(text, i):
        pairs = brace_pairs(text) if pairs is None else pairs
        close = pairs.get(m.end() - 1)
        if close is None:
            break
        out += [text[i : m.start()], text[m.end() : close]]
        i = close + 1
    out.append(text[i:])
    return "".join(out)


def normalize_math(text: str) -> str:
    """A canonical string for exact matching; the fallback when math-verify cannot decide."""
    s = text.strip()
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed
    for cmd in ("text", "textbf", "mathrm", "mathbf", "mbox", "operatorname"):
        s = _unwrap(s, cmd)
    for token in _DROP:
        s = s.replace(token, "")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\%", "").replace("%", "")
    s = re.sub(r"\\frac\s*+(\d)\s*+(\d)", r"\\frac{\1}{\2}", s)  # \frac12
    s = re.sub(r"\\frac\s*+\{([^{}]*+)\}\s*+(\d)", r"\\frac{\1}{\2}", s)  # \frac{1}2
    s = re.sub(r"\\sqrt\s*+(\d++)", r"\\sqrt{\1}", s)  # \sqrt2
    s = re.sub(r"^\s*+[a-zA-Z]\s*+=\s*+", "", s)  # x = 5 -> 5 (a single-variable answer)
    s = s.rstrip()
    unit = _TRAILING_UNIT.search(s)  # one search from the end's side: "\s+UNIT\s*$" rescans every space
    if unit:
        s = s[: unit.start()]
    s = re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", s)  # 1,000 -> 1000
    s = re.sub(r"\s++", "", s)
    s = s.rstrip(".")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)  # .5 -> 0.5
    if re.fullmatch(r"-?\d++\.\d++", s):
        s = s.rstrip("0").rstrip(".")  # 2.50 -> 2.5, 5.0 -> 5
    return s


def as_number(text: str) -> Optional[Fraction]:
    """Exact value of a normalised simple number: 3, -0.25, 1/2, \\frac{1}{2}, -\\frac{3}{4}."""
    s = text
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}", s)
    if m:
        s = f"{m.group(1)}{m.group(2)}/{m.group(3)}"
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?:/(-?\d+(?:\.\d+)?))?", s)
    if not m:
        return None
    try:
        value = Fraction(m.group(1))
        if m.group(2) is not None:
            value /= Fraction(m.group(2))
        return value
    except (ValueError, ZeroDivisionError):
        return None


def extract_math_answer(response: str) -> Optional[str]:
    """The answer expression: last \\boxed{} in the last <answer> block, else "the answer is ...",
    else a short one-line reply itself; None when only a long explanation is left."""
    seg = final_segment(response)
    boxed = last_boxed(seg)
    if boxed is not None:
        return boxed
    phrase = answer_phrase(seg)
    if phrase is not None:
        return phrase
    lines = [line for line in seg.strip().splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) <= 80:
        return lines[0].strip().strip("$").strip()
    return None


# ------------------------------------------------------------------------------------------- grader


def _reference(reference: Any) -> str:
    if isinstance(reference, (int, float, Fraction)) and not isinstance(reference, bool):
        return str(reference)
    if not isinstance(reference, str) or not reference.strip():
        raise GraderError(
            f"math reference must be a non-empty LaTeX/number string such as '\\frac{{1}}{{2}}' or '42', got {reference!r}"
        )
    ref = reference.strip()
    boxed = last_boxed(ref)
    return boxed if boxed is not None else ref


@register_grader("math")
def grade_math(response: str, reference: Any, *, timeout_s: float = 5.0, use_math_verify: bool = True) -> Grade:
    """Correct if math-verify proves the answers equal, or their normalised forms / values match."""
    ref = _reference(reference)
    extracted = extract_math_answer(response)
    if not response.strip():
        return Grade(0.0, None, "empty response")
    note = ""
    if use_math_verify:
        # Boxing the extracted answer makes math-verify take exactly it; with no extraction it searches
        # the whole reply itself (its own last-expression heuristics).
        pred = f"$\\boxed{{{extracted}}}$" if extracted is not None else final_segment(response)
        try:
            reply = verify(ref, pred, timeout_s)
        except MathVerifyTimeout:
            reply = None
            note = f"math-verify exceeded {timeout_s:g} s (worker killed); "
        except RuntimeError as exc:
            reply = None
            note = f"math-verify unavailable ({exc}); "
        if reply is not None:
            if reply["ok"]:
                return Grade(1.0, extracted or reply.get("pred"), "math-verify: equivalent")
            if reply.get("error"):
                note = f"math-verify: {reply['error']}; "
            else:
                note = "math-verify: not equivalent; "
            if extracted is None and reply.get("pred"):
                extracted = reply["pred"]
    if extracted is None:
        return Grade(0.0, None, note + "no answer found (no <answer>, \\boxed{} or 'the answer is')")
    got, want = normalize_math(extracted), normalize_math(ref)
    if got == want:
        return Grade(1.0, extracted, note + "normalised exact match")
    a, b = as_number(got), as_number(want)
    if a is not None and b is not None and a == b:
        return Grade(1.0, extracted, note + "equal numeric value")
    return Grade(0.0, extracted, note + f"normalised {got!r} != {want!r}")
