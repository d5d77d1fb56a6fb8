"""BIG-Bench Hard (BBH) and BIG-bench JSON tasks.

Sources: the hub's BBH release (``lukaemon/bbh``, one config per subtask, columns ``input``/``target``),
a local JSONL with those columns, or a BIG-bench ``task.json`` from the BIG-bench repository, whose
``examples`` hold an ``input`` and either ``target`` (free text, graded exact) or ``target_scores``
(multiple choice: the options are listed with letters and graded on the letter of the best-scoring
one). The ``bigbench`` package on PyPI cannot be installed by pip (it declares a direct-URL
dependency), so no BIG-bench data ships offline.
"""

import json
import re
from pathlib import Path

from .base import INSTRUCTIONS, LETTERS, Question, Task, TaskError, format_choices, load_rows, need, register_task

HOW = (
    "Get BBH with `datasets` (hub id lukaemon/bbh, --task-option subtask=NAME, e.g. boolean_expressions; split test), "
    "or pass --data FILE.jsonl with columns input, target, or --data path/to/task.json from the BIG-bench repository "
    "(bigbench/benchmark_tasks/<task>/task.json)."
)

_LETTER_OPTION = re.compile(r"^\(([A-Z])\)$")


def accepted_targets(target) -> list[str]:
    """The target strings a reply may give; BBH's "(A)" may also be answered as "A"."""
    targets = [target] if isinstance(target, str) else [str(t) for t in target]
    accepted: list[str] = []
    for t in (t.strip() for t in targets):
        match = _LETTER_OPTION.match(t)
        accepted += [t, match.group(1)] if match else [t]
    if not accepted or not all(accepted):
        raise TaskError(f"a BIG-bench example has an empty target: {target!r}")
    return list(dict.fromkeys(accepted))


def read_task_json(path: Path) -> tuple[list[dict], str] | None:
    """A BIG-bench task.json's (examples, task_prefix); None if the file is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("examples"), list):
        return data["examples"], str(data.get("task_prefix") or "")
    return None


def _question(i: int, row: dict, prefix: str, multiple_choice: bool, source: str, subtask: str) -> Question:
    prompt = prefix + str(need(row, "input", source=source)).strip()
    meta = {"domain": "reasoning", "subtask": subtask}
    scores = row.get("target_scores")
    if scores:
        options = list(scores)
        best = max(options, key=scores.__getitem__)  # the first of the best-scoring options
        if multiple_choice:
            return Question(id=str(row.get("id", i)), prompt=format_choices(prompt, options), grader="choice",
                            reference=LETTERS[options.index(best)], metadata=meta)
        target = [o for o in options if scores[o] == scores[best]]
    else:
        target = need(row, "target", source=source)
    return Question(id=str(row.get("id", i)), prompt=prompt, reference=accepted_targets(target), grader="exact", metadata=meta)


@register_task("bbh", description="BIG-Bench Hard / BIG-bench task.json (hub: lukaemon/bbh)", how_to_get=HOW, aliases=("bigbench",))
def build(*, limit=None, data=None, seed=0, split="test", subtask="boolean_expressions") -> Task:
    path = Path(str(data)).expanduser() if data is not None else None
    parsed = read_task_json(path) if path is not None and path.suffix == ".json" and path.exists() else None
    prefix = ""
    if parsed is not None:
        rows, prefix = parsed
        source, subtask = str(path), path.parent.name or subtask
    else:
        rows, source = load_rows(data, hub_id="lukaemon/bbh", config=subtask, split=split, how_to_get=HOW)
    # Multiple choice only when every example has scored options that letters can name.
    multiple_choice = bool(rows) and all(r.get("target_scores") and len(r["target_scores"]) <= len(LETTERS) for r in rows)
    questions = [_question(i, row, prefix, multiple_choice, source, subtask) for i, row in enumerate(rows)]
    instruction = INSTRUCTIONS["choice" if multiple_choice else "exact"]
    return Task("bbh", questions, instruction, domain="reasoning", source=source)
