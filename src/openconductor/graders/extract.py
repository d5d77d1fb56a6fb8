"""Pulling the answer out of an LLM's free text: \\boxed{}, "the answer is ...", input-size bounds.

Thinking and ``<answer>`` blocks follow the one rule of :mod:`openconductor.reply`. Everything here
is linear in its input: braces are matched in one pass, patterns use possessive quantifiers so they
cannot backtrack, and a grader reads at most the last :data:`MAX_ANSWER_CHARS` of an answer.
"""

from __future__ import annotations

import re
from typing import Optional

from ..reply import answer_block, final_segment as _final_segment, strip_think

__all__ = [
    "MAX_ANSWER_CHARS", "answer_block", "answer_phrase", "boxed_all", "brace_pairs", "final_segment",
    "last_boxed", "strip_think", "trim",
]  # fmt: skip

# An answer is at its end; a longer segment (after thinking is removed) is read from its last part.
# ~2,500 tokens: longer than any final answer, and short enough that no single regex call over it holds
# the GIL for more than a few milliseconds.
MAX_ANSWER_CHARS = 10_000

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*+(\{)?")
_BOXED_TAIL = re.compile(r"\s*+([^\s$]++)")
# "final answer", "the answer", "answer", then an optional verb and separator. Possessive: no backtracking.
_ANSWER_HEAD = re.compile(r"(?:final\s++answer|the\s++answer|answer)\s*+(?:is|:|=|would\s++be|should\s++be)?\s*+[:=]?\s*+", re.I)
_DOLLAR_MATH = re.compile(r"\$++([^$]++)\$++")
# (?<!\s): a match starts only at the first space of a run, so a long run is scanned once
_SENTENCE_END = re.compile(r"[.。!;](?:\s|$)|(?<!\s)\s++(?:because|since|as|so|which|where|given)\b")


def final_segment(response: str) -> str:
    """The part that holds the answer (see :func:`openconductor.reply.final_segment`), at most the last
    :data:`MAX_ANSWER_CHARS` characters of it."""
    return _final_segment(response)[-MAX_ANSWER_CHARS:]


def brace_pairs(text: str) -> dict[int, int]:
    """Index of every ``{`` → index of its matching ``}``, in one pass. A brace right after a
    backslash (``\\{``) is literal; unmatched braces are left out."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"(?<!\\)[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def boxed_all(text: str) -> list[str]:
    """Contents of every ``\\boxed{…}`` / ``\\fbox{…}`` (nested braces kept), and ``\\boxed 5``."""
    out: list[str] = []
    pairs: Optional[dict[int, int]] = None
    for m in _BOXED.finditer(text):
        if m.group(1):
            pairs = brace_pairs(text) if pairs is None else pairs
            close = pairs.get(m.end() - 1)
            if close is not None:
                out.append(text[m.end() : close].strip())
        else:
            tail = _BOXED_TAIL.match(text, m.end())
            if tail:
                out.append(tail.group(1))
    return out


def last_boxed(text: str) -> Optional[str]:
    found = boxed_all(text)
    return found[-1] if found else None


def answer_phrase(text: str) -> Optional[str]:
    """What follows the last "answer is" / "Answer:" (the last one on its line, too), without
    trailing punctuation or a justification ("5 because ...")."""
    found = None
    for head in reversed(list(_ANSWER_HEAD.finditer(text))):  # at most one blank rest per line: linear
        end = text.find("\n", head.end())
        rest = text[head.end() : end if end >= 0 else len(text)]
        if rest.strip():
            found = rest
            break
    if found is None:
        return None
    found = found.strip().strip("*").strip()
    math_span = _inline_math(found)
    if math_span is not None:  # "the answer is $\frac12$ since ..." -> the inline math
        return math_span.strip() or None
    # End at the sentence or the justification: "5. Let me check", "7 because ...". "3.5" stays whole.
    found = _SENTENCE_END.split(found, maxsplit=1)[0]
    return found.strip().strip("*").strip() or None


def _inline_math(text: str) -> Optional[str]:
    """The first ``$…$`` or ``\\(…\\)`` span's content (found with two scans, never a rescan)."""
    dollar = _DOLLAR_MATH.search(text)
    opened = text.find("\\(")
    closed = text.find("\\)", opened + 2) if opened >= 0 else -1
    if closed > opened + 2 and (dollar is None or opened < dollar.start()):
        return text[opened + 2 : closed]
    return dollar.group(1) if dollar else None


def trim(text: str, chars: str) -> str:
    """``text`` without leading and trailing whitespace and ``chars``, in linear time (unlike a
    ``[...]+$`` pattern, which rescans a long run from every position)."""
    edge = re.compile(rf"[\s{re.escape(chars)}]*+")
    head = edge.match(text).end()
    tail = edge.match(text[::-1]).end()
    return text[head : len(text) - tail] if head < len(text) - tail else ""
