"""A transparent endpoint: one worker gets the caller's messages untouched (``passthrough:WORKER``).

What people put vLLM or llama.cpp behind, so an openconductor server can be a worker of another pool. Every other
policy, ``single`` included, renders the request into the agent template (preamble, overall task, subtask), which
buries an outer workflow's own instruction; here the worker sees exactly what the caller sent (system messages,
earlier turns, tool results) and the caller's tools, response format and stop sequences go to it natively.
"""

from __future__ import annotations

from typing import Optional

from ..workflow import Step
from .base import Plan, PlanRequest, Policy, register_policy
from .baselines import SingleOptions, _plan, _worker_index

SUBTASK = "(the caller's messages, untouched)"  # recorded in the trace; the worker is not sent it


@register_policy("passthrough")
class Passthrough(Policy):
    """One worker answers the caller's messages as sent (the executor reads ``passthrough``)."""

    Options = SingleOptions
    passthrough = True  # the executor sends the caller's messages, not the agent template, and skips its echo check

    def __init__(self, worker: Optional[str | int] = None):
        self.worker = worker
        self.name = "passthrough" if worker is None else f"passthrough:{worker}"

    async def plan(self, request: PlanRequest) -> Plan:
        return _plan(self.name, [Step(_worker_index(request, self.worker), SUBTASK, ())], "passthrough: one worker, the caller's messages")
