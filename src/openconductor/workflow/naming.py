"""Which workers a conductor's line of reasoning names, and binding a plan's ids to them (``WorkflowFormat.names``)."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Optional, Sequence
from .model import Workflow


NAME_SLOTS = ("solve", "plan", "implement", "check", "combine")  # words a worker's name follows in a named line
_SLOT_OPENS = re.compile(rf"(?:^|[\s,:;])(?:{'|'.join(NAME_SLOTS)}) $")  # a line that now expects a name
_LONGEST_SLOT = max(map(len, NAME_SLOTS)) + 1  # the tail of a line that decides whether a slot opens


def _finished_name_chars(names: Sequence[str], name_slots: bool) -> int:
    """How far past its bound a reasoning line may run: with name slots, a name begun at the bound is finished."""
    return max(map(len, names), default=0) if name_slots else 0


def named_workers(reasoning: str, names: Sequence[str], aliases: Optional[dict[str, int]] = None) -> tuple[int, ...]:
    """The ids of the workers a line of reasoning names, in the order it names them (repeats kept). A name
    counts as a whole word only ("gpt-5" is not read inside "gpt-5-mini"); where names overlap, the longest wins.
    A hyphenated word that is no worker's name but near one (``_near_name``: "summit-ultra-7" in a pool with
    summit-ultra and zenith-ultra-7, or "zenith-ultr" cut by the line's length bound) names that worker.
    ``aliases`` (word -> id) name workers too, whole words only."""
    if not names:
        return ()
    ids = {**(aliases or {}), **{name: i for i, name in enumerate(names)}}
    alternatives = "|".join(re.escape(n) for n in sorted(ids, key=len, reverse=True) if n)
    pattern = re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-]|\.\w)")
    found = [(m.start(), m.end(), ids[m.group(0)]) for m in pattern.finditer(reasoning)]
    for m in _WORD.finditer(reasoning):
        if any(a < m.end() and m.start() < b for a, b, _ in found):
            continue
        near = _near_name(m.group(0).rstrip(".-"), names)
        if near is not None:
            found.append((m.start(), m.end(), near))
    return tuple(i for _, _, i in sorted(found))


_WORD = re.compile(r"[A-Za-z0-9][\w.+-]*")


def _near_name(word: str, names: Sequence[str]) -> Optional[int]:
    """The one worker a hyphenated word that is not its name most likely means: the name in other case; else the
    longest name the word continues with "-" ("gpt-4o" in "gpt-4o-based", "summit-ultra" in "summit-ultra-7");
    else, among the names with the word's first part, the one sharing the longest start with it ("zenith-ultra-7"
    for "zenith-ultr"); None when none or two equally (a small conductor misspells a name; it must not bind a stranger)."""
    low = word.lower()
    same = [i for i, n in enumerate(names) if n.lower() == low]
    if len(same) == 1:
        return same[0]
    if "-" not in word:
        return None
    within = sorted(((len(n), i) for i, n in enumerate(names) if low.startswith(n.lower() + "-")), reverse=True)
    if within:
        return within[0][1]
    first = low.split("-")[0]
    shared = [(len(os.path.commonprefix([low, n.lower()])), i) for i, n in enumerate(names) if n.lower().split("-")[0] == first]
    if not shared:
        return None
    shared.sort(reverse=True)
    if len(shared) > 1 and shared[0][0] == shared[1][0]:
        return None
    return shared[0][1]


def bind_named(workflow: Workflow, names: Sequence[str], aliases: Optional[dict[str, int]] = None) -> Workflow:
    """The workflow with step k's worker replaced by the k-th worker its reasoning names (``WorkflowFormat.names``'
    rule, for plans decoded without the automaton: GBNF backends, other providers)."""
    bound = named_workers(workflow.reasoning, names, aliases)
    if not bound:
        return workflow
    steps = tuple(replace(s, worker=bound[k]) if k < len(bound) else s for k, s in enumerate(workflow.steps))
    return replace(workflow, steps=steps)


