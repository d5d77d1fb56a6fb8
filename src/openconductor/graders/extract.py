"""Pulling the answer out of an LLM's free text: \\boxed{}, "the answer is ...", input-size bounds.

Thinking and ``<answer>`` blocks follow the one rule of :mod:`openconductor.reply`. Everything here
is linear in its input: braces are matched in one pass, patterns use possessive quantifiers so they
cannot backtrack, and a grader reads at most the last :data:`MAX_ANSWER_CHARS` of an answer.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Optional

from ..reply import answer_block, final_segment as _final_segment, strip_think

__all__ = [
    "MAX_ANSWER_CHARS", "MAX_PHRASE_CHARS", "answer_block", "boxed_all", "boxed_extents", "boxed_spans", "brace_pairs", "final_segment", "last_boxed",
    "nfkc_keeping_numbers", "phrase_sentence", "phrase_text", "strip_think", "trim", "unicode_to_latex", "vulgar_fractions", "without_boxes",
]  # fmt: skip

# An answer is at its end; a longer segment (after thinking is removed) is read from its last part.
# ~2,500 tokens: longer than any final answer, and short enough that no single regex call over it holds
# the GIL for more than a few milliseconds.
MAX_ANSWER_CHARS = 10_000
# A stated answer ("the answer is ...") ends within this many characters, or it is prose.
MAX_PHRASE_CHARS = 1_000

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*+(\{)?")
_BOXED_TAIL = re.compile(r"\s*+([^\s$]++)")
_DOLLAR_MATH = re.compile(r"\$++([^$]++)\$++")
# A sentence ends at ". " or "! " (but "5! " is a factorial) or at a justification ("7 because ...").
# Not at ";": "A; B; C; D" is a list of answers, not an answer and a new sentence.
# (?<!\s): a match starts only at the first space of a run, so a long run is scanned once
_SENTENCE_END = re.compile(
    r"[.。](?:\s|$)|(?<![\d)}])!(?:\s|$)|(?<!\s)\s++(?:(?:because|since|as|so|which|where|given)\b|i\.e\.|e\.g\.)"
)
# A remark in parentheses after the answer: "5 (rounded to the nearest integer)", "$5$ (since $x>0$)".
# Not "(or 6)": that is a second answer.
_REMARK = re.compile(
    r"\s*+\((?:since|because|as|rounded|to|in|i\.e\.|e\.g\.|which|where|note|from|by|using|see|approximately|approx|"
    r"about|exactly|not|that|for|per)\b[^()]*+\)[\s,;:]*+\Z",
    re.I,
)
_MORE_AFTER_MATH = re.compile(r"[^\W_]|\\[(\[]")  # "$3$ or $5$", "$5$ cm": the math is not all it says


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


def boxed_extents(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every ``\\boxed{…}`` / ``\\fbox{…}`` (nested braces kept), and ``\\boxed 5``."""
    out: list[tuple[int, int, str]] = []
    pairs: Optional[dict[int, int]] = None
    for m in _BOXED.finditer(text):
        if m.group(1):
            pairs = brace_pairs(text) if pairs is None else pairs
            close = pairs.get(m.end() - 1)
            if close is not None:
                out.append((m.start(), close + 1, text[m.end() : close].strip()))
        else:
            tail = _BOXED_TAIL.match(text, m.end())
            if tail:
                out.append((m.start(), tail.end(), tail.group(1)))
    return out


def boxed_spans(text: str) -> list[tuple[int, str]]:
    """(start, content) of every ``\\boxed{…}`` / ``\\fbox{…}`` (nested braces kept), and ``\\boxed 5``."""
    return [(start, content) for start, _, content in boxed_extents(text)]


def without_boxes(text: str) -> str:
    """``text`` with every ``\\boxed{…}`` / ``\\fbox{…}`` / ``\\boxed 5`` removed (an unclosed one is kept)."""
    out, i = [], 0
    pairs: Optional[dict[int, int]] = None
    for m in _BOXED.finditer(text):
        if m.start() < i:
            continue  # inside a box already removed
        if m.group(1):
            pairs = brace_pairs(text) if pairs is None else pairs
            close = pairs.get(m.end() - 1)
            if close is None:
                continue
            end = close + 1
        else:
            tail = _BOXED_TAIL.match(text, m.end())
            end = tail.end() if tail else m.end()
        out.append(text[i : m.start()])
        i = end
    out.append(text[i:])
    return "".join(out)


def boxed_all(text: str) -> list[str]:
    """Contents of every ``\\boxed{…}`` / ``\\fbox{…}``, in order."""
    return [content for _, content in boxed_spans(text)]


def last_boxed(text: str) -> Optional[str]:
    found = boxed_all(text)
    return found[-1] if found else None


