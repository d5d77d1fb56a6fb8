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

:func:`final_answers` finds the statements; :func:`judge` grades each with the grader's own check and
applies the rule. Everything is linear in the reply's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..reply import answer_blocks, strip_think
from .base import Grade
from .extract import MAX_ANSWER_CHARS, MAX_PHRASE_CHARS, boxed_spans, phrase_text, without_boxes

__all__ = ["MAX_STATEMENTS", "Statement", "final_answers", "judge", "ANSWER_HEADS"]

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
# Code a reply shows (```python ... ```) is not what it states: `print(f"Final answer: {x}")` is no answer.
_CODE_BLOCK = re.compile(r"```[ \t]*+[A-Za-z][\w+#-]*+[^\n]*+\n.*?(?:```|\Z)", re.S)
# "if the answer is 4, ...", "check whether the answer is 4": a condition, not a statement.
_CONDITION = re.compile(
    r"\b(?:if|whether|assum\w*|suppos\w*|unless|check\w*|verify\w*|verified|confirm\w*|test\w*)\s++(?:that\s++)?(?:the\s++|our\s++|my\s++)?\Z",
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


def _head_rest(seg: str, head: re.Match) -> str:
    """The text a head introduces: the rest of its line, or the next line after "Final answer:"; at most
    one character more than a phrase may hold (so a longer one is seen as too long, in bounded work)."""
    limit = MAX_PHRASE_CHARS + 1
    end = seg.find("\n", head.end(), head.end() + limit)
    rest = seg[head.end() : end if end >= 0 else head.end() + limit]
    if rest.strip(" \t*_:") or end < 0:
        return rest
    start = end + 1
    while start < len(seg) and seg[start] in " \t\r\n" and start - end < limit:  # blank lines
        start += 1
    nxt = seg.find("\n", start, start + limit)
    return seg[start : nxt if nxt >= 0 else start + limit]


def _is_condition(seg: str, head: re.Match) -> bool:
    line_start = seg.rfind("\n", 0, head.start()) + 1
    before = seg[max(line_start, head.start() - 40) : head.start()]
    return bool(_CONDITION.search(before))


def _segment_statements(seg: str, heads: re.Pattern) -> list[tuple[int, Statement]]:
    """(position, statement) of one segment: every box, every "final answer", the last plain phrase."""
    seg = _CODE_BLOCK.sub(lambda m: " " * len(m.group()), seg)
    found = [(pos, Statement(text, "\\boxed{}", True)) for pos, text in boxed_spans(seg) if "\\boxed" not in text and "\\fbox" not in text]
    last_plain: Optional[tuple[int, Statement]] = None
    for head in heads.finditer(seg):
        rest = _head_rest(seg, head)
        if _NEGATED.match(rest) or _is_condition(seg, head) or heads.match(rest.lstrip(" \t*_")):
            continue  # a negation or a condition states nothing; "Final answer: Final answer: 5" is one head
        if head.groupdict().get("final") and not head.group("verb") and seg[head.end() : head.end() + 1] not in ("\n", ""):
            continue  # "to find the final answer, we ...": a heading "Final Answer" stands on its own line
        text = phrase_text(rest)
        if text and ("\\boxed" in text or "\\fbox" in text):
            # "the answer is $\boxed{5}$": the box is counted as a box; anything else it says is a statement
            text = without_boxes(text).strip(" \t$*.")
        if not text:
            continue
        if head.groupdict().get("final"):
            found.append((head.start(), Statement(text, "'final answer'", True)))
        else:
            last_plain = (head.start(), Statement(text, "'the answer is'", False))
    if last_plain is not None:
        found.append(last_plain)
    return sorted(found, key=lambda item: item[0])


def final_answers(response: str, heads: re.Pattern = ANSWER_HEADS) -> list[Statement]:
    """The explicit answers a reply states that count under the rule (module docstring), in order.
    Empty when the reply states none: the grader then reads the reply itself."""
    visible = strip_think(response)
    blocks = answer_blocks(visible)
    if not blocks:
        return [s for _, s in _segment_statements(visible.strip()[-MAX_ANSWER_CHARS:], heads)]
    # Outside the blocks only final statements count ("\boxed{3} <answer>5</answer>" states two answers);
    # a plain "the answer is 4" there is reasoning that the block corrects.
    outside = _BLOCK.sub("\n", visible)[-MAX_ANSWER_CHARS:]
    out = [s for _, s in _segment_statements(outside, heads) if s.final]
    if len(blocks) == 1 and not out:
        return [s for _, s in _segment_statements(blocks[0][-MAX_ANSWER_CHARS:], heads)]
    for block in blocks[-_MAX_BLOCKS:]:
        block = block[-MAX_ANSWER_CHARS:]
        stated = [s for _, s in _segment_statements(block, heads)]
        out += stated or ([Statement(block, "<answer> block", True)] if block else [])
    return out


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
    grades = [grade_one(s) for s in distinct]
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
