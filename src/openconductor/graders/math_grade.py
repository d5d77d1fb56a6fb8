"""Math answers (MATH500 style): math-verify first, then LaTeX normalisation and exact match.

The stated answer is found by the one rule (:mod:`.final_answer`); it must be one value
(:mod:`.math_sides`: math-verify alone reads ``3 \\vee 5`` or ``3 = 5`` as 5) before it is compared.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction
from typing import Any, Optional

from ._mathworker import MathVerifyTimeout, verify
from .base import Grade, GraderError, register_grader
from .extract import brace_pairs, last_boxed
from .final_answer import final_answers, judge, unstated_reply
from .math_sides import answer_sides, plain
from .numexpr import Unreadable, read_number
from .statement import refusal

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


def _bare_answer(seg: str) -> Optional[str]:
    """A reply that states no explicit answer: a short one-line reply is the answer itself."""
    lines = [line for line in seg.splitlines() if line.strip()]
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


class _Verifier:
    """math-verify for one grade, all its calls within one ``timeout_s`` budget."""

    def __init__(self, timeout_s: float, enabled: bool) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s, self.enabled, self.note = timeout_s, enabled, ""

    def __call__(self, ref: str, pred: str) -> Optional[dict]:
        left = self.deadline - time.monotonic()
        if not self.enabled or left <= 0:
            return None
        try:
            return verify(ref, pred, left)
        except MathVerifyTimeout:
            self.note = f"math-verify exceeded {self.timeout_s:g} s (worker killed); "
        except RuntimeError as exc:
            self.note = f"math-verify unavailable ({exc}); "
        self.enabled = False
        return None


def _equal(side: str, ref: str, mv: _Verifier) -> tuple[bool, str]:
    """Is one value equal to the reference: math-verify, else normalised text or exact fraction."""
    reply = mv(ref, f"$\\boxed{{{side}}}$")  # boxed: math-verify takes exactly this expression
    if reply is not None and reply["ok"]:
        return True, "math-verify: equivalent"
    note = mv.note
    if reply is not None:
        note = f"math-verify: {reply['error']}; " if reply.get("error") else "math-verify: not equivalent; "
    got, want = normalize_math(side), normalize_math(ref)
    if got == want:
        return True, note + "normalised exact match"
    a, b = as_number(got), as_number(want)
    if a is not None and b is not None and a == b:
        return True, note + "equal numeric value"
    if _same_number(side, ref):
        return True, note + "equal value as one number (1.2 \\times 10^{3} = 1200)"
    return False, note + f"normalised {got!r} != {want!r}"


# Digits, a decimal point, signs, powers and "\times" / "\cdot": a number in scientific notation, no words.
_NOTATION = re.compile(r"(?:[\d\s.+\-^{}()eE*]|\\times|\\cdot)*+")


def _same_number(side: str, ref: str) -> bool:
    """Both are one number written out ("1.2 \\cdot 10^{3}", "1.2e3", "1200") and of equal value: the
    fallback's check where math-verify is off or gave up. Words are not read here ("about 1200")."""
    if not (_NOTATION.fullmatch(side) and _NOTATION.fullmatch(ref)):
        return False
    try:
        got, want = read_number(side), read_number(ref)
    except Unreadable:
        return False
    if len(got) != 1 or len(want) != 1 or got[0].percent or want[0].percent:
        return False
    return abs(got[0].value - want[0].value) <= 1e-12 * max(1.0, abs(want[0].value))


def _grade_answer(answer: str, ref: str, mv: _Verifier) -> Grade:
    """One stated answer against the reference: it must be one value, and every side of it equal."""
    sides, why = answer_sides(plain(answer), plain(ref))
    if why is not None:
        return Grade(0.0, answer, why)
    reasons = []
    for side in sides:
        ok, reason = _equal(side, plain(ref), mv)
        if not ok:
            return Grade(0.0, answer, reason if len(sides) == 1 else f"{side!r} of {answer!r}: {reason}")
        reasons.append(reason)
    return Grade(1.0, answer, reasons[-1] + (f" (all {len(sides)} sides of the equation)" if len(sides) > 1 else ""))


@register_grader("math")
def grade_math(response: str, reference: Any, *, timeout_s: float = 5.0, use_math_verify: bool = True) -> Grade:
    """Correct if the stated answer is one value that math-verify proves equal to the reference, or
    whose normalised form / exact value matches; every stated final answer must be."""
    ref = _reference(reference)
    if not response.strip():
        return Grade(0.0, None, "empty response")
    mv = _Verifier(timeout_s, use_math_verify)
    statements = final_answers(response, reference=ref)
    if statements:
        return judge(statements, lambda s: _grade_answer(s.text, ref, mv))
    seg, unstated = unstated_reply(response)
    if unstated:
        return Grade(0.0, None, unstated)
    answer, said = _bare_answer(seg), None
    if answer is None:
        # No explicit answer: math-verify picks the reply's last expression, and that is graded as one.
        reply = mv(ref, seg) if seg else None
        answer = reply.get("pred") if reply is not None else None
        said = seg.splitlines()[-1] if seg else None  # the qualifiers around it are on the reply's last line
    if not answer:
        return Grade(0.0, None, mv.note + "no answer found (no <answer>, \\boxed{} or 'the answer is')")
    why = refusal(answer, ref) or (refusal(said, ref) if said else None)
    return Grade(0.0, None, why) if why else _grade_answer(answer, ref, mv)
