"""The statement rule: which text of a reply can state an answer, and when a stated answer is none.

Every text grader (math, numeric, exact, choice) reads a reply through this module, through
:mod:`.final_answer` for its explicit statements and :func:`answer_segment` for its fallback, so the
rule is the same for all of them:

* **Unicode that never changes a value** (:func:`clean`): full-width ASCII letters, digits and marks
  are their ASCII selves (NFKC for that block only), zero-width and direction characters are removed,
  and the text is NFC (canonical composition: ``=`` with U+0338 is ``≠``). Nothing else is folded: a
  superscript keeps its value (see :func:`.extract.nfkc_keeping_numbers`).
* **What states nothing** (:func:`stating_text`, :func:`unstated_spans`): fenced code (```` ``` ```` or
  ``~~~``, tagged or not, an unclosed fence to the end), quoted lines (``> ...``), an empty
  ``\\boxed{}``; and an answer head inside a quotation (``"..."``, ``“...”``, inline code) or after a
  verb that reports someone else's words ("the problem says the answer is 5").
* **A stated answer with a qualifier, an alternative or a negation is no answer** (:func:`refusal`):
  "at least 5", "more than 5", "≥ 5", "5 or more", "probably B", "B?", "not A", "¬A", "A" with a
  combining mark (``A̸``), "A. Alternatively B.", "A. B." (a second bare value after it). A qualifier
  that the reference itself uses is part of the answer (a reference "x > 5", "maybe").

An approximation ("about 3.14", "≈ 3.14") states its number: the grader's tolerance decides.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any, Optional

from ..reply import final_segment
from .extract import MAX_ANSWER_CHARS, MAX_PHRASE_CHARS

__all__ = ["TAIL_CHARS", "answer_segment", "clean", "is_empty_box", "marked_letter", "refusal", "stating_text", "tail_hedge", "unstated_spans"]

# Invisible characters a reply may carry inside a word or number ("B" wrapped in zero-width spaces).
# Not U+2061..U+2064 (invisible times, plus, separator): they are operators, so a reader refuses them.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))
# Full-width ASCII (U+FF01..U+FF5E) and the ideographic space: NFKC maps each to exactly its ASCII twin.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def clean(text: str) -> str:
    """``text`` with the Unicode changes that never change a value (module docstring)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text.translate(_INVISIBLE).translate(_FULL_WIDTH))


# ------------------------------------------------------------------------------- what states nothing

# A fence opens a line (indented or not) and runs to its closing fence or the end: code states nothing.
_FENCE = re.compile(r"(?m)^[ \t]*+(`{3,}+|~{3,}+)[^\n]*+\n.*?(?:^[ \t]*+\1[ \t]*+$|\Z)", re.S)
_BLOCKQUOTE = re.compile(r"(?m)^[ \t]{0,3}+>[^\n]*+")
# Struck-through text is withdrawn: "~~A~~ B", "<del>A</del> B".
_STRUCK = re.compile(r"~~[^~\n]++~~|<(s|del|strike)>.*?</\1>", re.I | re.S)
_EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*+\{(?:\s|\\[,;:! ]|\$|~|\\(?:text|mathrm)\s*+\{\s*+\})*+\}")
# Quotations inside a line: "...", “...”, «...», `...`. A head inside one is someone else's statement.
_QUOTED = re.compile(r'"[^"\n]*+"|“[^”\n]*+”|«[^»\n]*+»|`[^`\n]++`')


def stating_text(text: str) -> str:
    """``text`` without what states nothing: fenced code and quoted lines blanked (their newlines kept:
    a statement's paragraph still ends where it did), struck-through text and empty boxes removed."""
    text = _FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    text = _BLOCKQUOTE.sub("", text)
    text = _STRUCK.sub(" ", text) if "~~" in text or "</" in text else text
    return _EMPTY_BOX.sub("", text) if "\\" in text else text