def phrase_text(rest: str) -> Optional[str]:
    """What an "the answer is" phrase states, from the text after its head: without outer markup, the
    sentence after it, a justification ("5 because ...", "5, i.e. ...") or a remark ("5 (rounded)");
    an inline-math answer is its math unless more follows it ("$3$ or $5$" stays whole). None if the
    phrase does not end within :data:`MAX_PHRASE_CHARS` (prose, not an answer; and bounded work)."""
    sentence, ended = phrase_sentence(rest)
    if not ended and len(rest) > MAX_PHRASE_CHARS:
        return None
    found = _REMARK.sub("", sentence).strip().rstrip(",;:").strip().strip("*").strip()
    math_span = _inline_math(found)
    if math_span is not None and not _MORE_AFTER_MATH.search(found[math_span[1] :]):
        return math_span[0].strip() or None  # "the answer is $\frac12$ since ..." -> the inline math
    return found or None


def phrase_sentence(rest: str) -> tuple[str, bool]:
    """The sentence an "the answer is" phrase states, remarks kept (its first :data:`MAX_PHRASE_CHARS`
    characters, without outer markup), and whether it ended before them."""
    found = rest[:MAX_PHRASE_CHARS].strip().strip("*").strip()
    parts = _SENTENCE_END.split(found, maxsplit=1)
    return parts[0], len(parts) > 1


def _inline_math(text: str) -> Optional[tuple[str, int]]:
    """The first ``$…$`` or ``\\(…\\)`` span's (content, end), found with two scans, never a rescan."""
    dollar = _DOLLAR_MATH.search(text)
    opened = text.find("\\(")
    closed = text.find("\\)", opened + 2) if opened >= 0 else -1
    if closed > opened + 2 and (dollar is None or opened < dollar.start()):
        return text[opened + 2 : closed], closed + 2
    return (dollar.group(1), dollar.end()) if dollar else None


def trim(text: str, chars: str) -> str:
    """``text`` without leading and trailing whitespace and ``chars``, in linear time (unlike a
    ``[...]+$`` pattern, which rescans a long run from every position)."""
    edge = re.compile(rf"[\s{re.escape(chars)}]*+")
    head = edge.match(text).end()
    tail = edge.match(text[::-1]).end()
    return text[head : len(text) - tail] if head < len(text) - tail else ""


# ------------------------------------------------------------------------ value-safe Unicode

# NFKC folds compatibility characters into plain ones, and for most that keeps the meaning (full-width
# "１０" is 10). Not for superscripts, subscripts and vulgar fractions: "2⁵" (32) would become "25",
# "1½" (1.5) "11⁄2". Those characters are kept as they are, or written out as LaTeX.


@functools.cache
def _forms() -> dict[str, re.Pattern]:
    """A character class per compatibility form that changes a number's value under NFKC (BMP only)."""
    chars: dict[str, list[str]] = {"<super>": [], "<sub>": [], "<fraction>": []}
    for code in range(0x80, 0x10000):
        tag = unicodedata.decomposition(chr(code)).split(" ", 1)[0]
        if tag in chars:
            chars[tag].append(re.escape(chr(code)))
    return {tag: re.compile("[" + "".join(found) + "]") for tag, found in chars.items()}


def vulgar_fractions() -> re.Pattern:
    """One vulgar fraction character ("½", "⅞", …)."""
    return _forms()["<fraction>"]


def nfkc_keeping_numbers(text: str) -> str:
    """NFKC, except that superscripts, vulgar fractions and subscripts after a digit are left unchanged
    ("2⁵", "1½", "10₂"); a subscript after a letter is an index and folds ("H₂O" = "H2O")."""
    if text.isascii():
        return text
    forms = _forms()
    kept = re.compile(f"{forms['<super>'].pattern}|{forms['<fraction>'].pattern}|(?<![^\\W\\d_]){forms['<sub>'].pattern}")
    out, start = [], 0
    for m in kept.finditer(text):
        out += [unicodedata.normalize("NFKC", text[start : m.start()]), m.group()]
        start = m.end()
    out.append(unicodedata.normalize("NFKC", text[start:]))
    return "".join(out)


def _fraction(m: re.Match) -> str:
    num, _, den = unicodedata.normalize("NFKC", m.group(2)).partition("\u2044")
    frac = f"\\frac{{{num}}}{{{den or 1}}}"
    return f"({m.group(1)}+{frac})" if m.group(1) else frac  # 1½ is a mixed number: 1 + 1/2


def _plain_digits(run: str) -> str:
    return unicodedata.normalize("NFKC", run).replace("\u2212", "-")  # ⁻ folds to the minus sign


def unicode_to_latex(text: str) -> str:
    """Superscript and subscript runs as ``^{…}`` / ``_{…}`` ("2⁵" -> "2^{5}"), vulgar fractions as
    ``\\frac{n}{d}`` ("1½" -> "(1+\\frac{1}{2})"), then the rest NFKC: the value never changes."""
    if text.isascii():
        return text
    forms = _forms()
    text = re.sub(rf"(\d*+)({forms['<fraction>'].pattern})", _fraction, text)
    text = re.sub(forms["<super>"].pattern + "++", lambda m: "^{" + _plain_digits(m.group()) + "}", text)
    text = re.sub(forms["<sub>"].pattern + "++", lambda m: "_{" + _plain_digits(m.group()) + "}", text)
    return unicodedata.normalize("NFKC", text)
