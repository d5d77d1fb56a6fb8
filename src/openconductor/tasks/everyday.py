"""Everyday and knowledge questions of our own (a capital, a unit conversion, a percentage, a weekday, a
spelling, ...), shipped in the package (``data/questions/everyday.jsonl``, Apache-2.0, written for this
project) and graded exactly (``exact`` with accepted forms, or ``numeric``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .base import INSTRUCTIONS, Question, Task, TaskError, need, read_local, register_task

HOW = "ships with openconductor (data/questions/everyday.jsonl); --data FILE.jsonl with the same columns replaces it"
SPLITS = ("test", "train", "all")
# One instruction for both graders: the exact grader reads the text after "Final answer:", the numeric one
# the number there.
INSTRUCTION = INSTRUCTIONS["exact"]


def packaged_path() -> Path:
    return Path(str(resources.files("openconductor") / "data" / "questions" / "everyday.jsonl"))


@register_task("everyday", description="everyday and knowledge questions of our own: capitals, conversions, percentages, weekdays, "
               "spellings, ... (offline; --task-option split=test|train|all)", how_to_get=HOW, offline=True)
def build(*, limit=None, data=None, seed=0, split: str = "test", category: str | None = None) -> Task:
    if split not in SPLITS:
        raise TaskError(f"everyday: split must be one of {', '.join(SPLITS)}, got {split!r}")
    path = Path(data) if data is not None else packaged_path()
    rows = read_local(path)
    source = str(path)
    questions = []
    for row in rows:
        if split != "all" and need(row, "split", source=source) != split:
            continue
        if category is not None and row.get("category") != category:
            continue
        grader = need(row, "grader", source=source)
        if grader not in ("exact", "numeric"):
            raise TaskError(f"{source}: question {row.get('id')!r} has grader {grader!r}; everyday questions are graded 'exact' or 'numeric'")
        questions.append(Question(id=str(need(row, "id", source=source)), prompt=need(row, "question", source=source),
                                  reference=need(row, "answer", source=source), grader=grader, grader_options=row.get("grader_options") or {},
                                  metadata={"domain": "everyday", "category": row.get("category", "")}))
    if not questions:
        raise TaskError(f"everyday: no questions in {source} with split={split!r}" + (f" and category={category!r}" if category else ""))
    return Task("everyday", questions, INSTRUCTION, domain="everyday", source=f"{source} split={split}")
