"""Hard per-request limits and their accounting.

Calls and recursion depth are checked before they happen, so they are never exceeded. Tokens and cost
are reserved before each call from a conservative estimate (prompt characters / 3 plus the call's
``max_tokens``, which is lowered to fit what is left), so a run stops before it could cross either.
The conductor's own planning calls are reserved the same way (they do not count as worker calls).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from .records import Usage


class Limits(BaseModel):
    """Per-request ceilings. ``None`` means no ceiling; zero is allowed only for ``max_depth`` (no
    recursive round). A run needs at least one worker call, one token and some money, so 0 for
    the others is rejected rather than read as "unlimited"; negative values are always rejected."""

    model_config = ConfigDict(extra="forbid")

    max_depth: int = Field(1, ge=0)  # recursive conductor rounds below the top one
    max_calls: int = Field(20, ge=1)  # worker calls per request, all rounds together
    max_tokens: Optional[int] = Field(None, ge=1)  # worker + conductor tokens per request
    max_cost_usd: Optional[float] = Field(None, gt=0)

    def tightened(self, other: "Limits") -> "Limits":
        """The stricter of two limit sets (a request may lower its key's ceiling, never raise it)."""

        def low(a, b):
            return b if a is None else a if b is None else min(a, b)

        return Limits(
            max_depth=min(self.max_depth, other.max_depth),
            max_calls=min(self.max_calls, other.max_calls),
            max_tokens=low(self.max_tokens, other.max_tokens),
            max_cost_usd=low(self.max_cost_usd, other.max_cost_usd),
        )


class LimitReached(Exception):
    """Raised inside the executor when a call would cross a limit; ``limit`` names it."""

    def __init__(self, limit: str, detail: str):
        super().__init__(f"{limit}: {detail}")
        self.limit = limit


def estimate_tokens(messages: list[dict]) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages) // 3 + 8


class Budget:
    """Shared by every round of one request. Single event loop, so no locks are needed."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.calls = 0
        self.used = Usage()
        self.hits: list[str] = []  # the limits a reservation was refused for, in order
        self._reserved_tokens = 0
        self._reserved_cost = 0.0

    def _refuse(self, limit: str, detail: str) -> LimitReached:
        if limit not in self.hits:
            self.hits.append(limit)
        return LimitReached(limit, detail)

    def reserve(
        self, messages: list[dict], max_tokens: int, price_in: float, price_out: float, *, worker_call: bool = True
    ) -> tuple[int, int, float]:
        """Claim one call (``worker_call=False``: a conductor planning call, outside ``max_calls``).
        Returns (max_tokens to use, reserved tokens, reserved cost) or raises LimitReached."""
        lim = self.limits
        if worker_call and self.calls >= lim.max_calls:
            raise self._refuse("max_calls", f"{lim.max_calls} worker calls used")
        prompt = estimate_tokens(messages)
        if lim.max_tokens is not None:
            left = lim.max_tokens - self.used.total_tokens - self._reserved_tokens - prompt
            if left < 1:
                raise self._refuse("max_tokens", f"{lim.max_tokens} tokens would be exceeded")
            max_tokens = min(max_tokens, left)
        if lim.max_cost_usd is not None and (price_in or price_out):
            left_cost = lim.max_cost_usd - self.used.cost_usd - self._reserved_cost - prompt * price_in / 1e6
            if left_cost <= 0:
                raise self._refuse("max_cost_usd", f"${lim.max_cost_usd:g} would be exceeded")
            if price_out:
                max_tokens = min(max_tokens, int(left_cost * 1e6 / price_out))
            if max_tokens < 1:
                raise self._refuse("max_cost_usd", f"${lim.max_cost_usd:g} would be exceeded")
        tokens = prompt + max_tokens
        cost = (prompt * price_in + max_tokens * price_out) / 1e6
        self.calls += int(worker_call)
        self._reserved_tokens += tokens
        self._reserved_cost += cost
        return max_tokens, tokens, cost

    def settle(self, reserved_tokens: int, reserved_cost: float, usage: Optional[Usage]) -> None:
        self._reserved_tokens -= reserved_tokens
        self._reserved_cost -= reserved_cost
        if usage is not None:
            self.used = self.used + usage

    def check_depth(self, depth: int) -> None:
        if depth > self.limits.max_depth:
            raise self._refuse("max_depth", f"recursion depth {self.limits.max_depth} reached")
