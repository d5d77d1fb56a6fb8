"""Is a math answer one value? The check the math grader makes before math-verify sees an answer.

math-verify reads an expression it does not understand as its last part: ``3 \\vee 5``, ``3 \\implies 5``,
``3 \\curlyvee 5``, ``3, \\ldots, 5`` and ``3 = 5`` all "equal" 5. So an answer may use only the marks
that build one value (an allowlist: numbers, variables, arithmetic, fractions, roots, powers,
functions, Greek letters, intervals, inequalities) plus any mark the reference itself uses (a union
of intervals, a ``\\pm``, a matrix); any other mark is refused. An equation (``=``, ``\\approx``,
``\\equiv``, ``\\in`` …) states each of its sides: after a leading label ("x = 5", "f(2) = 5") every
side must equal the reference. A percent sign is dropped on both sides, as MATH's own normalisation
does (``5\\%`` is 5, never 0.05).
"""

from __future__ import annotations

import re
from typing import Optional

from .extract import unicode_to_latex

__all__ = ["answer_sides", "plain"]

# LaTeX commands that build one value (or only space or style it).
_VALUE_COMMANDS = frozenset(
    "frac dfrac tfrac cfrac sqrt cdot times div pi infty degree prime left right big Big bigg Bigg "
    "displaystyle textstyle text textbf textrm textit mathrm mathbf mathit mbox operatorname boldsymbol mathbb "
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp lg max min gcd lcm det "
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi omicron rho "
    "varrho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega "
    "binom dbinom tbinom overline bar hat vec tilde dot ddot le leq ge geq lt gt neq ne emptyset varnothing "
    "lfloor rfloor lceil rceil deg ell mathcal mathsf mathtt".split()
)  # fmt: skip
_VALUE_SYMBOLS = frozenset("+-*/^_()[]{},.!'<>=~$") | frozenset("π√×·÷−≤≥∞′") | {"\\" + c for c in ",;:! {}%$"}
# Words that join several values ("3 or 5"); "and" and ";" also list the values of a list reference.
_JOIN_WORDS = re.compile(r"(?i:\b(?:or|and|either)\b)")
_LIST_MARKS = {";", "and"}
# Relations that state each of their sides.
_EQUALS = re.compile(r":=|==|\\(?:approx|equiv|sim|simeq|cong|coloneqq|doteq|in)(?![A-Za-z])|(?<![<>!=\\])=(?!=)")
_MARK = re.compile(r"\\[A-Za-z]++|\\.|[^\w\s]", re.S)
_PERCENT = re.compile(r"\\?%")
_DEGREES = re.compile(r"\^\s*+\{?\s*+\\circ\s*+\}?|°")
_COMMAND = re.compile(r"\\[A-Za-z]++")


# "1.2e3", "1.2E+3": scientific notation, which math-verify reads as 1.2 times e times 3.
_SCIENTIFIC = re.compile(r"(?<![\w\\.])(\d++(?:\.\d++)?)[eE]([-+]?\d++)(?![\w.])")


def plain(text: str) -> str:
    """The answer as math-verify will read it: Unicode super/subscripts and fractions as LaTeX, no percent
    or degree sign (a unit: ``90^\\circ`` is 90), scientific notation as ``\\times 10^{k}``."""
    text = _SCIENTIFIC.sub(lambda m: f"{m.group(1)}\\times10^{{{m.group(2).lstrip('+')}}}", text)
    return _DEGREES.sub("", _PERCENT.sub("", unicode_to_latex(text))).strip()


def _marks(text: str) -> set[str]:
    """Every command and symbol of ``text``, and the joining words it uses."""
    found = {m.group() for m in _MARK.finditer(text)} | {m.group().lower() for m in _JOIN_WORDS.finditer(text)}
    return found


def _foreign(answer: str, ref: str) -> set[str]:
    """Marks of ``answer`` that neither build one value nor appear in the reference."""
    ref_marks = _marks(ref) | (_LIST_MARKS if "," in ref else set())
    out = set()
    for mark in _marks(answer) - ref_marks:
        if mark.startswith("\\") and mark[1:] in _VALUE_COMMANDS or mark in _VALUE_SYMBOLS or _EQUALS.fullmatch(mark):
            continue
        out.add(mark)
    return out


def _top_level_split(text: str, pattern: re.Pattern) -> list[str]:
    """``text`` split at ``pattern`` where it is outside every brace, bracket and parenthesis."""
    parts, depth, start = [], 0, 0
    for m in re.finditer(r"[{}()\[\]]|" + pattern.pattern, text):
        if m.group() in ("{", "(", "["):
            depth += 1
        elif m.group() in ("}", ")", "]"):
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(text[start : m.start()])
            start = m.end()
    parts.append(text[start:])
    return parts


def answer_sides(answer: str, ref: str) -> tuple[list[str], Optional[str]]:
    """The values ``answer`` states, each to be checked against ``ref`` (both :func:`plain`), or
    (no values, why the answer is not one value)."""
    foreign = _foreign(answer, ref)
    if foreign:
        shown = ", ".join(sorted(foreign))
        return [], f"the answer uses {shown}, which the reference does not: not read as one value"
    if _EQUALS.search(ref):
        return [answer], None
    sides = [side.strip() for side in _top_level_split(answer, _EQUALS)]
    if len(sides) > 1 and re.search(r"[A-Za-z]", _COMMAND.sub("", sides[0])):
        sides = sides[1:]  # "x = 5", "f(2) = 5": a label, then the value
    if not all(sides):
        return [], "an equation with an empty side"
    return sides, None
