"""RLPR general-domain reasoning: free-form answers, graded numerically when the reference is a number,
else by normalised exact match. Rows may be in verl form (prompt = chat messages, reward_model.ground_truth)."""

from .base import INSTRUCTIONS, Question, Task, TaskError, load_rows, need, register_task

HOW = (
    "Get it with `datasets` (hub id openbmb/RLPR-Train-Dataset, split train, or the RLPR benchmark sets) or pass "
    "--data FILE.jsonl with columns question (or verl-style prompt messages) and answer (or reward_model.ground_truth)."
)


def _prompt(row: dict, source: str) -> str:
    prompt = need(row, "question", "prompt", "problem", source=source)
    if isinstance(prompt, list):  # chat messages: the last user turn holds the question
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise TaskError(f"{source}: a prompt has no user message")
        return str(users[-1])
    return str(prompt)


def _reference(row: dict, source: str) -> str:
    model = row.get("reward_model")
    if isinstance(model, dict) and model.get("ground_truth") is not None:
        return str(model["ground_truth"])
    return str(need(row, "answer", "ground_truth", source=source))


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", "").rstrip("%"))
        return True
    except ValueError:
        return False


@register_task("rlpr", description="RLPR general-domain reasoning (hub: openbmb/RLPR-Train-Dataset)", how_to_get=HOW)
def build(*, limit=None, data=None, seed=0, split="train") -> Task:
    rows, source = load_rows(data, hub_id="openbmb/RLPR-Train-Dataset", split=split, how_to_get=HOW)
    questions = []
    for i, row in enumerate(rows):
        reference = _reference(row, source).strip()
        numeric = _is_number(reference)
        questions.append(
            Question(
                id=str(row.get("id", i)),
                prompt=_prompt(row, source),
                reference=reference,
                grader="numeric" if numeric else "exact",
                grader_options={"rel_tol": 1e-3} if numeric else {},
                metadata={"domain": "general", "ability": row.get("ability")},
            )
        )
    return Task("rlpr", questions, INSTRUCTIONS["exact"], domain="general", source=source)
