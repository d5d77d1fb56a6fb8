"""Pulling the answer out of an LLM's free text: <think>, <answer> tags, \\boxed{}, "the answer is ..."."""

from __future__ import annotations

import re
from typing import Optional

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_UNCLOSED_THINK = re.compile(r"^.*</think>", re.S | re.I)  # a reply that starts mid-thought
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=|would\s+be|should\s+be)?\s*[:=]?\s*(.+)", re.I
)


def strip_think(text: str) -> str:
    text = _THINK.sub("", text or "")
    return _UNCLOSED_THINK.sub("", text) if "</think>" in text.lower() else text


def answer_tag(text: str) -> Optional[str]:
    """Content of the last ``<answer>…</answer>`` (an unclosed last tag runs to the end)."""
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() if found else None


def balanced(text: str, start: int) -> Optional[tuple[str, int]]:
    """``text[start]`` is ``{``: return (content, index after the matching ``}``), or None."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "\\":
            continue
        if ch == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif ch == "}" and (i == 0 or text[i - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def boxed_all(text: str) -> list[str]:
    """Contents of every ``\\boxed{…}`` / ``\\fbox{…}`` (nested braces kept), and ``\\boxed 5``."""
    out: list[str] = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*(\{)?", text):
        if m.group(1):
            got = balanced(text, m.end() - 1)
            if got:
                out.append(got[0].strip())
        else:
            tail = re.match(r"\s*([^\s$]+)", text[m.end() :])
            if tail:
                out.append(tail.group(1))
    return out


def last_boxed(text: str) -> Optional[str]:
    found = boxed_all(text)
    return found[-1] if found else None


def answer_phrase(text: str) -> Optional[str]:
    """What follows the last "answer is" / "Answer:" on its line, without trailing punctuation."""
    found = None
    for line in text.splitlines():
        for m in _ANSWER_PHRASE.finditer(line):
            found = m.group(1)
    if found is None:
        return None
    found = found.strip().strip("*").strip()
    math_span = re.search(r"\$+([^$]+)\$+|\\\((.+?)\\\)", found)
    if math_span:  # "the answer is $\frac12$ since ..." -> the inline math
        return (math_span.group(1) or math_span.group(2)).strip() or None
    # End at the sentence or the justification: "5. Let me check", "7 because ...". "3.5" stays whole.
    found = re.split(r"[.。!;](?:\s|$)|\s+(?:because|since|as|so|which|where|given)\b", found, maxsplit=1)[0]
    return found.strip().strip("*").strip() or None


def final_segment(response: str) -> str:
    """The part that holds the answer: <think> removed, the last <answer> block if there is one."""
    text = strip_think(response)
    tagged = answer_tag(text)
    return tagged if tagged is not None else text.strip()
