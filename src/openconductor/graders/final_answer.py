"""The one rule for what a reply's answer is, shared by the text graders (math, numeric, exact, choice).

A reply states its answer explicitly: a ``\\boxed{…}``, a "Final answer: …", an "the answer is …" /
"Answer: …". The rule:

* Boxes and "final answer" statements are final: every one of them counts.
* A plain "the answer is …" may be corrected by a later one ("the answer is 4, no, the answer is 5"):
  only the last plain statement counts. A statement under a condition ("if the answer is 4") or
  negated ("the answer is not A") is not one.
* An ``<answer>`` block's statements count; with several blocks each counts (its statements, or its
  whole text). Outside the blocks only boxes and "final answer" statements count.
* All statements that count must give the same answer; the answer is the last one. Two that
  disagree (``\\boxed{yes} the answer is no``) score 0: a reply that hedges is never credited.
* With no explicit statement, each grader reads the reply itself (a bare "42", "(C)").
* What can state an answer at all, and when a statement is no answer, is :mod:`.statement`'s rule:
  fenced code, quotations, reported words and empty boxes state nothing; a statement with a qualifier,
  an alternative or a negation ("at least 5", "A. Alternatively B.", "A̸") is kept but scores 0.

:func:`final_answers` finds the statements; :func:`judge` grades each with the grader's own check and
applies the rule. Everything is linear in the reply's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from ..reply import answer_blocks, strip_think
from .base import Grade
from .extract import MAX_ANSWER_CHARS, MAX_PHRASE_CHARS, boxed_extents, phrase_sentence, phrase_text, without_boxes
from .statement import TAIL_CHARS, answer_segment, clean, is_empty_box, refusal, stating_text, tail_hedge, unstated_spans

__all__ = ["MAX_STATEMENTS", "Statement", "final_answers", "judge", "ANSWER_HEADS", "unstated_reply"]

# More distinct final answers than this is a list, not an answer; it also bounds the work per reply.
MAX_STATEMENTS = 8
_MAX_BLOCKS = 8

_VERB = r"(?:(?:is\b|would[ \t]++be\b|should[ \t]++be\b|will[ \t]++be\b|must[ \t]++be\b)(?:[ \t]*+[:=])?|:|=)"
_MARK = r"(?:[ \t]*+(?:\*\*|__))?"
# "Final answer: 5", "the final answer is 5", "**Final Answer**: 5"; "the (correct) answer is 5", "Answer: 5".
# A head and its verb are on one line.
ANSWER_HEADS = re.compile(
    rf"\b(?P<final>final[ \t]++answer){_MARK}[ \t]*+(?P<verb>{_VERB})?"
    rf"|\b(?:(?:correct|right|best)[ \t]++)?answer{_MARK}[ \t]*+{_VERB}",
    re.I,
)
# "if the answer is 4, ...", "check whether the answer is 4": a condition, not a statement. "The problem
# says the answer is 4", "you claimed that the answer is 4": someone else's words restated, not a statement.
_CONDITION = re.compile(
    r"\b(?:if|whether|assum\w*|suppos\w*|unless|check\w*|verify\w*|verified|confirm\w*|test\w*"
    r"|says|said|states|stated|claims?|claimed|asserts?|asserted|suggests?|suggested|writes|wrote|reads|asks|asked|told\s++(?:us|me))"
    r"\s++(?:that\s++)?(?:the\s++|our\s++|my\s++|its\s++|their\s++|your\s++)?\Z",
    re.I,
)

_BLOCK = re.compile(r"<answer>.*?(?:</answer>|(?=<answer>)|\Z)", re.I | re.S)
_NEGATED = re.compile(r"\s*+(?:\*\*)?\s*+(?:not\b|n't\b)", re.I)


@dataclass(frozen=True)
class Statement:
    """One explicit answer in a reply: what it says and how it was marked."""

    text: str
    how: str  # "\\boxed{}", "'final answer'", "'the answer is'", "<answer> block"
    final: bool  # boxes, "final answer" and <answer> blocks cannot be corrected by a later statement
    refused: Optional[str] = None  # why it is no answer (a qualifier, alternative, negation): it scores 0


def _head_rest(seg: str, head: re.Match) -> tuple[str, int]:
    """The text a head introduces and where it ends in ``seg``: the rest of its line, or the next line
    after "Final answer:"; at most one character more than a phrase may hold (so a longer one is seen
    as too long, in bounded work)."""
    limit = MAX_PHRASE_CHARS + 1
    end = seg.find("\n", head.end(), head.end() + limit)
    stop = end if end >= 0 else min(len(seg), head.end() + limit)
    rest = seg[head.end() : stop]
    if rest.strip(" \t*_:") or end < 0:
        return rest, stop
    start = end + 1
    while start < len(seg) and seg[start] in " \t\r\n" and start - end < limit:  # blank lines
        start += 1
    nxt = seg.find("\n", start, start + limit)
    stop = nxt if nxt >= 0 else min(len(seg), start + limit)
    return seg[start:stop], stop


def _is_condition(seg: str, head: re.Match) -> bool:
    line_start = seg.rfind("\n", 0, head.start()) + 1
    before = seg[max(line_start, head.start() - 40) : head.start()]
    return bool(_CONDITION.search(before))


def _tail(seg: str, start: int) -> str:
    """What follows a statement, as far as :func:`.statement.tail_hedge` reads (it stops at the paragraph's end)."""
    return seg[start : start + TAIL_CHARS]


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a < pos < b for a, b in spans)


