"""Benchmarks as ``Task``s: one module per benchmark, found by ``load_task(name)``."""

from .base import (
    DatasetMissing,
    GraderUnavailable,
    Question,
    Task,
    TaskError,
    TaskInfo,
    agrade,
    check_graders,
    grade,
    load_task,
    register_task,
    task_infos,
)

__all__ = [
    "DatasetMissing", "GraderUnavailable", "Question", "Task", "TaskError", "TaskInfo", "agrade", "check_graders",
    "grade", "load_task", "register_task", "task_infos",
]
