"""What a model's reply says: the one rule for thinking and answer tags.

Every reader of model text uses this module: the executor's final answer, the server's streamed
answer, the workflow parser and every grader. The rule:

* ``<think>…</think>`` is thinking and is removed. An unclosed ``<think>`` runs to the end: a
  truncated thought holds no answer.
* A ``</think>`` while no ``<think>`` is open means the reply opened mid-thought (the chat template
  put ``<think>`` in the prompt): everything before it is thinking and is removed.
* Tags match case-insensitively; nothing else is touched by :func:`strip_think`.

:func:`answer_text` (what a user sees, the executor's final answer) also removes ``<answer>`` and
``</answer>`` tags, keeping what they hold, as the paper authors' evaluation does.
:func:`final_segment` (where graders look) is the last ``<answer>`` block if there is one;
:func:`answer_blocks` lists every block, so a grader can tell when blocks state different answers.
:class:`AnswerStream` is :func:`answer_text` applied to a stream of tokens.

Every function here is linear in the length of its input (one scan over the tags).
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["strip_think", "answer_text", "answer_block", "answer_blocks", "final_segment", "AnswerStream"]

_THINK_TAG = re.compile(r"<(/?)(think)>", re.I)
_ANSWER_TAG = re.compile(r"<(/?)answer>", re.I)
_ANY_TAG = re.compile(r"<(/?)(think|answer)>", re.I)


def _visible(text: str, tags: re.Pattern) -> str:
    """One scan over ``tags``: thinking removed by the rule; other matched tags (answer) dropped."""
    kept: list[str] = []
    start = 0  # where visible text resumes
    thinking = False
    for tag in tags.finditer(text):
        closing, is_think = bool(tag.group(1)), tag.group(tag.lastindex).lower() == "think"
        if thinking:
            if is_think and closing:
                thinking, start = False, tag.end()
            continue  # anything else inside a thought is part of it
        if is_think and closing:  # opened mid-thought: all so far was thinking
            kept.clear()
        else:
            kept.append(text[start : tag.start()])
            thinking = is_think
        start = tag.end()
    if not thinking:
        kept.append(text[start:])
    return "".join(kept)


def strip_think(text: str) -> str:
    """``text`` without its thinking (the rule in the module docstring)."""
    return _visible(text or "", _THINK_TAG)


def answer_text(text: str) -> str:
    """The reply as a user sees it: thinking removed, ``<answer>`` tags dropped, outer space trimmed."""
    return _visible(text or "", _ANY_TAG).strip()


def answer_block(text: str) -> Optional[str]:
    """Content of the last ``<answer>`` block (an unclosed last one runs to the end), or None."""
    last_open: Optional[re.Match] = None
    for tag in _ANSWER_TAG.finditer(text):
        if not tag.group(1):
            last_open = tag
    if last_open is None:
        return None
    close = _ANSWER_TAG.search(text, last_open.end())  # the next tag after it can only be a closing one
    return text[last_open.end() : close.start() if close else len(text)].strip()


def answer_blocks(text: str) -> list[str]:
    """Content of every ``<answer>`` block, in order: each runs to the next tag (an unclosed last one to
    the end), so the last item is :func:`answer_block`."""
    blocks: list[str] = []
    opened: Optional[int] = None
    for tag in _ANSWER_TAG.finditer(text):
        if opened is not None:
            blocks.append(text[opened : tag.start()].strip())
        opened = None if tag.group(1) else tag.end()
    if opened is not None:
        blocks.append(text[opened:].strip())
    return blocks


def final_segment(text: str) -> str:
    """The part of a reply that holds its answer: thinking removed, then the last <answer> block if any."""
    visible = strip_think(text)
    block = answer_block(visible)
    return block if block is not None else visible.strip()


def _partial_tag_len(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of ``text`` that could be the start of one of ``tags``."""
    tail = text[-(max(map(len, tags)) - 1) :].lower()
    for n in range(len(tail), 0, -1):
        if any(t.startswith(tail[-n:]) for t in tags):
            return n
    return 0


class AnswerStream:
    """:func:`answer_text` applied to tokens as they arrive.

    ``feed`` returns the new visible text, holding back only what could still be a tag and trailing
    whitespace, so the pieces concatenate to ``answer_text`` of the whole reply. One exception, as a
    stream cannot take text back: a reply that opens mid-thought (a ``</think>`` with none open) has
    already streamed its thinking when the tag arrives; the text after the tag streams as usual.
    """

    _TAGS = ("<think>", "</think>", "<answer>", "</answer>")

    def __init__(self) -> None:
        self._buf = ""
        self._in_think = False
        self._started = False
        self._pending_ws = ""

    def feed(self, text: str) -> str:
        self._buf += text
        out: list[str] = []
        while self._buf:
            if self._in_think:
                close = self._buf.lower().find("</think>")
                if close < 0:  # all thinking so far; keep only what may be the start of the closing tag
                    keep = _partial_tag_len(self._buf, ("</think>",))
                    self._buf = self._buf[len(self._buf) - keep :] if keep else ""
                    break
                self._buf, self._in_think = self._buf[close + len("</think>") :], False
                continue
            lt = self._buf.find("<")
            if lt < 0:
                out.append(self._buf)
                self._buf = ""
                break
            out.append(self._buf[:lt])
            rest = self._buf[lt:]
            low = rest[: len("</answer>")].lower()
            tag = next((t for t in self._TAGS if low.startswith(t)), None)
            if tag is None and any(t.startswith(low) for t in self._TAGS):
                self._buf = rest  # wait for more text to decide
                break
            if tag is None:
                out.append("<")
                self._buf = rest[1:]
                continue
            self._buf = rest[len(tag) :]
            self._in_think = tag == "<think>"
        return self._trim("".join(out))

    def finish(self) -> str:
        rest, self._buf = ("" if self._in_think else self._buf), ""
        return self._trim(rest)

    def _trim(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        text = self._pending_ws + text
        kept = text.rstrip()
        self._pending_ws = text[len(kept) :]
        return kept
