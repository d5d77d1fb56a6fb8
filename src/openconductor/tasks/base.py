"""Tasks: a named question set with references, an answer-format instruction and a grader kind.

A benchmark is one module in this package that calls ``register_task``; ``load_task(name)`` builds it.
Real datasets come from the Hugging Face hub through ``datasets`` or from a local JSONL/parquet file
with the same columns; a missing one raises ``DatasetMissing`` saying how to get it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ..graders import Grade


class TaskError(ValueError):
    """A task that cannot be built (unknown name, bad options, malformed rows)."""


class DatasetMissing(TaskError):
    """The data a task needs is not available; the message says how to get it."""


class GraderUnavailable(RuntimeError):
    """A question needs a grader kind that is not registered (a typo, or a task module not imported)."""


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    prompt: str  # the question text, without the answer-format instruction
    reference: Any  # what the grader compares against (answer string, letter, tests, generator entry)
    grader: str  # grader kind: math | choice | numeric | exact | code | reasoning_gym | ...
    grader_options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)  # domain, subject, difficulty, ...


@dataclass
class Task:
    name: str
    questions: list[Question]
    instruction: str = ""  # appended to every question: how to format the final answer
    domain: str = ""
    source: str = ""  # where the questions came from (package, hub id or file), for the report

    def text(self, question: Question) -> str:
        """What the policy is asked: the question, then the answer-format instruction."""
        return f"{question.prompt}\n\n{self.instruction}" if self.instruction else question.prompt

    def __len__(self) -> int:
        return len(self.questions)


# ------------------------------------------------------------------------------------------ graders


def grade(question: Question, response: str) -> "Grade":
    """Grade a response with the question's grader kind (``openconductor.graders``, the one registry)."""
    from ..graders import grade as grade_kind

    return grade_kind(question.grader, response, question.reference, **question.grader_options)


async def agrade(question: Question, response: str) -> "Grade":
    """Async :func:`grade`, for async code (evaluation, training): never blocks the event loop."""
    from ..graders import agrade as agrade_kind

    return await agrade_kind(question.grader, response, question.reference, **question.grader_options)


def check_graders(questions: list[Question]) -> None:
    """Raise GraderUnavailable (before any model call) if a question names a grader kind nobody registered."""
    from ..graders import grader_kinds

    _discover()  # task modules register their kinds (reasoning_gym) on import
    missing = sorted({q.grader for q in questions} - set(grader_kinds()))
    if missing:
        raise GraderUnavailable(
            f"no grader registered for kind(s) {', '.join(map(repr, missing))}; registered: {', '.join(grader_kinds())}. "
            "A new kind is one function decorated with openconductor.graders.register_grader"
        )


# ---------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class TaskInfo:
    name: str
    build: Callable[..., Task]
    description: str
    how_to_get: str  # shown when the data is missing
    offline: bool = False  # ships inside an installed package
    aliases: tuple[str, ...] = field(default_factory=tuple)


_TASKS: dict[str, TaskInfo] = {}


# prefix -> a builder of the tasks named "<prefix>:<generator>" (``rg:`` in reasoning_gym_tasks.py: any reasoning-gym generator)
_FAMILIES: dict[str, Callable[..., Task]] = {}


def register_task_family(prefix: str):
    """Register a builder of every task named ``<prefix>:<name>``; it is called as ``build(name, limit=, seed=, **options)``."""

    def deco(fn):
        _FAMILIES[prefix.lower()] = fn
        return fn

    return deco


def register_task(name: str, *, description: str, how_to_get: str, offline: bool = False, aliases: tuple[str, ...] = ()):
    def deco(build: Callable[..., Task]) -> Callable[..., Task]:
        info = TaskInfo(name, build, description, how_to_get, offline, aliases)
        for key in (name, *aliases):
            _TASKS[key.lower()] = info
        return build

    return deco


def _discover() -> None:
    import importlib
    import pkgutil

    from .. import tasks as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name != "base":
            importlib.import_module(f"{package.__name__}.{module.name}")


def task_infos() -> list[TaskInfo]:
    _discover()
    return sorted({id(i): i for i in _TASKS.values()}.values(), key=lambda i: i.name)


