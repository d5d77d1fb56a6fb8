"""What a fit spends, and the caps that stop it: a replay store that counts and refuses real worker calls.

``MeteredStore`` is the fit's replay store (``ResponseCache(match="context")``). A call it answers costs
nothing; a call it misses is a real call to a worker, and is counted (calls, tokens, cost, per worker) when
it is stored. Once a cap (``max_calls``, ``max_cost``) is reached, a further miss is refused before the
worker is called (``SpendCapReached``), so a run never pays past its cap; the fit stops at the next batch
boundary and keeps everything already paid in the store, so a later run with a higher cap continues
where it stopped.

Only the pool's workers are metered (``workers``): the conductor's own planning calls run a local model
of ours, and count as the conductor's tokens in the evaluation, not as the fit's spend.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ...cache import ResponseCache
from ...records import Completion


class SpendCapReached(RuntimeError):
    """A real worker call refused because a cap of the fit is reached (``--max-calls``/``--max-cost``)."""

    def __init__(self, cap: str, detail: str):
        super().__init__(f"{cap}: {detail}")
        self.cap = cap


@dataclass
class Spend:
    """Real worker calls (replay-store misses) and what they cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    per_worker: Counter = field(default_factory=Counter)  # calls per worker name

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: "Spend") -> "Spend":
        return Spend(self.calls + other.calls, self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cost_usd + other.cost_usd, self.per_worker + other.per_worker)

    def as_dict(self) -> dict:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "tokens": self.tokens,
                "cost_usd": round(self.cost_usd, 6), "per_worker": dict(self.per_worker)}


class MeteredStore(ResponseCache):
    """The replay store, metering real calls to the pool's ``workers`` and refusing them past a cap.

    ``spent_before``: what earlier invocations of the same fit already spent (the caps are on the fit's
    total, so a rerun with the same cap stops at once and one with a higher cap spends the difference)."""

    def __init__(self, path: str | Path, *, workers: set[str], max_calls: Optional[int] = None, max_cost: Optional[float] = None,
                 spent_before: Optional[Spend] = None):
        super().__init__(path, match="context")
        self.workers = set(workers)
        self.max_calls, self.max_cost = max_calls, max_cost
        self.before = spent_before or Spend()
        self.spend = Spend()  # this invocation
        self.started = 0  # real calls begun in this invocation (counted before they finish, for the call cap)
        self.refused: Optional[SpendCapReached] = None

    @property
    def total(self) -> Spend:
        """What the fit has spent in all its invocations."""
        return self.before + self.spend

    @property
    def exhausted(self) -> bool:
        return self.refused is not None

    def get(self, key: str, worker: str = "") -> Optional[tuple[Completion, int]]:
        hit = super().get(key, worker)
        if hit is None and worker in self.workers:
            self._admit(worker)
        return hit

    def _admit(self, worker: str) -> None:
        """Claim one real call or refuse it (and remember the refusal: the fit stops at its next boundary)."""
        calls = self.before.calls + self.started
        if self.max_calls is not None and calls >= self.max_calls:
            self.refused = self.refused or SpendCapReached("max_calls", f"{self.max_calls} real worker calls spent")
            raise self.refused
        if self.max_cost is not None and self.total.cost_usd >= self.max_cost:
            self.refused = self.refused or SpendCapReached("max_cost", f"${self.max_cost:g} spent")
            raise self.refused
        self.started += 1

    def put(self, key: str, worker: str, completion: Completion, attempts: int = 1) -> None:
        super().put(key, worker, completion, attempts)
        if worker in self.workers:
            u = completion.usage
            self.spend.calls += 1
            self.spend.input_tokens += u.input_tokens
            self.spend.output_tokens += u.output_tokens
            self.spend.cost_usd += u.cost_usd
            self.spend.per_worker[worker] += 1
