"""reasoning-gym procedural generators as tasks, scored by each generator's own ``score_answer``
(except the base scorer's credit for an answer that merely contains the reference: see ``grade_reasoning_gym``).

Registered: gsm_symbolic, basic_arithmetic, countdown, and ``rg:<any generator>``. Generator options
(e.g. ``min_terms=2``) pass through ``load_task(name, **options)`` / ``conductor eval --task-option``.
The response's final answer is read by the statement rule the other text graders apply (graders/statement.py),
else the last number of the text that states something, and handed to ``score_answer``.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any, Optional

from ..graders import Grade, register_grader
from ..graders.final_answer import final_answers, judge, unstated_reply
from ..graders.statement import refusal
from .base import DatasetMissing, Question, Task, TaskError, register_task, register_task_family

HOW = "Install `reasoning-gym` (pip install reasoning-gym); it generates the questions offline."
INSTRUCTION = "Solve the problem. End your response with 'Final answer: <answer>' and nothing after it."

_MARKER = re.compile(r"\b(?:final answer|answer)\b\s*(?:is)?\s*[:=]?\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def extract_answer(response: str, *, lines: int = 1) -> str | None:
    return extract_answer_how(response, lines=lines)[0]


def extract_answer_how(response: str, *, lines: int = 1) -> tuple[str | None, str]:
    """(answer, how): how is "boxed", "marker" or "last number" (the weakest: it can hit by chance).

    After a marker the answer is its first line. Where the reference spans ``lines`` lines (an ARC
    grid), it is the first ``lines`` non-empty lines after the last marker, code fences and markdown
    emphasis dropped: text after the grid, or a second grid, is not read (reasoning-gym pays a partial
    score for any answer that contains the reference, so listing guesses must not reach it)."""
    text = (response or "").strip()
    if not text:
        return None, "empty"
    boxed = _BOXED.findall(text)
    if boxed:
        return boxed[-1].strip(), "boxed"
    markers = list(_MARKER.finditer(text))
    if markers:
        rest = text[markers[-1].start(1):]
        answer = _first_lines(rest, lines) if lines > 1 else rest.splitlines()[0].strip().rstrip(".").strip("*` $")
        if answer:
            return answer, "marker"
    numbers = _NUMBER.findall(text)
    return (numbers[-1].replace(",", ""), "last number") if numbers else (None, "none")


def _first_lines(text: str, count: int) -> str:
    rows: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if rows:
                break  # a closing fence ends the answer
            continue
        row = stripped.strip("*` $").strip()
        if row:
            rows.append(row)
            if len(rows) == count:
                break
    return "\n".join(rows)


@register_grader("reasoning_gym")
def grade_reasoning_gym(response: str, reference: Any, *, dataset: str) -> Grade:
    """The reply's stated answer scored by the generator's ``score_answer``. A one-line answer is read by the
    statement rule every text grader applies (graders/statement.py: code, quotations and restatements state
    nothing; an answer with a qualifier, an alternative or a negation is none; every final answer must
    agree). A multi-line answer (an ARC grid, often fenced) is read after the last marker, as before."""
    expected = reference.get("answer") if isinstance(reference, dict) else reference
    lines = max(1, sum(1 for row in str(expected or "").splitlines() if row.strip()))
    if lines > 1:
        extracted, how = extract_answer_how(response, lines=lines)
        if extracted is None:
            return Grade(0.0, None, "no answer found in the response")
        return _score(extracted, how, reference, expected, dataset)
    statements = final_answers(response, reference=str(expected))
    if statements:
        return judge(statements, lambda s: _score(s.text, s.how, reference, expected, dataset), key=lambda g: g.extracted)
    seg, why = unstated_reply(response)
    extracted, how = extract_answer_how(seg)
    if extracted is None:
        return Grade(0.0, None, why or "no answer found in the response")
    why = why or refusal(_sentence_of(seg, extracted), expected)
    return Grade(0.0, None, why) if why else _score(extracted, how, reference, expected, dataset)


def _sentence_of(seg: str, extracted: str) -> str:
    """The last sentence or line of ``seg`` that holds ``extracted``: what the statement rule reads for hedges."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+|\n", seg) if extracted in p.replace(",", "")]
    return parts[-1].strip() if parts else extracted


