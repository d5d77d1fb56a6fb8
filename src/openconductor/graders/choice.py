"""Multiple choice (MMLU / GPQA style): find the one option letter the reply commits to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from .base import Grade, GraderError, register_grader
from .extract import answer_phrase, final_segment, last_boxed

DEFAULT_LETTERS = "ABCDEFGHIJ"

Choices = Union[None, int, str, Sequence[str]]


@dataclass
class Pick:
    letter: Optional[str]
    how: str
    ambiguous: tuple[str, ...] = ()


def _letters(choices: Choices) -> tuple[str, list[str]]:
    """(valid letters, option texts) from the ``choices`` option."""
    if choices is None:
        return DEFAULT_LETTERS, []
    if isinstance(choices, int) and not isinstance(choices, bool):
        if not 2 <= choices <= 26:
            raise GraderError(f"choices={choices}: give between 2 and 26 options")
        return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:choices], []
    if isinstance(choices, str):
        letters = choices.replace(",", "").replace(" ", "").upper()
        if not letters.isalpha() or len(set(letters)) != len(letters):
            raise GraderError(f"choices={choices!r}: give the option letters, e.g. 'ABCD'")
        return letters, []
    texts = [str(t) for t in choices]
    if not 2 <= len(texts) <= 26:
        raise GraderError(f"choices has {len(texts)} option texts; give between 2 and 26")
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(texts)], texts


def _reference(reference: Any, letters: str) -> str:
    if isinstance(reference, int) and not isinstance(reference, bool):
        if not 0 <= reference < len(letters):
            raise GraderError(f"choice reference index {reference} is outside 0..{len(letters) - 1}")
        return letters[reference]
    if isinstance(reference, str):
        m = re.fullmatch(r"\s*[\(\[]?\s*([A-Za-z])\s*[\)\]]?\s*", reference)
        if m and m.group(1).upper() in letters:
            return m.group(1).upper()
    raise GraderError(
        f"choice reference must be one of the letters {letters!r} (or a 0-based index), got {reference!r}"
    )


def _token(letters: str) -> str:
    """A standalone option letter, optionally wrapped: (C), [C], **C**, \\text{C}, \\boxed{C}.

    Atomic, with possessive spaces: a run of spaces between wrappers has one way to match, so a
    chain of tokens ("A or B or C ...") cannot backtrack exponentially.
    """
    return (
        r"(?>(?:\*\*|__)?\s*+(?:\\(?:text|textbf|mathrm|boxed)\{)?\s*+[\(\[]?\s*+"
        rf"([{letters}])(?![A-Za-z0-9'])\s*+[\)\]]?\}}?(?:\*\*|__)?)"
    )


_JOIN = r"\s*+(?:,|/|\bor\b|\band\b|&|\+)\s*+"
# A clause longer than this is prose, not an answer like "(C) because ..."; bounds the work per phrase.
_CLAUSE_CHARS = 200


def _clause_letter(clause: str, letters: str) -> Optional[Pick]:
    """The letter a clause like "(C) because ..." starts with; "A or B" / "either A or B" is ambiguous."""
    clause = clause[:_CLAUSE_CHARS].strip()
    hedge = re.match(r"(?:either|both)\s+", clause, re.I)
    if hedge:
        clause = clause[hedge.end() :]
    clause = re.sub(r"^(?:option|choice|letter)\s*", "", clause, flags=re.I)
    tok = _token(letters)
    m = re.match(tok, clause)
    if not m:
        # lower case only where it cannot be the article "a": "(c)" or a clause that is just "c" / "c."
        m_low = re.match(r"[\(\[]([" + letters.lower() + r"])[\)\]]", clause) or re.fullmatch(
            r"([" + letters.lower() + r"])[.)]?", clause
        )
        if not m_low:
            return None
        return Pick(m_low.group(1).upper(), "lower-case letter in parentheses")
    found = [m.group(1)]
    more_pattern = re.compile(_JOIN + r"(?:option\s*+)?" + tok, re.I)
    pos = m.end()
    while more := more_pattern.match(clause, pos):
        found.append(more.group(1))
        pos = more.end()
    distinct = tuple(dict.fromkeys(found))
    if len(distinct) > 1 or hedge:
        return Pick(None, "hedged between options", distinct)
    return Pick(distinct[0], "")


_PHRASE = re.compile(r"(?:answer|option|choice)\s*+(?:is|:|=|would\s++be|should\s++be)\s*+[:=]?\s*+(?!not\b)", re.I)


def _rest_of_line(text: str, start: int, limit: int) -> str:
    end = text.find("\n", start, start + limit)
    return text[start : end if end >= 0 else start + limit]


def pick_letter(response: str, choices: Choices = None) -> Pick:
    """The option letter a reply commits to, or None with why (no letter / ambiguous)."""
    letters, texts = _letters(choices)
    seg = final_segment(response).strip()
    if not seg:
        return Pick(None, "empty response")
    tok = _token(letters)

    # 1. The whole reply is a letter (or letters joined by "or"/","): "C", "(C).", "**B**", "A or B".
    whole = re.fullmatch(r"\W*" + tok + r"(?:" + _JOIN + tok + r")*+\W*", seg)
    if whole:
        got = _clause_letter(seg.strip(" .:*\n\t"), letters)
        if got:
            got.how = got.how or "the reply is the letter"
            return got
    low = re.fullmatch(r"\W*[\(\[]([" + letters.lower() + r"])[\)\]]\W*", seg)
    if low:
        return Pick(low.group(1).upper(), "the reply is the letter (lower case, in parentheses)")
    # 2. \boxed{C}
    boxed = last_boxed(seg)
    if boxed is not None:
        got = _clause_letter(boxed, letters)
        if got:
            got.how = got.how or "\\boxed{}"
            return got
    # 3. "The answer is (C)", "Answer: D) 42", "correct option is B" — the last such phrase wins
    # (also the last of several on one line).
    phrases = [_rest_of_line(seg, m.end(), _CLAUSE_CHARS) for m in _PHRASE.finditer(seg)]
    phrases = [p for p in phrases if p.strip()]
    for clause in reversed(phrases):
        got = _clause_letter(clause.strip().lstrip("*").strip(), letters)
        if got:
            got.how = got.how or "'the answer is …' phrase"
            return got
    phrase = answer_phrase(seg)
    if phrase and not phrases:
        got = _clause_letter(phrase, letters)
        if got:
            got.how = got.how or "'answer' phrase"
            return got
    # 4. The reply opens with the letter and its option text: "B) Paris", "C. 42 because ...".
    first = seg.splitlines()[0]
    m = re.match(r"\W*" + r"[\(\[]?([" + letters + r"])[\)\]\.:](?:\s|$)", first)
    if m:
        others = set(re.findall(r"\(([" + letters + r"])\)", seg)) - {m.group(1)}
        if others:
            return Pick(None, "opens with one option but names others", (m.group(1), *sorted(others)))
        return Pick(m.group(1), "the reply opens with the option")
    # 5. Bold letters: "**B**" or "**B) Paris**" — must all agree.
    bold = re.findall(r"\*\*\s*+[\(\[]?([" + letters + r"])(?![A-Za-z0-9'])[\)\]\.:]?", seg)
    if bold:
        distinct = tuple(dict.fromkeys(bold))
        return Pick(distinct[0], "bold letter") if len(distinct) == 1 else Pick(None, "different bold letters", distinct)
    # 6. The reply quotes exactly one option's text.
    if texts:
        norm = " ".join(seg.lower().split())
        hits = [letters[i] for i, t in enumerate(texts) if t.strip() and " ".join(t.lower().split()) in norm]
        if len(hits) == 1:
            return Pick(hits[0], "the reply quotes this option's text")
        if len(hits) > 1:
            return Pick(None, "the reply quotes several options' texts", tuple(hits))
    # 7. Parenthesised letters anywhere, e.g. "so (C) it is" — only if they all agree.
    paren = re.findall(r"\(([" + letters + r"])\)", seg)
    if paren:
        distinct = tuple(dict.fromkeys(paren))
        return Pick(distinct[0], "the only option in parentheses") if len(distinct) == 1 else Pick(None, "several options in parentheses", distinct)
    return Pick(None, f"no option letter ({letters[0]}–{letters[-1]}) found")


@register_grader("choice")
def grade_choice(response: str, reference: Any, *, choices: Choices = None) -> Grade:
    """1.0 if the reply commits to exactly the reference letter; hedged/ambiguous replies score 0."""
    letters, _ = _letters(choices)
    ref = _reference(reference, letters)
    pick = pick_letter(response, choices)
    if pick.letter is None:
        why = pick.how + (f": {', '.join(pick.ambiguous)}" if pick.ambiguous else "")
        return Grade(0.0, None, f"not graded confidently — {why}")
    if pick.letter == ref:
        return Grade(1.0, pick.letter, f"{pick.letter} matches ({pick.how})")
    return Grade(0.0, pick.letter, f"{pick.letter} != {ref} ({pick.how})")
