"""MATH500 (HuggingFaceH4/MATH-500): competition math with LaTeX answers, graded by the math grader."""

from .base import INSTRUCTIONS, Question, Task, load_rows, need, register_task

HOW = "Get it with `datasets` (hub id HuggingFaceH4/MATH-500, split test) or pass --data FILE.jsonl with columns problem, answer[, unique_id, subject, level]."


@register_task("math500", description="MATH500 competition math (hub: HuggingFaceH4/MATH-500)", how_to_get=HOW, aliases=("math-500",))
def build(*, limit=None, data=None, seed=0, split="test") -> Task:
    rows, source = load_rows(data, hub_id="HuggingFaceH4/MATH-500", split=split, how_to_get=HOW)
    questions = [
        Question(
            id=str(row.get("unique_id") or i),
            prompt=need(row, "problem", "question", source=source),
            reference=str(need(row, "answer", source=source)),
            grader="math",
            metadata={"domain": "math", "subject": row.get("subject"), "level": row.get("level")},
        )
        for i, row in enumerate(rows)
    ]
    return Task("math500", questions, INSTRUCTIONS["math"], domain="math", source=source)
