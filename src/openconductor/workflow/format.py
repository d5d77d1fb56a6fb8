"""The conductor's output language, defined once (``WorkflowFormat``): the prompt's instructions about it, its
length bounds, the GBNF grammar (local decoders) and the automaton (token-level decoding, training rollouts)."""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional, Sequence
from .model import DEFAULT_MAX_STEPS, FORMAT_ACCESS, FORMAT_END, FORMAT_IDS, FORMAT_REASON, FORMAT_SEP, FORMAT_SUBTASKS, LIST_NAMES, Workflow
from .naming import _LONGEST_SLOT, _SLOT_OPENS, _finished_name_chars, named_workers


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

    # ---- the JSON schema

    def json_schema(self) -> dict:
        """This language as a JSON schema, for servers that constrain decoding to one (``response_format`` json_schema:
        OpenAI, vLLM, llama.cpp's server): the reasoning, then the steps as objects, so that no list can be longer than
        another; ``parse`` reads it (its JSON form). Bounds a schema cannot say (step 1 sees nothing, access lists
        name earlier steps, names bound to ids) are checked after parsing, as on every backend."""
        text = lambda lo, hi: {"type": "string", "minLength": lo, "maxLength": hi}  # noqa: E731
        subtask = {"type": "string", "enum": list(self.wordings)} if self.wordings else text(self.min_subtask_chars, self.subtask_chars)
        chosen = {"type": "array", "maxItems": self.max_steps - 1 if self.fine_grained else 0,
                  "items": {"type": "integer", "minimum": 0, "maximum": max(0, self.max_steps - 2)}}
        step = {"type": "object", "additionalProperties": False, "required": ["model_id", "subtask", "access"], "properties": {
            "model_id": {"type": "integer", "enum": list(range(self.n_workers))},
            "subtask": subtask,
            "access": {"anyOf": [chosen, {"type": "string", "enum": ["all"]}]},
        }}
        return {"type": "object", "additionalProperties": False, "required": ["reasoning", "steps"], "properties": {
            "reasoning": text(1, self.reason_chars),
            "steps": {"type": "array", "items": step, "minItems": 0 if self.allow_empty else 1, "maxItems": self.max_steps},
        }}

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

    def _step(self, state: tuple, ch: str) -> Optional[tuple]:
        """The state after ``ch``, or None where the format admits no ``ch``: one reader per part of the format."""
        read = self._READERS.get(state[0])
        return read(self, state, ch) if read is not None else None  # "done": nothing may follow

    def _read_lit(self, state: tuple, ch: str) -> Optional[tuple]:  # ("lit", literal, position, next part, n)
        _, literal, pos, then, n = state
        if ch != literal[pos]:
            return None
        if pos + 1 < len(literal):
            return ("lit", literal, pos + 1, then, n)
        return self._enter(then, n)

    def _read_reason(self, state: tuple, ch: str) -> Optional[tuple]:
        # ("reason", the line so far, the name begun after a slot word or None)
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

    def _read_id(self, state: tuple, ch: str) -> Optional[tuple]:  # ("id", steps so far, digits of this id, ids the reasoning bound)
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

    def _read_ids(self, state: tuple, ch: str) -> Optional[tuple]:
        # ("ids", bound): just after "model_id = [": an id, or "]" for an empty workflow
        if ch == "]" and self.allow_empty:
            return ("lit", FORMAT_SUBTASKS, 1, "empty-str", 0)
        return self._step(("id", 0, "", state[1]), ch)

    def _read_empty_str(self, state: tuple, ch: str) -> Optional[tuple]:  # "subtasks = [" of an empty workflow: only "]"
        return ("lit", FORMAT_ACCESS, 1, "empty-acc", 0) if ch == "]" else None

    def _read_empty_acc(self, state: tuple, ch: str) -> Optional[tuple]:
        return ("done",) if ch == "]" else None

    def _read_str(self, state: tuple, ch: str) -> Optional[tuple]:  # ("str", n, index, the text so far or None before the opening quote)
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

    def _read_sep(self, state: tuple, ch: str) -> Optional[tuple]:
        # ("sep", n, index just finished, list): ", " to the next item or "]" to end
        _, n, i, part = state
        if i + 1 < n:
            return ("lit", FORMAT_SEP, 1, part, (n, i + 1)) if ch == "," else None
        if ch != "]":
            return None
        if part == "str":
            return ("lit", FORMAT_ACCESS, 1, "acc", (n, 0))
        return ("done",)

    def _read_acc(self, state: tuple, ch: str) -> Optional[tuple]:  # ("acc", n, k, text so far)
        _, n, k, so_far = state
        text = so_far + ch
        options = ["[]"] + (['["all"]'] if k > 0 else [])
        if any(o.startswith(text) for o in options):
            return ("sep", n, k, "acc") if text in options else ("acc", n, k, text)
        if self.fine_grained and k > 0 and self._index_list_prefix(text, k):
            return ("sep", n, k, "acc") if text.endswith("]") else ("acc", n, k, text)
        return None

    _READERS: ClassVar[dict[str, Callable[["WorkflowFormat", tuple, str], Optional[tuple]]]] = {
        "lit": _read_lit, "reason": _read_reason, "id": _read_id, "ids": _read_ids, "empty-str": _read_empty_str,
        "empty-acc": _read_empty_acc, "str": _read_str, "sep": _read_sep, "acc": _read_acc,
    }

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