def _box_statements(seg: str, quoted: list[tuple[int, int]], reference: Any) -> list[tuple[int, Statement]]:
    found = []
    checked: dict[tuple[str, str], Optional[str]] = {}  # a run of equal boxes is checked once
    for start, end, text in boxed_extents(seg):
        if "\\boxed" in text or "\\fbox" in text or is_empty_box(text) or _inside(start, quoted):
            continue  # an outer box is read through its inner ones; an empty box states nothing
        key = (text, _tail(seg, end))
        if key not in checked:
            checked[key] = refusal(text, reference, tail=key[1])
        found.append((start, Statement(text, "\\boxed{}", True, checked[key])))
    return found


def _head_statement(seg: str, head: re.Match, heads: re.Pattern) -> Optional[tuple[Statement, str, str]]:
    """The statement one answer head makes, with the sentence that said it and what follows it (for
    :func:`.statement.refusal`), or None when it makes none."""
    rest, rest_end = _head_rest(seg, head)
    if _NEGATED.match(rest) or _is_condition(seg, head) or heads.match(rest.lstrip(" \t*_")):
        return None  # a negation or a condition states nothing; "Final answer: Final answer: 5" is one head
    final = bool(head.groupdict().get("final"))
    if final and not head.group("verb") and seg[head.end() : head.end() + 1] not in ("\n", ""):
        return None  # "to find the final answer, we ...": a heading "Final Answer" stands on its own line
    text = phrase_text(rest)
    if text and ("\\boxed" in text or "\\fbox" in text):
        # "the answer is $\boxed{5}$": the box is counted as a box; anything else it says is a statement
        text = without_boxes(text).strip(" \t$*.")
    if not text:
        return None
    text = text.strip("`").strip() or text  # "Final answer: `5`": inline code around the value
    said, _ = phrase_sentence(rest)
    after = rest.strip().strip("*").strip()[len(said) :] + _tail(seg, rest_end)
    return Statement(text, "'final answer'" if final else "'the answer is'", final), said, after


def _refused(made: tuple[Statement, str, str], reference: Any) -> Statement:
    stated, said, after = made
    return replace(stated, refused=refusal(stated.text, reference, said=said, tail=after))


def _segment_statements(seg: str, heads: re.Pattern, reference: Any = "") -> list[tuple[int, Statement]]:
    """(position, statement) of one segment: every box, every "final answer", the last plain phrase.
    A box or head inside a quotation states nothing."""
    quoted = unstated_spans(seg)
    found = _box_statements(seg, quoted, reference)
    last_plain: Optional[tuple[int, tuple[Statement, str, str]]] = None
    for head in heads.finditer(seg):
        made = None if _inside(head.start(), quoted) else _head_statement(seg, head, heads)
        if made is not None and made[0].final:
            found.append((head.start(), _refused(made, reference)))
        elif made is not None:
            last_plain = (head.start(), made)  # only the last plain one counts, so only it is checked
    if last_plain is not None:
        found.append((last_plain[0], _refused(last_plain[1], reference)))
    return sorted(found, key=lambda item: item[0])


