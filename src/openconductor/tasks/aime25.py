"""AIME 2025 (30 problems, integer answers 0..999), graded by the math grader."""

from .base import INSTRUCTIONS, Task, load_rows, math_questions, register_task

HOW = "Get it with `datasets` (hub id math-ai/aime25, split test) or pass --data FILE.jsonl with columns problem (or question), answer[, id]."


@register_task("aime25", description="AIME 2025 (hub: math-ai/aime25)", how_to_get=HOW, aliases=("aime2025",))
def build(*, limit=None, data=None, seed=0, split="test") -> Task:
    rows, source = load_rows(data, hub_id="math-ai/aime25", split=split, how_to_get=HOW)
    questions = math_questions(rows, source, id_column="id")
    return Task("aime25", questions, INSTRUCTIONS["math"], domain="math", source=source)
