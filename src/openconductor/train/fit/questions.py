"""The questions of a fit: training questions per group (a task, or a kind of a user's file) and held-out ones.

From registered tasks (``--task``, default the training kinds of ``tasks/kinds.py``): each task's training
questions come from seed 0 and its held-out ones from ``HELD_OUT_SEED`` (the seed the docs' held-out tables
use), never the same text (``train.data.load_items`` draws both). From a user's JSONL (``--questions``, the
``questions`` task's format): the rows are shuffled with the fit's seed and split per kind, a fifth of each
kind held out. Extra held-out tasks (``--eval-task``) are evaluated but never trained on: they measure what
the conductor does on kinds it never saw.

Every question's group is its domain: the search screens candidates per group and the per-task lookup
table keys on it.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...tasks.kinds import HELD_OUT_SEED, TRAIN_KINDS, TRAIN_OPTIONS
from ..config import TrainConfigError
from ..data import Item

UNSEEN = "unseen"  # the label of held-out questions of groups the fit never trains on (--eval-task)


class FitDataError(TrainConfigError):
    """Questions a fit cannot use: an unknown task, too few questions, a bad file."""


@dataclass
class FitQuestions:
    train: list[Item]
    held_out: list[Item]  # of the training groups
    unseen: list[Item] = field(default_factory=list)  # of groups never trained on

    @property
    def groups(self) -> list[str]:
        """The training groups, in the order the training questions first name them."""
        return list(dict.fromkeys(item.domain for item in self.train))

    def of(self, group: str) -> list[Item]:
        return [item for item in self.train if item.domain == group]

    def digest(self) -> str:
        """What decides the training stages: the training questions' texts, groups and graders, in order.
        The evaluation's questions are not in it, so a rerun with another ``--eval-n`` redoes only the evaluation."""
        return _digest(self.train)

    def eval_digest(self) -> str:
        """What decides the evaluation's questions (held-out and unseen kinds)."""
        return _digest(self.held_out + self.unseen)


def _digest(items: list[Item]) -> str:
    parts = [[i.question, i.domain, i.task] for i in items]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def task_questions(tasks: list[str], per_task: int, eval_per_task: int, *, options: Optional[dict[str, dict[str, Any]]] = None,
                   seed: int = 0, eval_seed: int = HELD_OUT_SEED) -> tuple[list[Item], list[Item]]:
    """(training, held-out) questions of registered tasks, ``per_task`` and ``eval_per_task`` each, through the
    trainer's own loader (so a fit trains on exactly what ``conductor train`` would)."""
    from ..config import DataSettings, TrainConfig
    from ..data import load_items

    opts = {t: dict(o) for t, o in (TRAIN_OPTIONS if options is None else options).items() if t in tasks}
    data = DataSettings(kind="tasks", tasks=list(tasks), task_options=opts, n_train=per_task * len(tasks), n_eval=eval_per_task * len(tasks),
                        seed=seed, eval_seed=eval_seed)
    cfg = TrainConfig(pool="default", data=data)
    return load_items(cfg), (load_items(cfg, held_out=True) if eval_per_task else [])


def file_questions(path: Path, per_group: int, eval_share: float = 0.2, *, seed: int = 0) -> tuple[list[Item], list[Item]]:
    """(training, held-out) questions of a user's JSONL: per kind (``kind``/``category``; one group
    ``questions`` without), shuffled with ``seed``, ``eval_share`` held out (at least one where a kind has
    two or more), at most ``per_group`` of the rest kept for training."""
    from ...tasks import TaskError, load_task

    try:
        task = load_task("questions", data=str(path))
    except (TaskError, OSError) as exc:
        raise FitDataError(f"--questions {path}: {exc}") from exc
    by_group: dict[str, list[Item]] = {}
    for q in task.questions:
        group = str(q.metadata.get("category") or "questions")
        by_group.setdefault(group, []).append(Item(task.text(q), q.reference, q.grader, group, dict(q.grader_options), bare=q.prompt))
    rng = random.Random(f"fit-questions|{seed}")
    train: list[Item] = []
    held: list[Item] = []
    for items in by_group.values():
        rng.shuffle(items)
        n_held = max(1, round(eval_share * len(items))) if len(items) >= 2 else 0
        held += items[:n_held]
        train += items[n_held:][:per_group]
    if not train:
        raise FitDataError(f"--questions {path}: no training questions left after holding out {eval_share:.0%} per kind")
    return _rotate(train), held


def unseen_questions(tasks: list[str], per_task: int, *, options: Optional[dict[str, dict[str, Any]]] = None, seed: int = HELD_OUT_SEED,
                     training: set[str] = frozenset()) -> list[Item]:
    """Held-out questions of tasks never trained on (``--eval-task``), ``per_task`` each, from ``seed``."""
    from ...tasks import TaskError, load_task

    out: list[list[Item]] = []
    for name in tasks:
        kwargs = dict((options or {}).get(name, {}))
        try:
            task = load_task(name, limit=per_task, seed=seed, **kwargs)
        except TaskError as exc:
            raise FitDataError(f"--eval-task: {exc}") from exc
        if task.name in training:
            raise FitDataError(f"--eval-task {name}: the fit trains on {task.name!r}; an evaluation task must be one it never sees")
        out.append([Item(task.text(q), q.reference, q.grader, task.name, dict(q.grader_options), bare=q.prompt if task.instruction else "")
                    for q in task.questions])
    return [item for group in out for item in group]


def fit_questions(*, tasks: Optional[list[str]], questions: Optional[Path], per_task: int, eval_per_task: int, eval_tasks: list[str],
                  eval_options: Optional[dict[str, dict[str, Any]]] = None, seed: int = 0) -> FitQuestions:
    """The fit's questions from ``tasks`` (default: the training kinds) or a ``questions`` file (not both)."""
    if tasks and questions is not None:
        raise FitDataError("give --task or --questions, not both: a fit trains on registered tasks or on your file")
    if eval_tasks and eval_per_task < 1:
        raise FitDataError(f"--eval-task {eval_tasks[0]} needs held-out questions, but --eval-n is {eval_per_task}: "
                           "give --eval-n 1 or more, or leave out --eval-task to skip the evaluation")
    if questions is not None:
        train, held = file_questions(questions, per_task, seed=seed)
    else:
        train, held = task_questions(list(tasks or TRAIN_KINDS), per_task, eval_per_task, seed=seed)
    trained = {item.domain for item in train}
    unseen = unseen_questions(eval_tasks, eval_per_task, options=eval_options, training=trained) if eval_tasks else []
    return FitQuestions(train, held, unseen)


def _rotate(items: list[Item]) -> list[Item]:
    """Groups in rotation (as the trainer's loader orders tasks), so any stretch of training sees all of them."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        groups.setdefault(item.domain, []).append(item)
    lanes = list(groups.values())
    return [lane[i] for i in range(max(map(len, lanes))) for lane in lanes if i < len(lane)]
