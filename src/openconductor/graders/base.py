"""The grader interface: ``grade(kind, response, reference, **options) -> Grade`` and its registry.

The one registry of grader kinds (tasks register theirs here too) and the one result type, ``Grade``.
Every grader is bounded: a response over :data:`MAX_RESPONSE_CHARS` scores 0 without being read, the
text graders read at most the last ``extract.MAX_ANSWER_CHARS`` of the answer with linear-time
parsing, and math-verify, code and (from ``agrade``) every sync grader run in killable processes
with hard time limits, off the caller's event loop and GIL (:mod:`._gradeworker`).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Optional, TypeVar, Union

from ._gradeworker import GRADE_TIMEOUT_S, call_in_process, off_loop, packaged
from ._workers import WorkerTimeout

__all__ = [
    "Grade", "GraderError", "MAX_RESPONSE_CHARS", "register_grader", "grade", "agrade", "grader_kinds",
    "in_grading_process", "SCORING_VERSION",
]  # fmt: skip

T = TypeVar("T")
log = logging.getLogger(__name__)

# ~100k tokens: beyond the max_tokens of any worker, reasoning models included. A longer reply is not
# read at all: one regex scan over it would hold the GIL too long.
MAX_RESPONSE_CHARS = 400_000

# Bumped whenever a grader scores some answer differently. Results ranked by score and kept on disk (the fit's
# stages) record it, so a rerun after an upgrade re-ranks from its stored calls instead of keeping a ranking the
# old scores made. 2: no credit for an answer that only contains a reasoning-gym reference. 3: the statement
# rule (graders/statement.py): code, quotations and empty boxes state nothing; qualified, hedged and
# negated answers score 0; full-width and zero-width characters and scientific notation are read.
SCORING_VERSION = 3


class GraderError(ValueError):
    """Bad grader input: unknown kind, malformed reference, unknown option. The message says what to pass."""


@dataclass(frozen=True)
class Grade:
    """One graded answer. ``correct`` is derived: exactly ``score == 1.0``."""

    score: float
    extracted: Optional[str]
    reason: str
    correct: bool = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"Grade.score must be in [0, 1], got {self.score}")
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "correct", self.score == 1.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GraderFn = Callable[..., Union[Grade, Awaitable[Grade]]]


@dataclass
class _Entry:
    fn: GraderFn
    is_async: bool
    options: frozenset[str]


_REGISTRY: dict[str, _Entry] = {}


def register_grader(kind: str) -> Callable[[GraderFn], GraderFn]:
    """Register ``fn(response: str, reference, **options) -> Grade`` (sync or async) under ``kind``.

    A new task adds its grader with one file that decorates a function and is imported by
    ``openconductor.graders`` (or by the task's module, as ``reasoning_gym`` does). A sync grader may
    block (``agrade`` runs it in the grading process or on a thread); an async one must not.
    """

    def decorate(fn: GraderFn) -> GraderFn:
        params = inspect.signature(fn).parameters
        names = list(params)
        if len(names) < 2:
            raise TypeError(f"grader {kind!r} must take (response, reference, **options)")
        options = frozenset(n for n in names[2:] if params[n].kind is not inspect.Parameter.VAR_KEYWORD)
        _REGISTRY[kind] = _Entry(fn, inspect.iscoroutinefunction(fn), options)
        return fn

    return decorate


def grader_kinds() -> list[str]:
    return sorted(_REGISTRY)


def _entry(kind: str, options: dict[str, Any]) -> _Entry:
    entry = _REGISTRY.get(kind)
    if entry is None:
        raise GraderError(f"unknown grader kind {kind!r}; choose one of {', '.join(grader_kinds())} or register_grader({kind!r})")
    unknown = set(options) - entry.options
    if unknown:
        accepted = ", ".join(sorted(entry.options)) or "none"
        raise GraderError(f"unknown option(s) {', '.join(sorted(unknown))} for grader {kind!r}; accepted: {accepted}")
    return entry


def _check_response(response: Any) -> str:
    if response is None:
        return ""
    if not isinstance(response, str):
        raise GraderError(f"response must be a str (the final answer text), got {type(response).__name__}")
    return response


def _too_long(response: str) -> Optional[Grade]:
    if len(response) <= MAX_RESPONSE_CHARS:
        return None
    return Grade(0.0, None, f"response of {len(response):,} characters is over the {MAX_RESPONSE_CHARS:,}-character limit; not read")


def _failed(kind: str, exc: BaseException) -> Grade:
    log.warning("grader %r raised %s: %s; the response scores 0", kind, type(exc).__name__, exc)
    return Grade(0.0, None, f"grader {kind!r} failed on this response ({type(exc).__name__}: {str(exc)[:200]}); scored 0")


def _checked(kind: str, result: Any) -> Grade:
    if isinstance(result, Grade):
        return result
    return _failed(kind, TypeError(f"returned {type(result).__name__}, not a Grade"))


def _call(kind: str, entry: _Entry, response: str, reference: Any, options: dict[str, Any]) -> Grade:
    """A sync grader's grade; any exception but GraderError (bad reference or options: the caller's
    input) is a score of 0 with the reason logged, never an exception into a batch of grades."""
    try:
        return _checked(kind, entry.fn(response, reference, **options))
    except GraderError:
        raise
    except Exception as exc:  # hostile input must not crash the caller (OverflowError, RecursionError, a bug)
        return _failed(kind, exc)


async def _acall(kind: str, entry: _Entry, response: str, reference: Any, options: dict[str, Any]) -> Grade:
    """:func:`_call` for an async grader."""
    try:
        return _checked(kind, await entry.fn(response, reference, **options))
    except GraderError:
        raise
    except Exception as exc:
        return _failed(kind, exc)


def grade(kind: str, response: str, reference: Any, **options: Any) -> Grade:
    """Grade ``response`` against ``reference`` with the grader registered as ``kind``.

    Works from sync code and from inside a running event loop's thread (async graders then run on
    a helper thread). In async code prefer :func:`agrade`.
    """
    entry = _entry(kind, options)
    response = _check_response(response)
    if (over := _too_long(response)) is not None:
        return over
    if entry.is_async:
        from ..sandbox import run_sync

        return run_sync(_acall(kind, entry, response, reference, options))
    return _call(kind, entry, response, reference, options)


async def agrade(kind: str, response: str, reference: Any, **options: Any) -> Grade:
    """Async :func:`grade`: code runs in the sandbox concurrently; sync graders run in the grading
    process (killed after ``GRADE_TIMEOUT_S``), so no grade holds the event loop."""
    entry = _entry(kind, options)
    response = _check_response(response)
    if (over := _too_long(response)) is not None:
        return over
    if entry.is_async:
        return await _acall(kind, entry, response, reference, options)
    if packaged(entry.fn):
        request = {"op": "grade", "kind": kind, "module": entry.fn.__module__, "response": response,
                   "reference": reference, "options": options}  # fmt: skip
        limit = GRADE_TIMEOUT_S + float(options.get("timeout_s", 0) or 0)
        try:
            reply = _raise_for(await off_loop(call_in_process, request, limit))
        except WorkerTimeout:
            return Grade(0.0, None, f"grading exceeded {limit:g} s; the grading process was killed")
        if reply is not None:
            return Grade(reply["score"], reply["extracted"], reply["reason"])
    return await off_loop(_call, kind, entry, response, reference, options)


async def in_grading_process(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in the grading process when ``fn`` is a module-level function of this package and
    the arguments are JSON (the result comes back through JSON: tuples as lists); else on a thread."""
    if packaged(fn):
        request = {"op": "call", "fn": f"{fn.__module__}:{fn.__qualname__}", "args": list(args)}
        try:
            reply = _raise_for(await off_loop(call_in_process, request, GRADE_TIMEOUT_S))
        except WorkerTimeout:
            raise GraderError(f"{fn.__qualname__} exceeded {GRADE_TIMEOUT_S:g} s; the grading process was killed") from None
        if reply is not None:
            return reply["value"]
    return await off_loop(fn, *args)


def _raise_for(reply: Optional[dict]) -> Optional[dict]:
    """Re-raise an exception the grading process reported (GraderError as itself)."""
    if reply is not None and "error" in reply:
        if reply.get("type") == "GraderError":
            raise GraderError(reply["error"])
        raise RuntimeError(f"grader failed in the grading process: {reply.get('type')}: {reply['error']}")
    return reply
