"""The events of a run (``Event``): what the live CLI view, the server's stream and the trace store subscribe to, and
how the executor hands them to a handler."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Awaitable, Callable, Literal, Optional, Union

from .records import Run, StepRecord


EventType = Literal["run_started", "plan", "step_started", "step_token", "step_retry", "step_finished", "run_finished"]


@dataclass
class Event:
    """What the live CLI view, the server's stream and the trace store subscribe to."""

    type: EventType
    run: Run
    step: Optional[StepRecord] = None
    text: str = ""  # the new tokens, for step_token

    @property
    def is_final_step(self) -> bool:
        return self.step is not None and self.run.depth == 0 and self.step.index == len(self.run.steps) - 1


EventHandler = Callable[[Event], Union[None, Awaitable[None]]]


async def _emit(handler: Optional[EventHandler], event: Event) -> None:
    if handler is None:
        return
    result = handler(event)
    if inspect.isawaitable(result):
        await result


def _emit_soon(handler: Optional[EventHandler], event: Event) -> None:
    """``_emit`` from a plain function: an awaitable the handler returns runs as a task on this loop."""
    if handler is None:
        return
    result = handler(event)
    if inspect.isawaitable(result):
        asyncio.ensure_future(result)
