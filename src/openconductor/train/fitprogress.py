"""The live view of ``conductor fit``: one progress bar per stage (its runs, or GRPO's steps), on the console."""

from __future__ import annotations

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
        self.progress.stop()

    def stage(self, name: str, total: Optional[int]) -> None:
        if self.current is not None:
            task = self.progress.tasks[self.current]
            self.progress.update(self.current, total=task.completed or task.total)
        self.current = self.progress.add_task(name, total=total)

    def advance(self, n: int) -> None:
        if self.current is not None:
            self.progress.advance(self.current, n)

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)
