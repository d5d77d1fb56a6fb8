"""CHAMP: 270 competition-math problems with final answers, offline from the `champ-dataset` package."""

from .base import DatasetMissing, INSTRUCTIONS, Question, Task, TaskError, read_local, register_task

HOW = "Install `champ-dataset` (pip install champ-dataset), or pass --data FILE.jsonl with columns id, problem, answer[, category]."


@register_task("champ", description="CHAMP competition math, 270 problems (offline: champ-dataset package)", how_to_get=HOW, offline=True)
def build(*, limit=None, data=None, seed=0, version="v0") -> Task:
    if data is not None:
        from pathlib import Path

        rows = read_local(Path(str(data)))
        items = [(str(r.get("id", i)), r["problem"], str(r["answer"]), r.get("category")) for i, r in enumerate(rows)]
        source = str(data)
    else:
        try:
            import champ_dataset
        except ImportError as exc:
            raise DatasetMissing(f"CHAMP is not available: {exc}. {HOW}") from exc
        try:
            dataset = champ_dataset.load(version)
        except Exception as exc:
            raise TaskError(f"champ-dataset could not load version {version!r}: {exc}") from exc
        items = [(p.identifier, p.text, p.answer, p.category) for p in dataset.problems.values()]
        source = f"champ-dataset {version}"
    questions = [
        Question(id=qid, prompt=text, reference=answer, grader="math", metadata={"domain": "math", "category": category})
        for qid, text, answer, category in items
    ]
    return Task("champ", questions, INSTRUCTIONS["math"], domain="math", source=source)
