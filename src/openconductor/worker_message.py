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
_SCAFFOLD = re.compile(r"</?Overall task>|</?Subtask assigned to Agent \d+>|</?Agent \d+ response>|" + re.escape(PREAMBLE[:60]) + "|"
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


# An echo is judged by what the output adds to what it copies. Copies are runs of at least this many words found
# in the prompt (shorter shared runs are coincidence: "the final answer is"), whole lines of it, and the scaffold tags.
_RUN = 6
# An output with fewer words of its own than this, beside what it copied, said nothing: an echo.
_OWN_WORDS = 3
# What an answer says of its own; where any of it is the output's own text, the output answered.
_ANSWERED = re.compile(r"final answer|answer is|\\boxed|<answer>|\d")
# An answer given anywhere in an output: a marker with something after it (not another marker, not the prompt's
# "<answer>" placeholder), a boxed value, an answer tag, or a code block.
# A program in a fence: a coder's answer, even a short or broken one; whether it runs is the evidence's and the
# grader's to say (evidence.py), not the echo check's. Only a fence copied whole from the prompt is not its own.
_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_GIVES_ANSWER = re.compile(r"\banswer(?: is)?\s*[:=]?\s*(?=[^\s:=.,;<>])(?!final\b)\S|\\boxed\{[^{}]+\}|<answer>[^<]+</answer>|```",
                           re.IGNORECASE)


_PUNCTUATION = ".,;:!?'\"`()[]{}<>*_"
# Each text compared (the reply, each part of the prompt) is read up to this many characters: an echo shows in a
# text's head, and a 900 KB prompt must cost no more than a long one (the check runs on the event loop).
_MAX_CHARS = 30_000


def _words(text: str) -> list[str]:
    """Words as compared: lower case, without the punctuation around them ("<answer>'." reads as "answer")."""
    return [w for w in (t.strip(_PUNCTUATION).lower() for t in text.split()) if w]


_PREAMBLE_WORDS = _words(PREAMBLE)  # a part of every rendered prompt: split once


def _in_scaffold(text: str, n_words: int) -> list[bool]:
    """For each of ``_words(text)`` (``n_words`` of them): whether it is part of a scaffold tag, the preamble's head or
    the subtask line's label."""
    spans = [m.span() for m in _SCAFFOLD.finditer(text)]
    if not spans:  # the common case, an answer: no word is, and no word's position need be found
        return [False] * n_words
    return [any(start < m.end() and m.start() < end for start, end in spans)
            for m in re.finditer(r"\S+", text) if m.group().strip(_PUNCTUATION)]


def _runs(sources: list[list[str]]) -> set[tuple[str, ...]]:
    return {tuple(s[i : i + _RUN]) for s in sources for i in range(len(s) - _RUN + 1)}


def _copied(words: list[str], sources: list[list[str]], runs: Optional[set[tuple[str, ...]]] = None) -> list[bool]:
    """Which of ``words`` lie in a run of ``_RUN`` words that also occurs in one of ``sources`` (``runs``: their
    runs, when already built), or in a whole source shorter than that (a short subtask repeated whole)."""
    runs = _runs(sources) if runs is None else runs
    marked = [False] * len(words)
    for i in range(len(words) - _RUN + 1):
        if tuple(words[i : i + _RUN]) in runs:
            marked[i : i + _RUN] = [True] * _RUN
    for source in (s for s in sources if 1 < len(s) < _RUN):
        for i in range(len(words) - len(source) + 1):
            if words[i : i + len(source)] == source:
                marked[i : i + len(source)] = [True] * len(source)
    return marked


def _covers_half(part: list[str], words: list[str], runs: set[tuple[str, ...]], vocabulary: set[str]) -> bool:
    """Whether the output (``words``, whose runs are ``runs`` and distinct words ``vocabulary``) reproduces at least
    half of ``part``'s words in runs (a short part repeated whole counts as all of it)."""
    if len(part) < 2:
        return False
    # A copied word is one the output has: a part with fewer than half its words in the output is not covered,
    # known without building its runs (most answers share few of the preamble's words).
    if sum(map(vocabulary.__contains__, part)) * 2 < len(part):
        return False
    return sum(_copied(part, [words], runs)) * 2 >= len(part)


def _written_parts(messages: list[dict[str, str]]) -> list[str]:
    """What the executor and the conductor wrote into the prompt: the preamble, the question, every subtask;
    the earlier agents' responses are not among them. A prompt ``render`` did not write is one part, whole."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    context = read(text)
    if context is None:
        return [text]
    return [PREAMBLE, context.question, context.subtask, *(subtask for _, subtask, _ in context.earlier)]


def _own_program(text: str, messages: list[dict[str, str]]) -> bool:
    prompt = message_text(messages)
    return any(block.strip() and block.strip() not in prompt for block in _FENCED.findall(text))


def echoes_prompt(output: str, messages: list[dict[str, str]]) -> bool:
    """True when a worker's output repeats its prompt instead of answering: it reproduces the prompt's scaffolding
    (its tags, the preamble, the subtask line) or at least half of what the executor and the conductor wrote
    (the question, a subtask), and adds fewer than ``_OWN_WORDS`` words of its own, none of them an answer.

    Quoting is not echoing: a reply that names a tag (an MoA aggregator quoting ``</Agent 1 response>``), restates
    the question or copies a function signature, then reasons and answers, has words of its own. Earlier agents'
    responses count as copied only beside copied scaffolding: a verifier that endorses an earlier answer word for
    word (in the simulated world the same worker in the same role) has answered.
    """
    text = (output or "").strip()[:_MAX_CHARS]
    if not text:
        return False
    words = _words(text)
    tagged = _in_scaffold(text, len(words))
    scaffold = any(tagged)
    if scaffold:  # with the scaffold reproduced, whatever of the prompt it wraps is a copy too (the earlier responses included)
        sources = [_words(message_text(messages)[:_MAX_CHARS])]
    else:
        sources = [_PREAMBLE_WORDS if part is PREAMBLE else _words(part[:_MAX_CHARS]) for part in _written_parts(messages)]
        output_runs, vocabulary = _runs([words]), set(words)
        if not any(_covers_half(part, words, output_runs, vocabulary) for part in sources):
            return False
    marked = [copied or tag for copied, tag in zip(_copied(words, sources), tagged)]
    own = [w for w, m in zip(words, marked) if not m]
    if len(own) < _OWN_WORDS and not _ANSWERED.search(" ".join(own)) and not _own_program(text, messages):
        return True
    # A small model that imitates its prompt opens with its scaffolding (the preamble, a subtask label) and then writes
    # more of the same ("Final answer:" lines, invented subtasks) without ever answering.
    return scaffold and all(marked[:_RUN]) and not _GIVES_ANSWER.search(text)
