"""The live view of ``conductor fit``: one progress bar per stage (its runs, or GRPO's steps), on the console."""

from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .fit import Hooks


class RichHooks(Hooks):
    """A bar per stage; a stage of unknown size (the copy) shows as a spinner-less bar without a total."""

    def __init__(self, console: Console):
        self.progress = Progress(TextColumn("[bold]{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=console)
        self.current: Optional[int] = None

    def __enter__(self) -> "RichHooks":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.current is not None:
            self._end(self.current)
        self.progress.stop()

    def stage(self, name: str, total: Optional[int]) -> None:
        if self.current is not None:
            self._end(self.current)
        self.current = self.progress.add_task(name, total=total)
        if not self.progress.console.is_terminal:  # no live bars in a log file: a line per stage instead
            self.note(f"{time.strftime('%H:%M:%S')} {name}: started" + (f" ({total:,} planned)" if total else ""))

    def _end(self, index: int) -> None:
        """A finished stage's bar stops its clock (a stage without a count, the copy, kept counting through the
        evaluation) and shows as full; without a terminal, its line."""
        task = self.progress.tasks[index]
        counted = task.total is not None
        if counted:
            self.progress.update(index, total=task.completed or task.total)
        else:
            self.progress.update(index, total=1, completed=1)
        self.progress.stop_task(index)
        if not self.progress.console.is_terminal:
            count = f"{task.completed:,.0f} done" if counted else "done"
            self.note(f"{time.strftime('%H:%M:%S')} {task.description}: {count} in {task.elapsed or 0:.0f} s")

    def advance(self, n: int) -> None:
        if self.current is not None:
            self.progress.advance(self.current, n)

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)