def final_answers(response: str, heads: re.Pattern = ANSWER_HEADS, reference: Any = "") -> list[Statement]:
    """The explicit answers a reply states that count under the rule (module docstring), in order.
    Empty when the reply states none: the grader then reads the reply itself. ``reference`` is only
    used to allow a qualifier the reference itself states (:func:`.statement.refusal`)."""
    visible = stating_text(strip_think(clean(response or "")))
    blocks = answer_blocks(visible)
    if not blocks:
        return [s for _, s in _segment_statements(visible.strip()[-MAX_ANSWER_CHARS:], heads, reference)]
    # Outside the blocks only final statements count ("\boxed{3} <answer>5</answer>" states two answers);
    # a plain "the answer is 4" there is reasoning that the block corrects.
    outside = _BLOCK.sub("\n", visible)[-MAX_ANSWER_CHARS:]
    out = [s for _, s in _segment_statements(outside, heads, reference) if s.final] + _after_blocks(visible, blocks[-1])
    if len(blocks) == 1 and not out:
        return [s for _, s in _segment_statements(blocks[0][-MAX_ANSWER_CHARS:], heads, reference)]
    for block in blocks[-_MAX_BLOCKS:]:
        block = block[-MAX_ANSWER_CHARS:]
        stated = [s for _, s in _segment_statements(block, heads, reference)]
        out += stated or ([Statement(block, "<answer> block", True, refusal(block, reference))] if block else [])
    return out


def _after_blocks(visible: str, last: str) -> list[Statement]:
    """A refused statement when what follows the last closed ``<answer>`` block hedges over it
    ("<answer>A</answer>. Alternatively B."); else nothing."""
    close = visible.lower().rfind("</answer>")
    why = tail_hedge(last, _tail(visible, close + len("</answer>"))) if close >= 0 and last else None
    return [Statement(last, "<answer> block", True, why)] if why else []


def unstated_reply(response: str, heads: re.Pattern = ANSWER_HEADS) -> tuple[str, Optional[str]]:
    """For a reply with no explicit statement: the text its grader reads instead
    (:func:`.statement.answer_segment`), and why it states no answer where it only speaks of one ("if
    the answer is 5", "the answer is not A", "the problem says the answer is 5", a quoted "Answer: 5"):
    its fallback reading must not credit the answer it declined to state."""
    seg = answer_segment(response)
    for head in heads.finditer(seg):
        if head.groupdict().get("final") and not head.group("verb"):
            continue  # "to find the final answer, we ...": no statement was declined
        return seg, f"the reply speaks of an answer ({head.group().strip()!r}) but states none (a condition, a negation, a quotation or someone else's words)"
    return seg, None


def judge(
    statements: list[Statement],
    grade_one: Callable[[Statement], Grade],
    key: Optional[Callable[[Grade], Any]] = None,
) -> Grade:
    """Grade each distinct statement with ``grade_one`` and apply the rule: 1.0 only if all are correct;
    a mix of right and wrong (or, with ``key``, different extracted answers) is a conflict and scores 0."""
    latest = {s.text.strip(): i for i, s in enumerate(statements)}  # a repeated answer sits where it was last stated
    distinct = [statements[i] for i in sorted(latest.values())]
    if len(distinct) > MAX_STATEMENTS:
        return Grade(0.0, None, f"{len(distinct)} different final answers; a reply must commit to one")
    grades = [Grade(0.0, None, f"{s.text[:80]!r} ({s.how}): {s.refused}") if s.refused else grade_one(s) for s in distinct]
    last = grades[-1]
    if len(grades) == 1:
        return last
    if all(g.score == 1.0 for g in grades):
        return Grade(1.0, last.extracted, f"{last.reason} (all {len(grades)} final answers agree)")
    keys = {key(g) for g in grades} if key is not None else set()
    if any(g.score > 0 for g in grades) or len(keys) > 1:
        shown = "; ".join(f"{g.extracted if g.extracted is not None else s.text!r} ({s.how})" for s, g in zip(distinct, grades))
        return Grade(0.0, None, f"conflicting final answers: {shown[:300]}; a reply must commit to one")
    return Grade(0.0, last.extracted, f"{last.reason} (and {len(grades) - 1} other final answer(s), also wrong)")
