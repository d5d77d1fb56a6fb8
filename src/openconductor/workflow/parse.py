"""Reading a conductor's output into a ``Workflow`` (three-list text or JSON) and checking it against a pool."""

from __future__ import annotations

import ast
import json
import re
from typing import Sequence

from ..reply import strip_think
from .model import (
    _normalise_access,
    DEFAULT_MAX_STEPS, FORMAT_ACCESS, FORMAT_IDS, FORMAT_REASON, FORMAT_SUBTASKS, BadAccessError, EmptyWorkflowError,
    LengthMismatchError, Step, TooManyStepsError, UnknownWorkerError, Workflow, WorkflowParseError,
)
from .naming import bind_named

_LABELS = {
    "model_id": r"model[ _]?ids?",
    "subtasks": r"subtasks?",
    "access_list": r"access(?:[ _]?lists?)?",
}
_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.MULTILINE)
_CURLY = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})


def clean_output(text: str) -> str:
    """Strip what models wrap plans in: <think> blocks, code fences, backticks, bullets, curly quotes."""
    text = strip_think(text)
    text = _FENCE.sub("", text).replace("`", "")
    text = _BULLET.sub("", text)
    return text.translate(_CURLY)


def _balanced_list(text: str, start: int) -> str | None:
    """The first bracket-balanced ``[...]`` at or after ``start``, aware of quotes and escapes."""
    open_at = text.find("[", start)
    if open_at < 0:
        return None
    def apostrophe(i: int) -> bool:
        # A ' inside a word ("don't") neither opens nor closes a string.
        return text[i] == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()

    depth, quote, escaped = 0, None, False
    for i in range(open_at, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote and not apostrophe(i):
                quote = None
            continue
        if ch in "\"'":
            if apostrophe(i):
                continue
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return text[open_at : i + 1]
    return None


def _literal(raw: str):
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(re.sub(r"(?<![A-Za-z])'|'(?![A-Za-z])", '"', raw))
    except json.JSONDecodeError:
        pass
    inner = raw.strip()[1:-1]
    if not inner.strip():
        return []
    items = []
    for part in inner.split(","):
        part = part.strip().strip("\"'").strip()
        items.append(int(part) if re.fullmatch(r"-?\d+", part) else part)
    return items


def _find_list(text: str, label: str) -> list | None:
    pattern = re.compile(rf"(?<![A-Za-z_]){_LABELS[label]}\s*[:=]", re.IGNORECASE)
    # The last labelled list wins: reasoning often mentions a draft before the final answer.
    found = None
    for match in pattern.finditer(text):
        raw = _balanced_list(text, match.end())
        if raw is None:
            continue
        # Only a list that directly follows the label counts (not one three paragraphs later).
        if text[match.end() : text.find("[", match.end())].strip():
            continue
        value = _literal(raw)
        if isinstance(value, (list, tuple)):
            found = list(value)
    return found


def _as_worker_id(value, index: int) -> int:
    if isinstance(value, bool):
        raise WorkflowParseError(f"step {index}: model id must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise WorkflowParseError(f"step {index}: model id must be an integer, got {value!r}")


def _reasoning_before(text: str) -> str:
    match = re.search(rf"(?<![A-Za-z_]){_LABELS['model_id']}\s*[:=]", text, re.IGNORECASE)
    return (text[: match.start()] if match else text).strip()


def _parse_json_form(text: str) -> Workflow | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    if "steps" in data and isinstance(data["steps"], list):
        try:
            steps = [
                Step(
                    _as_worker_id(s.get("worker", s.get("model_id")), i),
                    str(s.get("subtask", "")),
                    _normalise_access(s.get("access", s.get("access_list", [])), i),
                )
                for i, s in enumerate(data["steps"])
            ]
        except (AttributeError, KeyError) as exc:
            raise WorkflowParseError(f"JSON workflow step is malformed: {exc}") from exc
        return Workflow(tuple(steps), reasoning=str(data.get("reasoning", text[:start])).strip())
    if {"model_id", "subtasks", "access_list"} <= data.keys():
        return _from_lists(data["model_id"], data["subtasks"], data["access_list"], text[:start].strip())
    return None


def _from_lists(ids, subtasks, access, reasoning: str) -> Workflow:
    if not (isinstance(ids, list) and isinstance(subtasks, list) and isinstance(access, list)):
        raise WorkflowParseError("model_id, subtasks and access_list must each be a list")
    if not (len(ids) == len(subtasks) == len(access)):
        raise LengthMismatchError(
            f"the three lists differ in length: model_id has {len(ids)}, subtasks {len(subtasks)}, "
            f"access_list {len(access)}; each step needs one entry in every list"
        )
    steps = tuple(
        Step(_as_worker_id(w, i), str(s).strip(), _normalise_access(a, i))
        for i, (w, s, a) in enumerate(zip(ids, subtasks, access))
    )
    return Workflow(steps, reasoning=reasoning)


def _parse_canonical(text: str) -> Workflow | None:
    """Exactly the form render() and the grammar write (JSON lists at fixed places), read exactly: a
    subtask that happens to contain "model_id = [" cannot confuse it. None for any other text."""
    first, newline, rest = text.strip().partition("\n")
    if not newline or not first.startswith(FORMAT_REASON) or not rest.startswith(FORMAT_IDS[:-1]):
        return None
    decoder, pos, lists = json.JSONDecoder(), len(FORMAT_IDS) - 1, []
    for label in (FORMAT_SUBTASKS[1:-1], FORMAT_ACCESS[1:-1], None):
        try:
            value, pos = decoder.raw_decode(rest, pos)
        except json.JSONDecodeError:
            return None
        if not isinstance(value, list):
            return None
        lists.append(value)
        if label is not None:
            if not rest.startswith(label, pos):
                return None
            pos += len(label)
    if rest[pos:].strip():
        return None
    ids, subtasks, access = lists
    return _from_lists(ids, subtasks, access, first)


def parse(text: str, *, allow_empty: bool = False) -> Workflow:
    """Parse a conductor's output (three-list text or JSON) into an unvalidated Workflow.

    Raises WorkflowParseError / LengthMismatchError. ``allow_empty`` accepts three empty lists
    (a recursive round accepting the previous answer).
    """
    if not isinstance(text, str) or not text.strip():
        raise WorkflowParseError("the conductor returned no text")
    canonical = _parse_canonical(text)
    if canonical is not None:
        if not canonical.steps and not allow_empty:
            raise EmptyWorkflowError("the workflow has no steps; give at least one step")
        return canonical
    cleaned = clean_output(text)
    lists = {label: _find_list(cleaned, label) for label in _LABELS}
    # The cleaned text decides which lists are the plan; their subtasks are read again from the text as
    # written, where they are the same lists, so a ```python block in a subtask (code for a tool
    # worker) keeps its fence.
    raw = {label: _find_list(strip_think(text).translate(_CURLY), label) for label in _LABELS}
    if (raw["subtasks"] is not None and lists["subtasks"] is not None and len(raw["subtasks"]) == len(lists["subtasks"])
            and raw["model_id"] == lists["model_id"] and raw["access_list"] == lists["access_list"]):
        lists["subtasks"] = raw["subtasks"]
    if all(v is None for v in lists.values()):
        json_form = _parse_json_form(cleaned)
        if json_form is not None:
            workflow = json_form
        else:
            raise WorkflowParseError(
                "no workflow found: expected `model_id = [...]`, `subtasks = [...]` and "
                "`access_list = [...]` (or a JSON object with `steps`)"
            )
    else:
        missing = [label for label, v in lists.items() if v is None]
        if missing:
            raise WorkflowParseError(f"missing list(s): {', '.join(missing)}")
        workflow = _from_lists(lists["model_id"], lists["subtasks"], lists["access_list"], _reasoning_before(cleaned))
    if not workflow.steps and not allow_empty:
        raise EmptyWorkflowError("the workflow has no steps; give at least one step")
    return workflow


def validate(workflow: Workflow, n_workers: int, *, max_steps: int = DEFAULT_MAX_STEPS, allow_empty: bool = False) -> Workflow:
    """Check a parsed workflow against a pool of ``n_workers``; raise a typed WorkflowError."""
    if not workflow.steps:
        if allow_empty:
            return workflow
        raise EmptyWorkflowError("the workflow has no steps; give at least one step")
    if len(workflow.steps) > max_steps:
        raise TooManyStepsError(f"the workflow has {len(workflow.steps)} steps; at most {max_steps} are allowed")
    for i, step in enumerate(workflow.steps):
        if not 0 <= step.worker < n_workers:
            raise UnknownWorkerError(
                f"step {i} uses model id {step.worker}, but the pool has ids 0..{n_workers - 1}"
            )
        if not step.subtask:
            raise WorkflowParseError(f"step {i} has an empty subtask")
        if step.access != "all":
            for ref in step.access:
                if ref >= i:
                    kind = "itself" if ref == i else f"a later step ({ref})"
                    raise BadAccessError(f"step {i} refers to {kind}; a step may only see earlier steps")
                if ref < 0:
                    raise BadAccessError(f"step {i} refers to step {ref}; indices start at 0")
    return workflow


def parse_and_validate(text: str, n_workers: int, *, max_steps: int = DEFAULT_MAX_STEPS, allow_empty: bool = False,
                       names: Sequence[str] = (), aliases: Sequence[tuple[str, int]] = ()) -> Workflow:
    """The workflow ``text`` writes, checked against a pool of ``n_workers`` (``names``: the shown workers' names,
    for a conductor whose ids follow the workers its reasoning names, and ``aliases``, more words that name them;
    ``bind_named``)."""
    workflow = parse(text, allow_empty=allow_empty)
    bound = bind_named(workflow, names, dict(aliases)) if names else workflow
    return validate(bound, n_workers, max_steps=max_steps, allow_empty=allow_empty)

