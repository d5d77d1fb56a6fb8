"""MMLU multiple choice (57 subjects); graded on the option letter."""

from .base import INSTRUCTIONS, LETTERS, Question, Task, TaskError, format_choices, load_rows, need, register_task

HOW = "Get it with `datasets` (hub id cais/mmlu, config all, split test) or pass --data FILE.jsonl with columns question, choices (list), answer (index 0-3 or letter)[, subject]."


def answer_letter(answer, n: int, source: str) -> str:
    if isinstance(answer, int) and 0 <= answer < n:
        return LETTERS[answer]
    if isinstance(answer, str) and answer.strip().upper() in LETTERS[:n]:
        return answer.strip().upper()
    raise TaskError(f"{source}: answer {answer!r} is neither an index nor a letter of {n} choices")


@register_task("mmlu", description="MMLU multiple choice (hub: cais/mmlu)", how_to_get=HOW)
def build(*, limit=None, data=None, seed=0, split="test", subject="all") -> Task:
    rows, source = load_rows(data, hub_id="cais/mmlu", config=subject, split=split, how_to_get=HOW)
    questions = []
    for i, row in enumerate(rows):
        choices = list(need(row, "choices", source=source))
        questions.append(
            Question(
                id=str(row.get("id", i)),
                prompt=format_choices(need(row, "question", source=source), choices),
                reference=answer_letter(need(row, "answer", source=source), len(choices), source),
                grader="choice",
                metadata={"domain": "knowledge", "subject": row.get("subject")},
            )
        )
    return Task("mmlu", questions, INSTRUCTIONS["choice"], domain="knowledge", source=source)
