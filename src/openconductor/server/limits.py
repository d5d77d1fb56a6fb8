"""What a client is told about limits: where each of a run's limits came from, the refusals before a run
starts, and the field that says a run was cut short.

A run's limits are the tightest of four sources: the preset's, the key's ceiling, the request's own
``conductor`` options and the key's daily quota (what is left of it). Outcomes, none of them an empty 200:

- a budget too small for the first step (its prompt and a few tokens) is refused before the run: 429
  ``insufficient_quota`` (``quota_reserved`` while other requests' reservations hold the rest) when the
  quota is what is short, else 400 ``limit_too_low`` naming the limit and where it came from;
- a run stopped by a limit before it had any answer is answered the same way (the estimate above is a
  lower bound: a planner's own prompt can be longer than the question);
- a run stopped by a limit after it had an answer is a 200 whose ``conductor.limit`` names the limit and
  its source, with ``finish_reason: "length"`` (Responses: ``status: "incomplete"``).
"""

from __future__ import annotations

import time
from typing import Literal, Optional, Union

from pydantic import BaseModel

from ..budget import Limits, estimate_tokens
from ..records import Run
from .counters import RESERVED_RETRY_S, Admission, seconds_to_utc_midnight
from .errors import APIError

Source = Literal["request", "preset", "key", "quota"]
NAMES = ("max_tokens", "max_cost_usd", "max_calls", "max_depth")
MIN_STEP_OUTPUT = 16  # tokens: a step that may write fewer than this cannot answer anything


class LimitStop(BaseModel):
    """The limit that stopped a run (``conductor.limit``): which, its value, and where it came from."""

    name: str
    value: Union[int, float, None]  # None: the limit had no value (a count of calls or a depth always has one)
    source: Source


def limit_sources(preset: Limits, key: Limits, asked: dict, admission: Optional[Admission] = None) -> dict[str, Source]:
    """For each limit, the source whose value is the run's (on a tie the request, then preset, key, quota)."""
    quota = admission.limits() if admission is not None and admission.reserved else None
    layers: list[tuple[Source, dict]] = [("request", asked), ("preset", preset.model_dump()), ("key", key.model_dump()),
                                         ("quota", quota.model_dump() if quota is not None else {})]
    sources: dict[str, Source] = {}
    for name in NAMES:
        given = [(source, values[name]) for source, values in layers if values.get(name) is not None]
        if given:
            low = min(v for _, v in given)
            sources[name] = next(source for source, v in given if v == low)
    return sources


def _num(value: Optional[float]) -> str:
    return "unlimited" if value is None else f"{value:g}"


def start_need(question: str) -> int:
    """A lower bound on the tokens a run's first step reserves: its prompt holds at least the question."""
    return estimate_tokens([{"content": question}]) + MIN_STEP_OUTPUT


def quota_short(admission: Admission, need: int) -> APIError:
    """429 for a key whose quota left cannot start a run (``insufficient_quota``; ``quota_reserved`` when the
    reservations of its requests in flight hold what would be enough)."""
    key = admission.key
    if admission.squeezed:
        return APIError(429, f"key {key.name!r} has {admission.tokens} tokens of today's quota free while its requests in flight "
                             f"hold the rest; this request needs at least {need} to start: retry when they end",
                        type="rate_limit_error", code="quota_reserved", headers={"Retry-After": str(int(RESERVED_RETRY_S))})
    return APIError(429, f"key {key.name!r} has {admission.tokens} tokens left of its {key.tokens_per_day} for today (UTC); "
                         f"this request needs at least {need} to start", type="insufficient_quota", code="insufficient_quota",
                    headers={"Retry-After": str(int(seconds_to_utc_midnight(time.time())))})


def limit_too_low(name: str, value: Optional[float], source: Source, need: Optional[int] = None) -> APIError:
    """400: a limit that is not the quota's leaves too little to answer; the message says which and from where."""
    where = {"request": f"conductor.{name} in this request", "preset": "the model's preset", "key": "this key's ceiling"}[source]
    needs = f" (the first step needs at least {need} tokens)" if need is not None else ""
    fix = f"raise conductor.{name}" if source == "request" else "shorten the conversation or ask the operator for a higher limit"
    return APIError(400, f"{name} = {_num(value)} (from {where}) is too low for this request to produce an answer{needs}; {fix}",
                    code="limit_too_low", param=f"conductor.{name}" if source == "request" else "messages")


def stopped_by(run: Run, sources: dict[str, Source], limits: Limits) -> Optional[LimitStop]:
    """The limit a run ended on (None unless its status is ``limit``)."""
    if run.status != "limit":
        return None
    name = run.limits_hit[0] if run.limits_hit else "max_tokens"
    return LimitStop(name=name, value=getattr(limits, name, None), source=sources.get(name, "preset"))


def unanswered_limit_error(stop: LimitStop, admission_squeezed: bool, key_name: str) -> APIError:
    """The error for a run a limit stopped before any answer: 429 when the limit was the quota's, else 400."""
    if stop.source != "quota":
        return limit_too_low(stop.name, stop.value, stop.source)
    if admission_squeezed:
        return APIError(429, f"the part of key {key_name!r}'s daily quota that was free ({stop.name} = {_num(stop.value)}) was spent "
                             "before the run had an answer, while its other requests in flight hold the rest; retry when they end",
                        type="rate_limit_error", code="quota_reserved", headers={"Retry-After": str(int(RESERVED_RETRY_S))})
    return APIError(429, f"key {key_name!r}'s daily quota left ({stop.name} = {_num(stop.value)}) was spent before the run had an "
                         "answer", type="insufficient_quota", code="insufficient_quota",
                    headers={"Retry-After": str(int(seconds_to_utc_midnight(time.time())))})


__all__ = ["LimitStop", "limit_sources", "limit_too_low", "quota_short", "start_need", "stopped_by", "unanswered_limit_error"]
