"""Workflows: the conductor's plan, its output language, its parser, its validation and its rendering.

A workflow is a list of steps; each step names a worker (an ordinal id into the pool shown to the
conductor), a natural-language subtask, and an access list: ``"all"`` (every earlier step) or a list
of earlier step indices (``[]`` = nothing earlier). The conductor writes it as three equal-length
Python lists after its reasoning (the paper's format); a JSON object form is accepted too.

``WorkflowFormat`` is the one owner of that language: the prompt's instructions about it, its length
bounds, the GBNF grammar (local decoders), the automaton (token-level decoding, training rollouts),
``Workflow.render`` and ``parse``.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import os
import re
from dataclasses import dataclass, replace
from typing import Literal, Optional, Sequence, Union

from .records import WorkflowRecord
from .reply import strip_think

Access = Union[Literal["all"], tuple[int, ...]]

DEFAULT_MAX_STEPS = 5


# --------------------------------------------------------------------------------------------- errors


class WorkflowError(ValueError):
    """A conductor output that is not a usable workflow. ``code`` is stable for logs and metrics."""

    code = "invalid_workflow"


class WorkflowParseError(WorkflowError):
    code = "unparseable"


class EmptyWorkflowError(WorkflowError):
    code = "empty"


class LengthMismatchError(WorkflowError):
    code = "length_mismatch"


class UnknownWorkerError(WorkflowError):
    code = "unknown_worker"


class BadAccessError(WorkflowError):
    """A forward, self or out-of-range reference in an access list."""

    code = "bad_access"


class TooManyStepsError(WorkflowError):
    code = "too_many_steps"


# ----------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Step:
    worker: int
    subtask: str
    access: Access = ()

    def visible(self, index: int) -> tuple[int, ...]:
        """Indices of the earlier steps this step sees, given its own position."""
        if self.access == "all":
            return tuple(range(index))
        return tuple(self.access)


@dataclass(frozen=True)
class Workflow:
    steps: tuple[Step, ...]
    reasoning: str = ""

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def is_accept(self) -> bool:
        """Three empty lists from a recursive round: keep the previous answer."""
        return not self.steps

    def to_dict(self) -> dict:
        return {
            "reasoning": self.reasoning,
            "steps": [
                {"worker": s.worker, "subtask": s.subtask, "access": s.access if s.access == "all" else list(s.access)}
                for s in self.steps
            ],
        }

    def to_record(self) -> WorkflowRecord:
        """The workflow as a plan records it (``PlanRecord.workflow``)."""
        return WorkflowRecord.model_validate(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict) -> "Workflow":
        steps: list[Step] = []
        for raw in data.get("steps", []):
            access = raw.get("access", [])
            steps.append(Step(int(raw["worker"]), str(raw["subtask"]), _normalise_access(access, len(steps))))
        return cls(tuple(steps), reasoning=str(data.get("reasoning", "")))

    def render(self) -> str:
        """The paper's three-list text as ``WorkflowFormat`` writes it; ``parse(render(w))`` gives back ``w``.

        A one-line reasoning that starts with "Reasoning: " and subtasks within the format's characters give
        exactly what the conductor's grammar admits (the format warm-up's targets are made this way).
        """
        ids = ", ".join(str(s.worker) for s in self.steps)
        subtasks = ", ".join(json.dumps(s.subtask) for s in self.steps)
        access = ", ".join('["all"]' if s.access == "all" else json.dumps(list(s.access)) for s in self.steps)
        lists = f"{FORMAT_IDS}{ids}{FORMAT_SUBTASKS}{subtasks}{FORMAT_ACCESS}{access}{FORMAT_END}"
        return f"{self.reasoning.strip()}\n{lists}" if self.reasoning.strip() else lists


# --------------------------------------------------------------------------------------------- format

# The literal parts of the three-list text, shared by render(), the grammar and the automaton below.
FORMAT_REASON = "Reasoning: "
FORMAT_IDS = "model_id = ["
FORMAT_SUBTASKS = "]\nsubtasks = ["
FORMAT_ACCESS = "]\naccess_list = ["
FORMAT_END = "]"
FORMAT_SEP = ", "
LIST_NAMES = ("model_id", "subtasks", "access_list")

# Bounds of a runtime grammar (``WorkflowFormat.bounded``). Grammar strings are printable ASCII (every such
# character is one byte, and a token is at least one byte), so a plan of B characters is at most B tokens.
REASON_CHARS = 80  # the one line of reasoning, at most
SUBTASK_CHARS = 320  # one subtask, at most (less when max_tokens is small: the room bound decides)
MIN_SUBTASK_CHARS = 24  # below this a budget is refused: plans would have no room to say anything


def _index(text: str, k: int) -> bool:
    """A step index below k, written without leading zeros."""
    return text.isascii() and text.isdigit() and (text == "0" or text[0] != "0") and int(text) < k


def _printable(ch: str) -> bool:
    return " " <= ch <= "~"


def _string_char(ch: str) -> bool:
    return _printable(ch) and ch not in '"\\'


@dataclass(frozen=True)
class WorkflowFormat:
    """The conductor's output language, defined once: a reasoning line, then three lists of one length.

    ``gbnf()`` writes it as a llama.cpp grammar (constrained decoding on local backends) and
    ``advance()`` reads it character by character (constrained sampling during training); both admit
    exactly: ``Reasoning: `` + 1..reason_chars printable characters + newline, then ``model_id = [ids]``,
    ``subtasks = ["...", ...]`` (min..subtask_chars printable characters without quotes or backslashes),
    ``access_list = [...]`` (``[]``, ``["all"]`` after step 0, or with ``fine_grained`` a list of earlier
    step indices), all three of the same length n in 1..max_steps (0 with ``allow_empty``). Every
    string it admits parses and validates against a pool of ``n_workers``.

    With ``names`` (the pool's worker names in id order), each id is bound to the reasoning line: step k's
    id must be the k-th worker that line names (``named_workers``), so a conductor that says whom it picks
    cannot then write another worker's id; steps beyond the named ones are free. ``advance()`` enforces
    this; GBNF cannot tie one part to another, so on grammar backends ``bind_named`` applies it after parsing.
    With ``name_slots`` too, ``advance()`` makes every word of ``NAME_SLOTS`` in the line ("solve", "check", ...)
    be followed by one of the names, whole (the line's bound gives way to finish it): a small conductor otherwise
    writes a name-like word that no worker has, and the step it meant is left unbound. ``aliases`` are more words
    that name a worker (``conductor.ranking.rank_aliases``: "math#1", the best worker of the pool's measured ranking
    in math): bound, and admitted after a slot word, as names are.

    With ``wordings`` (a trained conductor's closed set of subtasks, ``manifest.ConductorManifest.wordings``),
    each subtask is one of them, whole: the conductor chooses an instruction it was taught and cannot splice
    two into one (a 135M copy does; docs/fit.md, "Closed wordings").
    """

    n_workers: int
    max_steps: int = DEFAULT_MAX_STEPS
    fine_grained: bool = False
    allow_empty: bool = False
    reason_chars: int = 80
    subtask_chars: int = 160
    min_subtask_chars: int = 3
    names: tuple[str, ...] = ()
    name_slots: bool = False
    aliases: tuple[tuple[str, int], ...] = ()  # (word, worker id)
    wordings: tuple[str, ...] = ()  # the only subtasks it writes; () for free text

    def __post_init__(self) -> None:
        for text in self.wordings:
            if (problem := self.unwritable(text)) is not None:
                raise ValueError(f"wording {text[:60] + ('...' if len(text) > 60 else '')!r} {problem}")

    def unwritable(self, text: str) -> Optional[str]:
        """Why free text in this format could not write ``text`` as a subtask, or None."""
        if not self.min_subtask_chars <= len(text) <= self.subtask_chars:
            return f"has {len(text)} characters and the conductor writes {self.min_subtask_chars} to {self.subtask_chars}"
        bad = sorted({c for c in text if not _string_char(c)})
        if bad or text[0] == " ":
            shown = "".join(bad) if bad else "a leading space"
            return f"has characters the conductor cannot write ({shown}; quotes, backslashes and non-ASCII are not written)"
        return None

    # ---- what the conductor's prompt says about the output

    @staticmethod
    def instructions(style: str, *, fine_grained: bool) -> str:
        """The prompt's lines that ask for this language: "paper" spells out the three lists, "compact"
        (a conductor trained to write them) names them."""
        if style == "compact":
            return f"Write one line of reasoning, then three Python lists of equal length: {', '.join(LIST_NAMES)}."
        example = '[] or ["all"]' + (" or [0, 1]" if fine_grained else "")
        return ("First write one short line of reasoning, then exactly three Python lists of equal length:\n"
                f'{FORMAT_IDS}agent ids{FORMAT_SUBTASKS}"instruction", ...{FORMAT_ACCESS}access of each step, e.g. {example}{FORMAT_END}')

    @staticmethod
    def accept_lists() -> str:
        """The three empty lists a recursive round writes to keep the answer it was shown."""
        return Workflow(()).render()

    # ---- length bounds

    @classmethod
    def bounded(cls, n_workers: int, max_steps: int, max_tokens: int, *, fine_grained: bool = False,
                allow_empty: bool = False, names: Sequence[str] = (), name_slots: bool = False,
                aliases: Sequence[tuple[str, int]] = (), wordings: Sequence[str] = ()) -> "WorkflowFormat":
        """The format whose longest plan, plus the end-of-text token, fits in ``max_tokens``: the reasoning
        gets up to a quarter of the room (at most ``REASON_CHARS``), the subtasks share the rest (at most
        ``SUBTASK_CHARS`` each). Raises ValueError when even short subtasks, or the longest of ``wordings``, do not fit."""
        fixed = cls._fixed_chars(n_workers, max_steps, fine_grained)
        fixed += _finished_name_chars([*names, *(word for word, _ in aliases)], name_slots)

        def split(tokens: int) -> tuple[int, int]:  # (reasoning, subtask) characters that ``tokens`` leave
            room = tokens - 1 - fixed
            reason = min(REASON_CHARS, max(8, room // 4))
            return reason, min(SUBTASK_CHARS, (room - reason) // max_steps)

        def least(chars: int) -> int:  # the smallest max_tokens whose subtasks get ``chars`` (<= SUBTASK_CHARS)
            return next(m for m in itertools.count(max_tokens + 1) if split(m)[1] >= chars)

        reason, subtask = split(max_tokens)
        if subtask < MIN_SUBTASK_CHARS:
            raise ValueError(f"max_tokens = {max_tokens} is too small for {max_steps} steps over {n_workers} workers: "
                             f"raise it to at least {least(MIN_SUBTASK_CHARS)}, or lower max_steps")
        longest = max(map(len, wordings), default=0)
        if longest > SUBTASK_CHARS:
            raise ValueError(f"the conductor's longest trained wording has {longest} characters and no subtask it writes has more than "
                             f"{SUBTASK_CHARS}: set subtasks = \"free\"")
        if longest > subtask:
            raise ValueError(f"max_tokens = {max_tokens} leaves {subtask} characters a subtask and the conductor's longest trained "
                             f"wording has {longest}: raise it to at least {least(longest)}, lower max_steps, or set subtasks = \"free\"")
        return cls(n_workers, max_steps, fine_grained=fine_grained, allow_empty=allow_empty, reason_chars=reason, subtask_chars=subtask,
                   names=tuple(names), name_slots=name_slots, aliases=tuple(aliases), wordings=tuple(wordings))

    def max_chars(self) -> int:
        """The length of the longest string of this language."""
        return (self._fixed_chars(self.n_workers, self.max_steps, self.fine_grained) + self.reason_chars
                + _finished_name_chars(self._words, self.name_slots) + self.max_steps * self.subtask_chars)

    @functools.cached_property
    def _words(self) -> tuple[str, ...]:
        """Every word that names a worker: the names, then the aliases."""
        return (*self.names, *(word for word, _ in self.aliases))

    @staticmethod
    def _access_chars(k: int, fine_grained: bool) -> int:
        """Longest access entry of step k: "[]", '["all"]', or all k earlier indices."""
        if k == 0:
            return len("[]")
        longest = len('["all"]')
        if fine_grained:
            longest = max(longest, 2 + sum(len(str(j)) for j in range(k)) + len(FORMAT_SEP) * (k - 1))
        return longest

    @classmethod
    def _fixed_chars(cls, n_workers: int, n: int, fine_grained: bool) -> int:
        """Characters of an n-step plan other than the reasoning text and the subtask texts."""
        between = len(FORMAT_SEP) * (n - 1)
        return (
            len(FORMAT_REASON) + len("\n")
            + len(FORMAT_IDS) + n * len(str(n_workers - 1)) + between
            + len(FORMAT_SUBTASKS) + n * len('""') + between
            + len(FORMAT_ACCESS) + sum(cls._access_chars(k, fine_grained) for k in range(n)) + between + len(FORMAT_END)
        )  # fmt: skip

    def why_not(self, workflow: Workflow) -> Optional[str]:
        """The first of this format's rules that ``workflow`` breaks, as a clause a pool file's author can act on, or
        None when it breaks none of these (the binding of names to ids is not checked: ``advance`` has the last word)."""
        n = len(workflow.steps)
        if n > self.max_steps or (n == 0 and not self.allow_empty):
            return f"it has {n} steps and the conductor writes 1 to {self.max_steps}"
        reason = workflow.reasoning.removeprefix(FORMAT_REASON)
        if not 1 <= len(reason) <= self.reason_chars or not all(_printable(c) for c in reason):
            return (f"its reasoning line (written from its description) has {len(reason)} characters and the conductor writes 1 to "
                    f"{self.reason_chars} printable ASCII ones")
        for k, step in enumerate(workflow.steps):
            where, text = f"step {k + 1}", step.subtask
            if not 0 <= step.worker < self.n_workers:
                return f"{where} names worker id {step.worker} and the pool has {self.n_workers} workers"
            if (problem := self.unwritable(text)) is not None:
                return f"{where}'s subtask {problem}"
            if self.wordings and text not in self.wordings:
                return f"{where}'s subtask is none of the {len(self.wordings)} wordings this conductor writes"
            if k == 0 and step.access != ():
                return "step 1 sees earlier steps, and there are none (access = [])"
            chosen = () if isinstance(step.access, str) else tuple(step.access)  # "all" is always writable after step 1
            if chosen and not self.fine_grained:
                return f"{where} sees chosen steps {list(chosen)} and this conductor writes only [] or \"all\""
            if chosen and not all(0 <= j < k for j in chosen):
                return f"{where} sees steps {list(chosen)}, not all of them earlier"
        return None

    # ---- the grammar

    def grammar(self) -> "FormatGrammar":
        """The GBNF text that still carries this format (see ``FormatGrammar``)."""
        return FormatGrammar(self)

    def gbnf(self) -> str:
        """GBNF admitting this language. GBNF cannot tie list lengths together, so it enumerates n."""
        ids = " | ".join(f'"{i}"' for i in range(self.n_workers))
        lit = lambda text: json.dumps(text)  # noqa: E731  (a GBNF literal is a JSON-escaped string)
        sep = lit(FORMAT_SEP)
        rules = [
            f"root ::= {lit(FORMAT_REASON)} reason {lit(chr(10))} lists",
            f"reason ::= [\\x20-\\x7E]{{1,{self.reason_chars}}}",
            f"id ::= {ids}",
            self._str_rule(),
            'acc0 ::= "[]"',
        ]
        alts = []
        if self.allow_empty:
            alts.append("l0")
            rules.append(f"l0 ::= {lit(FORMAT_IDS + FORMAT_SUBTASKS + FORMAT_ACCESS + FORMAT_END)}")
        for k in range(1, self.max_steps):
            options = ['"[]"', '"[\\"all\\"]"']
            if self.fine_grained:
                rules.append(f"idx{k} ::= " + " | ".join(f'"{j}"' for j in range(k)))
                options.append(f'"[" idx{k} ({sep} idx{k}){{0,{k - 1}}} "]"' if k > 1 else f'"[" idx{k} "]"')
            rules.append(f"acc{k} ::= {' | '.join(options)}")
        for n in range(1, self.max_steps + 1):
            alts.append(f"l{n}")
            id_list = f" {sep} ".join(["id"] * n)
            str_list = f" {sep} ".join(["str"] * n)
            acc_list = f" {sep} ".join(f"acc{k}" for k in range(n))
            rules.append(
                f"l{n} ::= {lit(FORMAT_IDS)} {id_list} {lit(FORMAT_SUBTASKS)} {str_list} {lit(FORMAT_ACCESS)} {acc_list} {lit(FORMAT_END)}"
            )
        rules.insert(1, f"lists ::= {' | '.join(alts)}")
        return "\n".join(rules)

    def _str_rule(self) -> str:
        if self.wordings:  # one of them, whole
            return f'str ::= "\\"" ({" | ".join(json.dumps(w) for w in self.wordings)}) "\\""'
        # The first character is not a space: a subtask of spaces would be empty once stripped.
        return (f'str ::= "\\"" [\\x21\\x23-\\x5B\\x5D-\\x7E] '
                f'[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]{{{self.min_subtask_chars - 1},{self.subtask_chars - 1}}} "\\""')

    # ---- the automaton: states are small tuples, so a sampler keeps one per row and copies freely

    def start(self) -> tuple:
        return ("lit", FORMAT_REASON, 0, "reason", 0)

    def complete(self, state: Optional[tuple]) -> bool:
        return state is not None and state[0] == "done"

    def advance(self, state: Optional[tuple], text: str) -> Optional[tuple]:
        """The state after reading ``text``, or None if no string of the language continues that way."""
        for ch in text:
            if state is None:
                return None
            state = self._step(state, ch)
        return state

    def _step(self, state: tuple, ch: str) -> Optional[tuple]:  # noqa: C901  (one branch per part of the format)
        kind = state[0]
        if kind == "lit":  # ("lit", literal, position, next part, n)
            _, literal, pos, then, n = state
            if ch != literal[pos]:
                return None
            if pos + 1 < len(literal):
                return ("lit", literal, pos + 1, then, n)
            return self._enter(then, n)
        if kind == "reason":  # ("reason", the line so far, the name begun after a slot word or None)
            _, line, slot = state
            if slot is not None:  # a name must follow: only a start of one, or the end of a whole one
                if any(n.startswith(slot + ch) for n in self._words):
                    return ("reason", line + ch, slot + ch)
                if slot not in self._words or ch not in ", \n":
                    return None
            if ch == "\n":
                bound = named_workers(line, self.names, dict(self.aliases)) if self.names else ()
                return ("lit", FORMAT_IDS, 0, "ids", bound) if line else None
            if not (_printable(ch) and len(line) < self.reason_chars):
                return None
            # The slot is carried in the state, so a slot word is looked for only where a space may open one.
            opens = ch == " " and self.names and self.name_slots and _SLOT_OPENS.search(line[-_LONGEST_SLOT:] + ch)
            return ("reason", line + ch, "" if opens else None)
        if kind == "id":  # ("id", steps so far, digits of this id, ids the reasoning bound)
            _, n, digits, bound = state
            want = str(bound[n]) if n < len(bound) else None
            grown = digits + ch
            if ch in "0123456789" and (digits != "0") and int(grown) < self.n_workers and (want is None or want.startswith(grown)):
                return ("id", n, grown, bound)
            if not digits or (want is not None and digits != want):
                return None
            if ch == ",":
                return ("lit", FORMAT_SEP, 1, "id", (n + 1, bound)) if n + 1 < self.max_steps else None
            if ch == "]":
                return ("lit", FORMAT_SUBTASKS, 1, "str", n + 1)
            return None
        if kind == "ids":  # ("ids", bound): just after "model_id = [": an id, or "]" for an empty workflow
            if ch == "]" and self.allow_empty:
                return ("lit", FORMAT_SUBTASKS, 1, "empty-str", 0)
            return self._step(("id", 0, "", state[1]), ch)
        if kind == "empty-str":  # "subtasks = [" of an empty workflow: only "]"
            return ("lit", FORMAT_ACCESS, 1, "empty-acc", 0) if ch == "]" else None
        if kind == "empty-acc":
            return ("done",) if ch == "]" else None
        if kind == "str":  # ("str", n, index, the text so far or None before the opening quote)
            _, n, i, text = state
            if text is None:
                return ("str", n, i, "") if ch == '"' else None
            if ch == '"':
                whole = text in self.wordings if self.wordings else len(text) >= self.min_subtask_chars
                return ("sep", n, i, "str") if whole else None
            if self.wordings:
                grown = text + ch
                return ("str", n, i, grown) if any(w.startswith(grown) for w in self.wordings) else None
            if not text and ch == " ":
                return None  # a subtask starts with a non-space character (else it could strip to nothing)
            return ("str", n, i, text + ch) if _string_char(ch) and len(text) < self.subtask_chars else None
        if kind == "sep":  # ("sep", n, index just finished, list): ", " to the next item or "]" to end
            _, n, i, part = state
            if i + 1 < n:
                return ("lit", FORMAT_SEP, 1, part, (n, i + 1)) if ch == "," else None
            if ch != "]":
                return None
            if part == "str":
                return ("lit", FORMAT_ACCESS, 1, "acc", (n, 0))
            return ("done",)
        if kind == "acc":  # ("acc", n, k, text so far)
            _, n, k, so_far = state
            text = so_far + ch
            options = ["[]"] + (['["all"]'] if k > 0 else [])
            if any(o.startswith(text) for o in options):
                return ("sep", n, k, "acc") if text in options else ("acc", n, k, text)
            if self.fine_grained and k > 0 and self._index_list_prefix(text, k):
                return ("sep", n, k, "acc") if text.endswith("]") else ("acc", n, k, text)
            return None
        return None  # "done": nothing may follow

    def _enter(self, part: str, n) -> tuple:
        if part == "reason":
            return ("reason", "", None)
        if part == "id":
            count, bound = n
            return ("id", count, "", bound)
        if part == "ids":
            return ("ids", n)
        if part in ("empty-str", "empty-acc"):
            return (part,)
        if part == "str":
            count, i = n if isinstance(n, tuple) else (n, 0)
            return ("str", count, i, None)
        if part == "acc":
            count, k = n
            return ("acc", count, k, "")
        raise ValueError(part)

    def _index_list_prefix(self, text: str, k: int) -> bool:
        """Whether ``text`` begins some "[i, j, ...]" of distinct earlier step indices (0 <= i < k), so that
        a sampler that keeps to such prefixes never reaches a dead end."""
        if not text.startswith("["):
            return False
        body = text[1:]
        closed = body.endswith("]")
        items = (body[:-1] if closed else body).split(", ")
        done, last = items[:-1], items[-1]
        current: Optional[str] = last
        if last.endswith(","):  # "...3," waiting for its space
            done, current = done + [last[:-1]], None
        if not all(_index(x, k) for x in done) or len(set(done)) != len(done):
            return False
        if closed:
            return current is not None and _index(current, k) and current not in done
        if current is None or current == "":
            return len(done) < k  # another index must still be free
        if not _index(current, k):
            return False
        can_grow = current != "0" and int(current) * 10 < k
        return can_grow or current not in done


class FormatGrammar(str):
    """A ``WorkflowFormat``'s GBNF text that still carries the format: llama.cpp and grammar-taking
    servers read the text, token-level decoders (the transformers engine) walk ``.format``, so every
    backend applies the one language. Everything else (cache keys, JSON) sees a plain string."""

    format: WorkflowFormat  # type: ignore[assignment]  # shadows str.format on purpose: decoders read the format here

    def __new__(cls, fmt: WorkflowFormat) -> "FormatGrammar":
        self = super().__new__(cls, fmt.gbnf())
        self.format = fmt
        return self


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


# --------------------------------------------------------------------------------------------- parser

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


def _normalise_access(value, index: int) -> Access:
    if value == "all" or value == ["all"] or value == ("all",):
        return "all" if index > 0 else ()
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise WorkflowParseError(f"step {index}: access must be \"all\" or a list of step indices, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, str) and re.fullmatch(r"\s*-?\d+\s*", item):
            item = int(item)
        if isinstance(item, str) and item.strip().lower() == "all":
            return "all" if index > 0 else ()
        if not isinstance(item, int) or isinstance(item, bool):
            raise WorkflowParseError(f"step {index}: access list entries must be step indices, got {item!r}")
        out.append(item)
    return tuple(dict.fromkeys(out))  # a repeated index shows that step once (small models repeat them)


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
