"""The message a worker receives for one step, written and read in one place.

The executor writes it (``render``): a preamble, the overall task, each visible earlier step as a
tagged pair (``<Subtask assigned to Agent i>`` / ``<Agent i response>``, tagged by the worker id), then
"Your assigned subtask: ...". Readers get the parts back with ``parse``: tool workers act on them, the
replay store keys calls by them (``cache.worker_context``) and the simulated world decides from them.
``echoes_prompt`` tells an output that repeats this scaffolding from an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

PREAMBLE = (
    "You are one agent in a team of AI agents that together solve a task. You are assigned one "
    "subtask of the overall task. You may be shown subtasks that were assigned to other agents and "
    "their responses; use them where they help, and check them rather than trusting them blindly. "
    "Answer your assigned subtask fully and precisely."
)

SUBTASK_PREFIX = "Your assigned subtask: "

_TASK_OPEN, _TASK_CLOSE = "<Overall task>\n", "\n</Overall task>"

_EARLIER = re.compile(
    r"<Subtask assigned to Agent (\d+)>\n(.*?)\n</Subtask assigned to Agent \1>\n<Agent \1 response>\n(.*?)\n</Agent \1 response>",
    re.DOTALL,
)

# Text only ``render`` writes into a worker's prompt: an output that contains it is a copy of the prompt
# (small models, base models especially, continue or repeat their input), not an answer.
_SCAFFOLD = re.compile(r"</?Overall task>|<Subtask assigned to Agent \d+>|</?Agent \d+ response>|" + re.escape(PREAMBLE[:60]) + "|"
                       + re.escape(SUBTASK_PREFIX.strip()))


@dataclass
class WorkerContext:
    """A worker message read back into its parts."""

    question: str
    earlier: list[tuple[int, str, str]] = field(default_factory=list)  # (agent id, subtask, response) of the visible steps, in order
    subtask: str = ""


def render(question: str, earlier: Iterable[tuple[int, str, str]], subtask: str) -> str:
    """The one user message of a step: preamble, overall task, visible earlier steps, its subtask."""
    parts = [PREAMBLE, f"{_TASK_OPEN}{question}{_TASK_CLOSE}"]
    for agent, their_subtask, response in earlier:
        parts.append(
            f"<Subtask assigned to Agent {agent}>\n{their_subtask}\n</Subtask assigned to Agent {agent}>\n"
            f"<Agent {agent} response>\n{response}\n</Agent {agent} response>"
        )
    parts.append(f"{SUBTASK_PREFIX}{subtask}")
    return "\n\n".join(parts)


def message_text(messages: list[dict]) -> str:
    """The text of a call's non-system messages, as ``parse`` reads it."""
    return "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")


def read(text: str) -> Optional[WorkerContext]:
    """The parts of a message ``render`` wrote; None for text without its subtask line. A message
    without the overall-task tags reads with an empty question."""
    head, sep, subtask = text.rpartition("\n\n" + SUBTASK_PREFIX)
    if not sep:
        return None
    start, end = head.find(_TASK_OPEN), head.find(_TASK_CLOSE)
    question = head[start + len(_TASK_OPEN) : end] if 0 <= start < end else ""
    rest = head[end:] if end >= 0 else head
    earlier = [(int(m.group(1)), m.group(2), m.group(3)) for m in _EARLIER.finditer(rest)]
    return WorkerContext(question=question, earlier=earlier, subtask=subtask)


def parse(messages: list[dict]) -> WorkerContext:
    """The inverse of ``render`` over a call's messages. A message not built by it is read as a bare subtask."""
    text = message_text(messages)
    return read(text) or WorkerContext(question="", earlier=[], subtask=text)


def parse_rendered(messages: list[dict]) -> Optional[WorkerContext]:
    """The parts of a call that is exactly one message ``render`` wrote (preamble first); None otherwise."""
    if len(messages) != 1 or messages[0].get("role") != "user":
        return None
    text = str(messages[0].get("content", ""))
    return read(text) if text.startswith(PREAMBLE) else None


def echoes_prompt(output: str, messages: list[dict[str, str]]) -> bool:
    """True when a worker's output repeats its prompt's scaffolding, or is nothing but a span of what the
    executor and the conductor wrote into its prompt (preamble, question, subtasks).

    Earlier agents' responses do not count as prompt: a worker that endorses an earlier answer word for
    word (a verifier agreeing; in the simulated world the same worker in the same role) has answered.
    """
    text = (output or "").strip()
    if not text:
        return False
    if _SCAFFOLD.search(text):
        return True
    prompt = "\n".join(str(m.get("content", "")) for m in messages)
    written = _EARLIER.sub(lambda m: f"{m.group(2)}\x00", prompt)  # each response body out, one separator in
    return len(text) >= 40 and text in written
