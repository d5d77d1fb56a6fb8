"""Your own questions with answers: a JSONL (or JSON / parquet) file of ``{"question", "answer"}`` rows, graded
exactly or numerically. ``conductor eval --task questions --data my.jsonl``; the everyday task reads its
packaged file through the same rows.

Optional columns: ``id``; ``grader`` (``exact`` or ``numeric``; default ``numeric`` when the answer is one
number such as ``36``, ``-1.5``, ``45%`` or ``$1,200``, else ``exact``); ``grader_options`` (e.g.
``{"rel_tol": 0.01}``); ``kind`` (or ``category``: the question's kind, reported per kind and selectable with
``--task-option kind=NAME``). An ``answer`` may be a list of accepted strings (exact grading).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Optional

from .base import INSTRUCTIONS, DatasetMissing, Question, Task, TaskError, need, read_local, register_task

HOW = ("pass your file: --data FILE.jsonl with one {\"question\": ..., \"answer\": ...} object per line "
       "(optional: id, grader = exact|numeric, grader_options, kind)")
GRADERS = ("exact", "numeric")
# One instruction for both graders: the exact grader reads the text after "Final answer:", the numeric one
# the number there.
INSTRUCTION = INSTRUCTIONS["exact"]
_ONE_NUMBER = re.compile(r"\s*[-+]?\$?\d[\d,]*(?:\.\d+)?\s*%?\s*")


def default_grader(answer: Any) -> str:
    """``numeric`` for an answer that is one number, ``exact`` otherwise (text, a list of accepted forms)."""
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return "numeric"
    return "numeric" if isinstance(answer, str) and _ONE_NUMBER.fullmatch(answer) else "exact"


def questions_from_rows(rows: list[dict], *, source: str, domain: str, keep: Callable[[dict], bool] = lambda row: True) -> list[Question]:
    """Questions of the rows ``keep`` accepts; a row without a question or answer, or with another grader, is a
    TaskError naming the file and the row."""
    out = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise TaskError(f"{source}: row {n} is not a JSON object")
        if not keep(row):
            continue
        answer = need(row, "answer", "reference", source=source)
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = f"{answer:g}" if isinstance(answer, float) else str(answer)
        grader = row.get("grader") or default_grader(answer)
        if grader not in GRADERS:
            raise TaskError(f"{source}: row {n} has grader {grader!r}; these questions are graded {' or '.join(map(repr, GRADERS))}")
        options = row.get("grader_options") or {}
        if not isinstance(options, dict):
            raise TaskError(f"{source}: row {n}: grader_options must be a JSON object, got {type(options).__name__}")
        kind = str(row.get("kind") or row.get("category") or "")
        out.append(Question(id=str(row.get("id", n - 1)), prompt=str(need(row, "question", "prompt", source=source)), reference=answer,
                            grader=grader, grader_options=options, metadata={"domain": domain, "category": kind}))
    return out


@register_task("questions", description="your own questions with answers (--data FILE.jsonl of {question, answer}; graded exact or numeric; "
               "--task-option kind=NAME)", how_to_get=HOW, offline=True, aliases=("own",))
def build(*, limit=None, data=None, seed=0, kind: Optional[str] = None) -> Task:
    if data is None:
        raise DatasetMissing(f"the questions task reads a file of yours: {HOW}")
    path = Path(str(data)).expanduser()
    rows = read_local(path)
    questions = questions_from_rows(rows, source=str(path), domain="questions",
                                    keep=lambda row: kind is None or str(row.get("kind") or row.get("category") or "") == kind)
    if not questions:
        raise TaskError(f"{path}: no questions" + (f" of kind {kind!r}" if kind else ""))
    return Task("questions", questions, INSTRUCTION, domain="questions", source=str(path))