def _score(extracted: str, how: str, reference: Any, expected: Any, dataset: str) -> Grade:
    import reasoning_gym

    extracted = extracted.strip().rstrip(".").strip("*` $")
    if same_number(extracted, expected):
        # "106475279601.0" for "106475279601": the base scorer pays it only the containment credit, which
        # the rule below then zeroes, though it is the right number.
        return Grade(1.0, extracted, f"the same number as the reference {expected} (answer by {how})")
    score = float(reasoning_gym.get_score_answer_fn(dataset)(extracted, reference))
    if 0.0 < score < 1.0 and pays_for_containing(dataset):
        # The base scorer's partial credit is len(reference)/len(answer) for any answer that contains the
        # reference: "-1462.0" for "-1462", or "12 or 13" for "12". That pays hedges and sloppy formats,
        # and the fit's search and GRPO would learn them; only an exact answer is worth anything.
        return Grade(0.0, extracted, f"{dataset}.score_answer = {score:g} for an answer that only contains the "
                                     f"reference, scored 0 (answer by {how})")
    return Grade(min(max(score, 0.0), 1.0), extracted, f"{dataset}.score_answer = {score:g} (answer by {how})")


# A reference that is a number written the one plain way (no sign but "-", no leading zeros, no exponent):
# only then is another writing of the same number the same answer ("0101" as a bit string is not 101).
_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?")
# The trivial writings of a number: a sign, thousands commas, trailing zeros, an exponent, a fraction a/b.
# No leading zeros: "0101" is a different answer to "101" wherever the digits are a string (a bit string).
_NUMBER_FORM = re.compile(r"[+-]?(?:[1-9]\d{0,2}(?:,\d{3})+|[1-9]\d*|0)(?:\.\d*)?(?:[eE][+-]?\d+)?(?:/[1-9]\d*)?|[+-]?\.\d+")


def as_number(text: str) -> Optional[Fraction]:
    """``text`` as an exact number when it is one in a trivial form (see ``_NUMBER_FORM``), else None."""
    text = text.strip().rstrip(".").strip("$ ")
    if not _NUMBER_FORM.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def same_number(answer: str, reference: Any) -> bool:
    """Whether ``answer`` is the plain-number ``reference`` written another trivial way ("106475279601.0",
    "106,475,279,601", "1.06475279601e11"); exact, no tolerance."""
    if not isinstance(reference, (str, int)) or isinstance(reference, bool) or not _PLAIN_NUMBER.fullmatch(str(reference).strip()):
        return False
    value = as_number(answer)
    return value is not None and value == Fraction(str(reference).strip())


@functools.cache
def pays_for_containing(dataset: str) -> bool:
    """Whether the generator scores with reasoning-gym's base ``score_answer`` (exact, else the
    containment credit); generators with their own scorer keep their partial credit (a near duration,
    a probability off by a little), which measures closeness, not containment."""
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS

    entry = DATASETS.get(dataset)
    return entry is not None and entry[0].score_answer is ProceduralDataset.score_answer


def generate(name: str, *, limit: int | None, seed: int, options: dict) -> Task:
    try:
        import reasoning_gym
    except ImportError as exc:
        raise DatasetMissing(f"reasoning-gym is not installed: {exc}. {HOW}") from exc
    size = limit or 100
    try:
        dataset = reasoning_gym.create_dataset(name, size=size, seed=seed, **options)
    except (ValueError, TypeError, AssertionError, KeyError) as exc:
        raise TaskError(f"reasoning-gym generator {name!r} with options {options}: {exc}") from exc
    questions = []
    for i, entry in enumerate(dataset):
        # The entry itself is the reference: score_answer(answer, entry) reads its answer and metadata.
        reference = {"question": entry["question"], "answer": entry["answer"], "metadata": entry.get("metadata", {})}
        questions.append(
            Question(
                id=f"{seed}-{i}",
                prompt=entry["question"],
                reference=reference,
                grader="reasoning_gym",
                grader_options={"dataset": name},
                metadata={"domain": "reasoning", "generator": name, "options": options},
            )
        )
    return Task(name, questions, INSTRUCTION, domain="reasoning", source=f"reasoning-gym {name} seed={seed} {options or ''}".strip())


for _name, _description in [
    ("gsm_symbolic", "GSM-Symbolic word problems (offline: reasoning-gym)"),
    ("basic_arithmetic", "arithmetic expressions (offline: reasoning-gym)"),
    ("countdown", "countdown number puzzles (offline: reasoning-gym)"),
]:

    def _build(*, limit=None, data=None, seed=0, _name=_name, **options) -> Task:
        if data is not None:
            raise TaskError(f"{_name} is generated by reasoning-gym; it takes no --data file")
        return generate(_name, limit=limit, seed=seed, options=options)

    register_task(_name, description=_description, how_to_get=HOW, offline=True)(_build)


@register_task_family("rg")
def load_generator(name: str, *, limit=None, seed=0, **options) -> Task:
    """``rg:<generator>``: any reasoning-gym generator."""
    return generate(name, limit=limit, seed=seed, options=options)
