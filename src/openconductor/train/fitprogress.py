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
            self.progress.update(self.current, completed=self.progress.tasks[self.current].total or 0)
            self._line(self.current)
        self.progress.stop()

    def stage(self, name: str, total: Optional[int]) -> None:
        if self.current is not None:
            task = self.progress.tasks[self.current]
            self.progress.update(self.current, total=task.completed or task.total)
            self._line(self.current)
        self.current = self.progress.add_task(name, total=total)
        if not self.progress.console.is_terminal:  # no live bars in a log file: a line per stage instead
            self.note(f"{time.strftime('%H:%M:%S')} {name}: started" + (f" ({total:,} planned)" if total else ""))

    def _line(self, index: int) -> None:
        if not self.progress.console.is_terminal:
            task = self.progress.tasks[index]
            self.note(f"{time.strftime('%H:%M:%S')} {task.description}: {task.completed:,.0f} done in {task.elapsed or 0:.0f} s")

    def advance(self, n: int) -> None:
        if self.current is not None:
            self.progress.advance(self.current, n)

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)