def load_task(name: str, *, limit: Optional[int] = None, data: Optional[str | Path] = None, seed: int = 0, offset: int = 0, **options) -> Task:
    """Build a registered task. ``data`` is a local file (or hub id) that overrides the default source.

    ``limit`` keeps N questions (in the source's order; procedural tasks generate them) after the
    first ``offset`` ones, so disjoint splits of one source are ``offset=0`` and ``offset=N``.
    """
    _discover()
    key = name.lower()
    if limit is not None and limit < 1:
        raise TaskError(f"limit must be >= 1, got {limit}")
    if offset < 0:
        raise TaskError(f"offset must be >= 0, got {offset}")
    wanted = None if limit is None else offset + limit
    family = next((prefix for prefix in _FAMILIES if key.startswith(f"{prefix}:")), None)
    if family is not None:
        task = _FAMILIES[family](name[len(family) + 1:], limit=wanted, seed=seed, **options)
    elif key in _TASKS:
        info = _TASKS[key]
        try:
            task = info.build(limit=wanted, data=data, seed=seed, **options)
        except TypeError as exc:
            raise TaskError(f"task {info.name!r}: bad option(s) {sorted(options)}: {exc}") from exc
    else:
        known = ", ".join(i.name for i in task_infos())
        raise TaskError(f"unknown task {name!r}; known tasks: {known}")
    task.questions = task.questions[offset:wanted]
    if not task.questions:
        raise TaskError(f"task {task.name!r} has no questions" + (f" after the first {offset}" if offset else "") + f" (source: {task.source})")
    return task


# ----------------------------------------------------------------------------------- data sources


def read_local(path: Path) -> list[dict]:
    """Rows of a local JSONL, JSON (a list) or parquet file."""
    if not path.exists():
        raise DatasetMissing(f"local data file not found: {path}")
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    try:
        if suffix in (".jsonl", ".jsonl.gz"):
            import gzip

            opener = gzip.open if suffix.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]
        if suffix == ".json":
            rows = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(rows, list):
                raise TaskError(f"{path}: a .json data file must hold a list of objects")
            return rows
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON: {exc}") from exc
    raise TaskError(f"{path}: unsupported data file type {suffix!r}; use .jsonl, .jsonl.gz, .json or .parquet")


def load_rows(
    data: Optional[str | Path],
    *,
    hub_id: str,
    config: Optional[str] = None,
    split: str = "test",
    how_to_get: str,
) -> tuple[list[dict], str]:
    """Rows from a local file if ``data`` names one, else from the hub through ``datasets``."""
    if data is not None and (Path(str(data)).suffix or Path(str(data)).exists()):
        path = Path(str(data)).expanduser()
        if not path.exists():
            raise DatasetMissing(f"local data file not found: {path}. {how_to_get}")
        return read_local(path), str(path)
    source = str(data) if data is not None else hub_id
    try:
        import datasets
    except ImportError as exc:
        raise DatasetMissing(f"the `datasets` package is not installed (pip install 'openconductor[eval]'). {how_to_get}") from exc
    try:
        ds = datasets.load_dataset(source, config, split=split)
    except Exception as exc:  # datasets raises many kinds (offline, gated, missing config)
        raise DatasetMissing(
            f"could not load {source!r} (config {config!r}, split {split!r}) through `datasets`: "
            f"{type(exc).__name__}: {str(exc)[:300]}. {how_to_get}"
        ) from exc
    return [dict(row) for row in ds], f"{source}:{config or ''}:{split}"


def need(row: dict, *keys: str, source: str) -> Any:
    """The first of ``keys`` present in a row; a typed error naming the columns otherwise."""
    for key in keys:
        if key in row and row[key] is not None:
            return row[key]
    raise TaskError(f"{source}: a row has none of the columns {keys}; it has {sorted(row)}")


def math_questions(rows: list[dict], source: str, *, id_column: str, metadata_columns: tuple[str, ...] = ()) -> list[Question]:
    """Math-graded questions from rows with a problem (or question) and an answer column; the id is the
    row's ``id_column`` when it has one, else its position."""
    return [
        Question(
            id=str(row[id_column]) if row.get(id_column) is not None else str(i),
            prompt=need(row, "problem", "question", source=source),
            reference=str(need(row, "answer", source=source)),
            grader="math",
            metadata={"domain": "math", **{key: row.get(key) for key in metadata_columns}},
        )
        for i, row in enumerate(rows)
    ]


LETTERS = "ABCDEFGHIJ"


def format_choices(question: str, choices: list[str]) -> str:
    return question.strip() + "\n\n" + "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


INSTRUCTIONS = {
    "math": "Solve the problem. Put your final answer within \\boxed{}.",
    "numeric": "Solve the problem. End your response with 'Final answer: <number>'.",
    "choice": "Answer with the letter of the correct option. End your response with 'Answer: <letter>'.",
    "exact": "End your response with 'Final answer: <answer>'.",
    "code": "Write a complete Python solution in one ```python code block.",
}
