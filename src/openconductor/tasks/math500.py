"""MATH500 (HuggingFaceH4/MATH-500): competition math with LaTeX answers, graded by the math grader."""

from .base import INSTRUCTIONS, Task, load_rows, math_questions, register_task

HOW = "Get it with `datasets` (hub id HuggingFaceH4/MATH-500, split test) or pass --data FILE.jsonl with columns problem, answer[, unique_id, subject, level]."


@register_task("math500", description="MATH500 competition math (hub: HuggingFaceH4/MATH-500)", how_to_get=HOW, aliases=("math-500",))
def build(*, limit=None, data=None, seed=0, split="test") -> Task:
    rows, source = load_rows(data, hub_id="HuggingFaceH4/MATH-500", split=split, how_to_get=HOW)
    questions = math_questions(rows, source, id_column="unique_id", metadata_columns=("subject", "level"))
    return Task("math500", questions, INSTRUCTIONS["math"], domain="math", source=source)
