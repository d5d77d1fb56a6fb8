"""GPQA-Diamond (198 graduate-level science questions). The options are shuffled per question with a
fixed seed, so the correct letter is not always A and every run sees the same order."""

import random

from .base import INSTRUCTIONS, LETTERS, Question, Task, format_choices, load_rows, need, register_task

HOW = (
    "GPQA is gated: accept its terms at https://huggingface.co/datasets/Idavidrein/gpqa, `huggingface-cli login`, "
    "then `datasets` loads Idavidrein/gpqa (config gpqa_diamond, split train); or pass --data FILE.jsonl with columns "
    "Question, Correct Answer, Incorrect Answer 1, Incorrect Answer 2, Incorrect Answer 3."
)


@register_task("gpqa-diamond", description="GPQA-Diamond science MCQ (hub: Idavidrein/gpqa, gated)", how_to_get=HOW, aliases=("gpqa",))
def build(*, limit=None, data=None, seed=0, split="train") -> Task:
    rows, source = load_rows(data, hub_id="Idavidrein/gpqa", config="gpqa_diamond", split=split, how_to_get=HOW)
    questions = []
    for i, row in enumerate(rows):
        qid = str(row.get("Record ID", i))
        correct = str(need(row, "Correct Answer", source=source)).strip()
        options = [correct] + [str(need(row, f"Incorrect Answer {k}", source=source)).strip() for k in (1, 2, 3)]
        random.Random(f"{seed}|{qid}").shuffle(options)
        questions.append(
            Question(
                id=qid,
                prompt=format_choices(need(row, "Question", source=source), options),
                reference=LETTERS[options.index(correct)],
                grader="choice",
                metadata={"domain": "science", "subject": row.get("High-level domain")},
            )
        )
    return Task("gpqa-diamond", questions, INSTRUCTIONS["choice"], domain="science", source=source)