def unstated_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every quotation in ``text``: an answer head or box starting inside one states nothing."""
    return [m.span() for m in _QUOTED.finditer(text)]


def is_empty_box(content: str) -> bool:
    return _EMPTY_BOX.fullmatch("\\boxed{" + content + "}") is not None


def answer_segment(response: str) -> str:
    """Where a grader reads a reply that states no explicit answer: the final segment (thinking
    removed, the last ``<answer>`` block), cleaned, without what states nothing."""
    # What states nothing goes before the cut to the last characters: a cut inside a fence or a
    # quoted line would leave its tail to be read.
    return stating_text(final_segment(clean(response or "")))[-MAX_ANSWER_CHARS:].strip()


# ------------------------------------------------------------------------- qualified answers

_W = r"(?<![\w\\])"  # a word starts here (not inside a word, not a LaTeX command)
_E = r"(?!\w)"
# Bounds and relations: the answer is a range, not a value.
_BOUND = re.compile(
    _W + r"(?:at[ \t]++(?:the[ \t]++)?(?:very[ \t]++)?(?:least|most|minimum|maximum)|minimum|maximum|(?:upper|lower)[ \t]++bound|bound(?:ed)?|(?:no[ \t]++|not[ \t]++)?(?:more|less|greater|fewer|larger|smaller|bigger|higher|lower)"
    r"[ \t]++than|up[ \t]++to|upwards[ \t]++of|in[ \t]++excess[ \t]++of|exceeding|over|under|above|below|beyond|almost|nearly|just[ \t]++(?:over|under)"
    r"|or[ \t]++(?:more|less|fewer|greater|higher|lower|above|below|so)|between|within)"
    + _E
    + r"|[<>≤≥≠⩽⩾≲≳≮≯≰≱≪≫]|!=|\\(?:[lg]eq?(?:slant)?|[lg]t|n[lg]eq|n(?:less|gtr)|neq?|not(?:in)?|lesssim|gtrsim|ll|gg)(?![A-Za-z])"
    r"|(?<=[\w)}])\+[ \t]*+\Z|(?<=\d)-?ish\b",
    re.I,
)
# Uncertainty and alternatives: the reply offers the answer, it does not state it.
_HEDGE = re.compile(
    _W + r"(?:maybe|perhaps|possibly|probably|likely|unlikely|presumably|supposedly|apparently|guess(?:ing)?|tentative(?:ly)?|somewhere|confident"
    r"|i[ \t]++(?:think|believe|suppose|guess|reckon)|not[ \t]++(?:sure|certain)|unsure|uncertain|either|alternatively|otherwise"
    r"|or|else|instead|unless|versus|vs|(?:could|might|may)[ \t]++(?:also[ \t]++)?be)" + _E + r"|\?",
    re.I,
)
# A negation of the answer itself: "not 5", "¬A", "5 is not", "isn't A".
_NEGATION = re.compile(
    r"\A[\s*_(\[]*+(?:(?:not|never|no[ \t]++longer|except|excluding|neither|nor|anything[ \t]++but|other[ \t]++than)"
    + _E
    + r"|¬|~(?=[A-Za-z])|\\(?:neg|lnot)(?![A-Za-z]))|"
    + _W
    + r"(?:is|are|was|were)(?:[ \t]++not|n't)"
    + _E
    + r"|"
    + _W
    + r"(?:isn't|aren't|wasn't)",
    re.I,
)


@functools.cache
def _combining() -> re.Pattern:
    """A letter or digit followed by a combining mark (every Unicode category M character of the BMP)."""
    marks = "".join(re.escape(chr(c)) for c in range(0x300, 0x10000) if unicodedata.category(chr(c)).startswith("M"))
    return re.compile("([^\\W_])[" + marks + "]")


def marked_letter(text: str) -> Optional[str]:
    """Why ``text`` states no answer because a letter or digit in it carries a combining mark left after
    NFC ("A̸": A with a slash through it), or None. Marks in other scripts (Devanagari vowel signs) are text."""
    if text.isascii():
        return None
    for m in _combining().finditer(text):
        base = m.group(1)
        if base.isascii() or base.isdigit() or unicodedata.name(base, "").startswith(("LATIN", "GREEK")):
            return f"{m.group()!r} carries the combining mark U+{ord(m.group()[-1]):04X}: the answer is not stated"
    return None


def _found(pattern: re.Pattern, text: str, reference: str) -> Optional[str]:
    """The first match of ``pattern`` in ``text``, unless the reference uses that kind of word itself
    (a reference "x > 5" is a range: "x \\geq 6" is then an answer to compare, not a qualifier)."""
    if reference and pattern.search(reference):
        return None
    m = pattern.search(text)
    return (m.group().strip() or m.group()) if m else None


# After the stated answer: a sentence that opens an alternative ("A. Alternatively B.", "5. Or maybe 6.")
# is a hedge when it names another value; one that doubts the answer ("I'm not sure") always is.
_ALTERNATIVE = re.compile(
    r"(?:\A|[.!;:,]\s++|\n\s*+)\(?\s*+(?:alternatively|otherwise|or(?:[ \t]++else)?|else|unless|also[ \t]++possible"
    r"|(?:but[ \t]++)?(?:(?:it|this|that|the[ \t]++answer)[ \t]++)?(?:could|might|may)[ \t]++(?:also[ \t]++)?be(?=[ \t]++(?:option[ \t]++)?[\(\[]?(?:[A-Z]\b|-?\d))"
    r"|another[ \t]++(?:option|possibility|candidate|answer)|maybe|perhaps|possibly|probably)(?!\w)",
    re.I,
)
# A later sentence that credits another value: "B is also plausible", "B could also be right", "though B is close".
_ALSO = re.compile(
    r"\b(?:also[ \t]++(?:be[ \t]++)?(?:correct|right|possible|plausible|valid|true|works?|fits?|an?[ \t]++(?:option|answer|possibility))"
    r"|(?:could|might|may|would)[ \t]++(?:also[ \t]++)?(?:be[ \t]++)?(?:correct|right|valid|the[ \t]++(?:answer|one)|work|fit)"
    r"|(?:is|are|seems?|looks?)[ \t]++(?:also[ \t]++)?(?:possible|plausible|close|likely|tempting|an?[ \t]++(?:option|possibility))|as[ \t]++well)\b",
    re.I,
)
_DOUBT = re.compile(r"(?:\A|[.!;:,]\s++|\n\s*+)\(?\s*+(?:(?:i'?m|i[ \t]++am)[ \t]++not[ \t]++(?:sure|certain)|not[ \t]++sure)(?!\w)", re.I)
# A value a sentence names: a number, or an option letter (not the pronoun "I" or the article "A").
_VALUE = re.compile(
    r"(?<![\w'.])(?:\d++(?:[.,]\d++)*+|[B-HJ-Z]|[AI](?![ \t]++(?!(?:is|was|are|seems|looks|could|might|may|would|also|too|or|and|can|fits|works)\b)[a-z]))(?![\w'])"
)
# How far after a statement a hedge is looked for ("A. Alternatively B.", "5\n\n6").
TAIL_CHARS = 300
_BARE = re.compile(r"[\s*_(\[]*+(?:option[ \t]++)?([A-Z]|[-+]?\d[\d,]*+(?:\.\d++)?%?)[)\]\s*_.?!]*+", re.I)
_TAIL_SENTENCE = re.compile(r"(?<=[.?!])\s++")
_CLAUSE = re.compile(r"[^.?!\n]*+")


def tail_hedge(stated: str, tail: str) -> Optional[str]:
    """Why what follows the stated answer ``stated`` turns it into a hedge ("A. Alternatively B.",
    "A. B.", "5?", "5 (probably)"), or None. Alternatives are looked for in the statement's paragraph, a
    second bare value ("5\\n\\n6") in the next :data:`TAIL_CHARS` characters."""
    tail = tail[:TAIL_CHARS]
    if not tail.strip():
        return None
    para = tail.find("\n\n")
    near = tail[:para] if para >= 0 else tail
    if re.match(r"[\s$*_)\]}]*+\?", near) or _DOUBT.search(near):
        return f"followed by doubt ({near.strip()[:40]!r})"
    tokens = {t.lower() for t in _VALUE.findall(stated)} | {t.lower() for t in re.findall(r"[A-Za-z]+|\d[\d,.]*", stated)}
    for m in _ALTERNATIVE.finditer(near):
        head = _CLAUSE.match(near, m.end())
        clause = head.group() if head else ""
        named = _VALUE.findall(clause)
        words = re.findall(r"\w+", clause)  # "Alternatively London": a short clause is its value
        if named and named[-1].lower() not in tokens or not named and 0 < len(words) <= 3 and words[-1].lower() not in tokens:
            return f"followed by an alternative ({near[m.start() : m.end() + 20].strip(' .,;:(')!r})"
    for part in re.split(r"(?<=[.!?])\s++|\n", near):
        also = _ALSO.search(part)
        named = _VALUE.findall(part[: also.start()] if also else "") or (_VALUE.findall(part) if also else [])
        if named and named[-1].lower() not in tokens:
            return f"followed by another answer credited ({part.strip()[:60]!r})"
    remark = re.match(r"\s*+[.,;:]?\s*+\(([^()\n]{0,120})\)", near)
    if remark and _HEDGE.search(remark.group(1)):
        return f"followed by a hedge ({remark.group()[:60].strip()!r})"
    lines = tail.split("\n")
    for part in _TAIL_SENTENCE.split(lines[0]) + lines[1:]:
        bare = _BARE.fullmatch(part) if part.strip() else None
        if bare and bare.group(1).lower().rstrip("%") not in tokens:
            return f"followed by another bare answer ({part.strip()!r})"
    return None


# A closing remark in parentheses of three words or more: an explanation, not a qualifier.
_LONG_REMARK = re.compile(r"\s*+\((?=(?:[^()\s]++\s++){3,}[^()]*+\)\s*+\Z)[^()]*+\)\s*+\Z")
# "B) more than 5": an option letter and the option's own text, which qualifies nothing.
_OPTION_TEXT = re.compile(r"[\s*_]*+(?:option[ \t]++)?(?:\([A-Z]\)|\[[A-Z]\]|[A-Z][).:])(?=[ \t]++\S)")


def refusal(text: str, reference: Any = "", said: str = "", tail: str = "") -> Optional[str]:
    """Why the stated answer ``text`` is no answer (a qualifier, an alternative, a negation, a combining
    mark), or None. ``said`` is the whole sentence that stated it (remarks included: only hedges are
    looked for there); ``tail`` what follows it (an alternative, another bare value)."""
    # A stated answer is short: past a phrase's length it is prose (and the scan stays bounded).
    text, said = text[:MAX_PHRASE_CHARS], said[:MAX_PHRASE_CHARS]
    ref = clean(str(reference))[:MAX_PHRASE_CHARS] if reference is not None else ""
    option = _OPTION_TEXT.match(text)
    if option:
        text = said = option.group()
    why = marked_letter(text) if not marked_letter(ref) else None
    if why:
        return why
    # "C (the only value greater than 5)": a longer remark explains the answer and may compare; it is
    # read for hedges only. A short one qualifies it: "5 (at least)", "5 (or more)".
    remark = _LONG_REMARK.search(text)
    core = text[: remark.start()] if remark else text
    for pattern, what, where in ((_NEGATION, "a negation", core), (_BOUND, "a qualifier", core), (_HEDGE, "a hedge", text)):
        hit = _found(pattern, where, ref)
        if hit:
            return f"{what} ({hit!r}) on the answer: not a stated answer"
    hit = _found(_HEDGE, said, ref) if said and said != text else None
    if hit:
        return f"a hedge ({hit!r}) in the statement: not a stated answer"
    return tail_hedge(text, tail)
