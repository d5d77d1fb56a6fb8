"""The live view of ``conductor fit``: one progress bar per stage (its runs, or GRPO's steps), on the console; or,
when stdout is not a terminal, one JSON object a line (``JsonHooks``) that a script can read."""

from __future__ import annotations

import json
import time
from typing import IO, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .state import Hooks


class RichHooks(Hooks):
    """A bar per stage; a stage of unknown size (the copy) shows as a spinner-less bar without a total."""

    def __init__(self, console: Console):
        self.progress = Progress(TextColumn("[bold]{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=console)
        self.current: Optional[int] = None

    def __enter__(self) -> "RichHooks":
        self.progress.start()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if self.current is not None:
            if kind is not None and issubclass(kind, KeyboardInterrupt):
                self._interrupt(self.current)  # not "done" with a full bar: it stopped part-way
            else:
                self._end(self.current)
        self.progress.stop()

    def _interrupt(self, index: int) -> None:
        task = self.progress.tasks[index]
        name = task.description
        self.progress.update(index, description=f"{name} (interrupted)")
        self.progress.stop_task(index)
        self.note(f"{time.strftime('%H:%M:%S')} {name}: interrupted after {task.elapsed or 0:.0f} s "
                  f"({task.completed:,.0f} done); the same command goes on from here")

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


class JsonHooks(Hooks):
    """One JSON object a line, no bars: for stdout that is a file or a pipe. Each object has an ``event``: "stage"
    (a stage starts: ``stage``, ``total``), "stage_end" (``stage``, ``done``, ``seconds``), "note" (``text``),
    "interrupted" (``stage``, ``done``, ``seconds``)."""

    def __init__(self, stream: IO[str]):
        self.stream, self.current, self.done, self.started = stream, "", 0, 0.0

    def emit(self, event: str, **fields) -> None:
        self.stream.write(json.dumps({"event": event, "time": time.strftime("%H:%M:%S"), **fields}) + "\n")
        self.stream.flush()

    def __enter__(self) -> "JsonHooks":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if not self.current:
            return
        interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
        self.emit("interrupted" if interrupted else "stage_end", stage=self.current, done=self.done, seconds=round(time.monotonic() - self.started, 1))
        self.current = ""

    def stage(self, name: str, total: Optional[int]) -> None:
        self.__exit__(None, None, None)
        self.current, self.done, self.started = name, 0, time.monotonic()
        self.emit("stage", stage=name, total=total)

    def advance(self, n: int) -> None:
        self.done += n

    def note(self, text: str) -> None:
        self.emit("note", text=text)
