"""Everyday and knowledge questions of our own (a capital, a unit conversion, a percentage, a weekday, a
spelling, ...), shipped in the package (``data/questions/everyday.jsonl``, Apache-2.0, written for this
project) and graded exactly (``exact`` with accepted forms, or ``numeric``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .base import Task, TaskError, read_local, register_task
from .questions import INSTRUCTION, questions_from_rows

HOW = "ships with openconductor (data/questions/everyday.jsonl); --data FILE.jsonl with the same columns replaces it"
SPLITS = ("test", "train", "all")


def packaged_path() -> Path:
    return Path(str(resources.files("openconductor") / "data" / "questions" / "everyday.jsonl"))


@register_task("everyday", description="everyday and knowledge questions of our own: capitals, conversions, percentages, weekdays, "
               "spellings, ... (offline; --task-option split=test|train|all)", how_to_get=HOW, offline=True)
def build(*, limit=None, data=None, seed=0, split: str = "test", category: str | None = None) -> Task:
    if split not in SPLITS:
        raise TaskError(f"everyday: split must be one of {', '.join(SPLITS)}, got {split!r}")
    path = Path(data) if data is not None else packaged_path()

    def keep(row: dict) -> bool:
        return (split == "all" or row.get("split") == split) and (category is None or row.get("category") == category)

    questions = questions_from_rows(read_local(path), source=str(path), domain="everyday", keep=keep)
    if not questions:
        raise TaskError(f"everyday: no questions in {path} with split={split!r}" + (f" and category={category!r}" if category else ""))
    return Task("everyday", questions, INSTRUCTION, domain="everyday", source=f"{path} split={split}")
