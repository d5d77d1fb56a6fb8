"""Multiple choice (MMLU / GPQA style): find the one option letter the reply commits to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from .base import Grade, GraderError, register_grader
from .final_answer import ANSWER_HEADS, final_answers, unstated_reply
from .statement import marked_letter, refusal

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


# Between two letters of a list: "A, B", "A; B", "A/B", "A or B", "A, and B", "A and/or B", "A \\vee B".
_JOIN = r"(?>\s*+(?:[,;/&+|]|\bor\b|\band\b|\\(?:vee|lor|wedge|land)\b|\\text\{\s*+(?:or|and)\s*+\})\s*+)++"
# A clause longer than this is prose, not an answer like "(C) because ..."; bounds the work per phrase.
_CLAUSE_CHARS = 200
# Where the clause that states the letter ends: a sentence end or a justification.
_CLAUSE_END = re.compile(r"[.!?](?:\s|$)|\b(?:because|since|as|so|which|given|due)\b", re.I)
# The letter just named is then called wrong: "B is wrong, D is right".
_NEGATED = re.compile(r"\s*+(?:is\s++|are\s++|seems\s++|looks\s++)?(?:not\b|n't\b|wrong|incorrect|false|eliminated|ruled\s++out)|\s*+isn't", re.I)
# After "A", these words make it a letter ("A is also possible"), not the article ("A good reason").
_LETTER_VERBS = r"(?:is|was|are|seems|looks|could|might|may|would|also|too|or|and|can|fits|works)\b"


def _other_letters(rest: str, letters: str, picked: str) -> list[str]:
    """Option letters other than ``picked`` in the rest of the clause, except excluded ones ("not A")."""
    found = []
    for m in re.finditer(rf"(?<![A-Za-z0-9'\\])([{letters}])(?![A-Za-z0-9'])", rest):
        letter = m.group(1)
        before = rest[max(0, m.start() - 12) : m.start()].lower()
        if letter == picked or re.search(r"\b(?:not|than|of|over)\s*+[\(\[]?\Z", before):
            continue
        after = rest[m.end() : m.end() + 12]
        if letter == "A" and re.match(r" [a-z]", after) and not re.match(" " + _LETTER_VERBS, after):
            continue  # the article: "A good reason"
        found.append(letter)
    return found


def _clause_letter(clause: str, letters: str) -> Optional[Pick]:
    """The letter a clause like "(C) because ..." starts with; "A or B" / "either A or B", a letter
    then called wrong ("B is wrong, D is right") or a second letter in the clause is a hedge."""
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
        rest = _CLAUSE_END.split(clause[m_low.end() :], maxsplit=1)[0]
        others = set(re.findall(r"[\(\[]([" + letters.lower() + r"])[\)\]]", rest)) - {m_low.group(1)}
        if others or _other_letters(rest, letters, m_low.group(1).upper()):
            return Pick(None, "names several options", (m_low.group(1).upper(), *sorted(o.upper() for o in others)))
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
    rest = _CLAUSE_END.split(clause[pos:], maxsplit=1)[0]
    if _NEGATED.match(rest):
        return Pick(None, f"names {distinct[0]}, then calls it wrong", distinct)
    others = _other_letters(rest, letters, distinct[0])
    if others:
        return Pick(None, "names several options", tuple(dict.fromkeys((distinct[0], *others))))
    return Pick(distinct[0], "")


# The answer heads of every grader, and "the correct option is B" / "choice: B".
_HEADS = re.compile(ANSWER_HEADS.pattern + r"|\b(?:option|choice)\s*+(?:is\b|:|=)", re.I)


def _stated_letter(response: str, seg: str, letters: str, reference: str) -> Optional[Pick]:
    """The letter the reply's explicit answers state (the one rule of .final_answer), a hedge or
    conflict as a Pick without a letter, or None when no statement names a letter."""
    statements = final_answers(response, _HEADS, reference)
    for s in statements:
        if s.refused:  # "Answer: A? B?", "Answer: A. Alternatively B.", "Answer: A̸"
            return Pick(None, s.refused)
    picks = [(s, _clause_letter(s.text, letters)) for s in statements]
    named = [(s, p) for s, p in picks if p is not None]
    for _, p in named:
        if p.letter is None:
            return p
    if not named:
        return None
    distinct = tuple(dict.fromkeys(p.letter for _, p in named if p.letter))
    if len(distinct) > 1:
        return Pick(None, "conflicting final answers", distinct)
    s, p = named[-1]
    lines = {m.group(1) for m in re.finditer(r"(?m)^[^\w\n]*+([" + letters + r"])[^\w\n]*+$", seg)} - {p.letter}
    if lines:  # "Answer:\nA\nB": a line that is only a letter answers too
        return Pick(None, "names several options", (p.letter or "", *sorted(lines)))
    p.how = p.how or s.how
    return p


def pick_letter(response: str, choices: Choices = None, reference: str = "") -> Pick:
    """The option letter a reply commits to, or None with why (no letter / ambiguous / not stated)."""
    letters, texts = _letters(choices)
    seg, unstated = unstated_reply(response, _HEADS)
    if not seg:
        return Pick(None, "empty response (or only code, quotations and empty boxes)")
    # 1. Its explicit answers: \boxed{C}, "The answer is (C)", "Answer: D) 42", "correct option is B".
    stated = _stated_letter(response, seg, letters, reference)
    if stated is not None:
        return stated
    # With no statement the reply itself is read: a marked letter ("A̸") anywhere in it is no answer,
    # nor is a reply that only speaks of an answer ("if the answer is A", "the answer is not A").
    why = unstated or marked_letter(seg)
    if why:
        return Pick(None, why)
    return _read_reply(seg, letters, texts)


def _read_reply(seg: str, letters: str, texts: list[str]) -> Pick:
    """The letter a reply with no explicit statement commits to, read from the reply itself."""
    tok = _token(letters)
    # 2. The whole reply is a letter (or letters joined by "or"/","): "C", "(C).", "**B**", "A or B".
    whole = re.fullmatch(r"\W*" + tok + r"(?:" + _JOIN + tok + r")*+\W*", seg)
    if whole:
        got = _clause_letter(seg.strip(" .:*\n\t"), letters)
        if got and got.letter and (why := refusal(seg)):
            return Pick(None, why)  # "A?", "B+"
        if got:
            got.how = got.how or "the reply is the letter"
            return got
    low = re.fullmatch(r"\W*[\(\[]([" + letters.lower() + r"])[\)\]]\W*", seg)
    if low:
        return Pick(low.group(1).upper(), "the reply is the letter (lower case, in parentheses)")
    # 3. The reply opens with the letter and its option text: "B) Paris", "C. 42 because ...".
    first = seg.splitlines()[0]
    m = re.match(r"\W*" + r"[\(\[]?([" + letters + r"])[\)\]\.:](?:\s|$)", first)
    if m:
        listed = re.findall(r"(?:^|\s)[\(\[]?([" + letters + r"])[\)\]\.:](?=\s|$)", seg)  # "A. B. C." lists options
        others = set(re.findall(r"\(([" + letters + r"])\)", seg) + listed) - {m.group(1)}
        if others:
            return Pick(None, "opens with one option but names others", (m.group(1), *sorted(others)))
        why = refusal(m.group().strip(), tail=seg[m.end() :])  # "B) Paris. Alternatively C."
        return Pick(None, why) if why else Pick(m.group(1), "the reply opens with the option")
    # 4. The reply ends on a line that is only a letter, after its reasoning; every such line must agree.
    alone = re.findall(r"(?m)^[^\w\n]*+([" + letters + r"])[^\w\n]*+$", seg)
    last = seg.splitlines()[-1].strip()
    if alone and re.fullmatch(r"[^\w]*+[" + letters + r"][^\w]*+", last):
        if len(set(alone)) > 1:
            return Pick(None, "several lines that are only a letter", tuple(dict.fromkeys(alone)))
        why = refusal(last)
        return Pick(None, why) if why else Pick(alone[-1], "the reply's last line is the letter")
    return _marked_letters(seg, letters, texts)


def _agreeing(seg: str, pattern: str, how: str, several: str) -> Optional[Pick]:
    """The one letter every match of ``pattern`` names (a hedge after the last one refuses it), a Pick
    without a letter when they differ, or None when nothing matches."""
    found = list(re.finditer(pattern, seg))
    if not found:
        return None
    distinct = tuple(dict.fromkeys(m.group(1) for m in found))
    if len(distinct) > 1:
        return Pick(None, several, distinct)
    why = refusal(found[-1].group(), tail=seg[found[-1].end() :])  # "(A). Alternatively B."
    return Pick(None, why) if why else Pick(distinct[0], how)


def _marked_letters(seg: str, letters: str, texts: list[str]) -> Pick:
    """Steps 5-7 of reading a reply with no statement: bold letters, an option's text, parenthesised letters."""
    # 5. Bold letters: "**B**" or "**B) Paris**" — must all agree.
    bold = _agreeing(seg, r"\*\*\s*+[\(\[]?([" + letters + r"])(?![A-Za-z0-9'])[\)\]\.:]?", "bold letter", "different bold letters")
    if bold is not None:
        return bold
    # 6. The reply quotes exactly one option's text.
    if texts:
        norm = " ".join(seg.lower().split())
        hits = [letters[i] for i, t in enumerate(texts) if t.strip() and " ".join(t.lower().split()) in norm]
        if len(hits) == 1:
            return Pick(hits[0], "the reply quotes this option's text")
        if len(hits) > 1:
            return Pick(None, "the reply quotes several options' texts", tuple(hits))
    # 7. Parenthesised letters anywhere, e.g. "so (C) it is" — only if they all agree.
    paren = _agreeing(seg, r"\(([" + letters + r"])\)", "the only option in parentheses", "several options in parentheses")
    return paren if paren is not None else Pick(None, f"no option letter ({letters[0]}–{letters[-1]}) found")


@register_grader("choice")
def grade_choice(response: str, reference: Any, *, choices: Choices = None) -> Grade:
    """1.0 if the reply commits to exactly the reference letter; hedged/ambiguous replies score 0."""
    letters, _ = _letters(choices)
    ref = _reference(reference, letters)
    pick = pick_letter(response, choices, ref)
    if pick.letter is None:
        why = pick.how + (f": {', '.join(pick.ambiguous)}" if pick.ambiguous else "")
        return Grade(0.0, None, f"not graded confidently — {why}")
    if pick.letter == ref:
        return Grade(1.0, pick.letter, f"{pick.letter} matches ({pick.how})")
    return Grade(0.0, pick.letter, f"{pick.letter} != {ref} ({pick.how})")
