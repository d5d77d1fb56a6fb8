"""Benchmarks as ``Task``s: one module per benchmark, found by ``load_task(name)``."""

from .base import (
    DatasetMissing,
    GradeResult,
    GraderUnavailable,
    Question,
    Task,
    TaskError,
    TaskInfo,
    grade,
    load_task,
    register_grader,
    register_task,
    task_infos,
)

__all__ = [
    "DatasetMissing", "GradeResult", "GraderUnavailable", "Question", "Task", "TaskError", "TaskInfo", "grade",
    "load_task", "register_grader", "register_task", "task_infos",
]
