"""GSM8K grade-school math; the reference is the number after '####' in the solution."""

from .base import INSTRUCTIONS, Question, Task, TaskError, load_rows, need, register_task

HOW = "Get it with `datasets` (hub id openai/gsm8k, config main, split test) or pass --data FILE.jsonl with columns question, answer ('... #### 42')."


def final_number(answer: str, source: str) -> str:
    if "####" not in answer:
        raise TaskError(f"{source}: a GSM8K answer has no '#### <number>' line: {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


@register_task("gsm8k", description="GSM8K grade-school math (hub: openai/gsm8k)", how_to_get=HOW)
def build(*, limit=None, data=None, seed=0, split="test") -> Task:
    rows, source = load_rows(data, hub_id="openai/gsm8k", config="main", split=split, how_to_get=HOW)
    questions = [
        Question(
            id=str(row.get("id", i)),
            prompt=need(row, "question", source=source),
            reference=final_number(str(need(row, "answer", source=source)), source),
            grader="numeric",
            metadata={"domain": "math"},
        )
        for i, row in enumerate(rows)
    ]
    return Task("gsm8k", questions, INSTRUCTIONS["numeric"], domain="math", source=source)
