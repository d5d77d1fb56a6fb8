"""What the fit ships: the conductor, or the per-task lookup it learned from when the conductor does not beat it.

The conductor is a copy of the per-task lookup (each kind's best plan, per question where another did better). If on
held-out questions it does no better than that lookup, a user is better served by the lookup itself: it plans
exactly, costs no conductor model, and it is what the copy was trying to be. So the fit always writes the lookup as
a policy file (``OUT/lookup/lookup.yaml``: each kind's plan by worker names, the best fixed workflow as its default,
and the familiarity gate's ``familiar.json`` beside it, which gives a question without a kind (``conductor ask``, the
server) its nearest training kind's plan where it is familiar enough, the default where it is not), evaluates it as
it would serve, and ships it (``verdict.json``) when the conductor's held-out accuracy is not above it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import yaml
from pydantic import BaseModel

from ...conductor.familiar import FAMILIAR_FILE
from ...evaluation import EvalRecord, compare, summarize
from ...policies.base import Plan, PlanRequest
from ...policies.lookup import LookupTable
from ...workflow import parse

if TYPE_CHECKING:
    from ...pool import PoolSpec
    from .context import FitContext

LOOKUP_DIR, LOOKUP_FILE, VERDICT_FILE = "lookup", "lookup.yaml", "verdict.json"
SHIPPED_LABEL = "lookup (as shipped: nearest kind)"


def entry(text: str, spec: "PoolSpec", description: str) -> dict:
    """A plan in the conductor's format as a lookup entry: its workers by name, so the file survives a reordered pool."""
    steps = parse(text).steps
    return {"description": description, "steps": [{"worker": spec.workers[s.worker].name, "subtask": s.subtask,
                                                   "access": s.access if s.access == "all" else list(s.access)} for s in steps]}


def write_lookup(ctx: "FitContext") -> Path:
    """``OUT/lookup/lookup.yaml`` (and its ``familiar.json`` where the fit has kinds to tell apart)."""
    from .context import _candidates, record_familiarity
    from ..search.fit_targets import lookup_table

    search, targets = (json.loads((ctx.out / f"{n}.json").read_text()) for n in ("search", "targets"))
    table, best_fixed = lookup_table(search, targets)
    text = {c.name: c.text for c in _candidates(ctx)}
    folder = ctx.out / LOOKUP_DIR
    folder.mkdir(parents=True, exist_ok=True)
    record_familiarity(ctx, folder)
    data: dict = {"description": f"conductor fit's per-task lookup for pool {ctx.spec.name!r}: each kind's best plan on its training "
                                 f"questions; other questions run the best fixed workflow ({best_fixed})",
                  "domains": {group: entry(text[name], ctx.spec, name) for group, name in table.items()},
                  "default": entry(text[best_fixed], ctx.spec, best_fixed)}
    if (folder / FAMILIAR_FILE).exists():
        data["familiar"] = "."
    path = folder / LOOKUP_FILE
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=False, width=10_000))
    return path


class ShippedLookup(LookupTable):
    """The lookup as ``conductor ask`` and the server run it: the question's own kind is unknown there, so it is
    evaluated without it (its nearest training kind, or the default)."""

    async def plan(self, request: PlanRequest) -> Plan:
        return await super().plan(dataclasses.replace(request, domain=None, kind=None))


def shipped_lookup(path: Path) -> ShippedLookup:
    policy = ShippedLookup(path)
    policy.name = "lookup:shipped"
    return policy


# ------------------------------------------------------------------------------------------ the verdict


class Margin(BaseModel):
    """The conductor's held-out accuracy minus a baseline's, in points, with its paired-bootstrap 95 % interval."""

    against: str
    n: int
    mean: float
    low: float
    high: float

    def text(self) -> str:
        return f"{100 * self.mean:+.1f} [{100 * self.low:+.1f}, {100 * self.high:+.1f}] points over {self.n} questions"


class Verdict(BaseModel):
    ship: Literal["conductor", "lookup"]
    why: str
    fidelity: Optional[float] = None
    vs_lookup: Optional[Margin] = None  # against the lookup as shipped (the per-task lookup where it was not evaluated)
    vs_per_task_lookup: Optional[Margin] = None
    vs_best_single: Optional[Margin] = None
    lookup: str  # the lookup's policy file
    checkpoint: Optional[str] = None


def margin(records: list[EvalRecord], mine: str, theirs: str) -> Optional[Margin]:
    got = compare([r for r in records if r.policy == mine], [r for r in records if r.policy == theirs], name=theirs)
    return None if got is None else Margin(against=theirs, n=got.n, mean=got.mean, low=got.low, high=got.high)


def best_single(records: list[EvalRecord]) -> Optional[str]:
    """The single worker with the highest accuracy on these questions (chosen on them: the hardest bar)."""
    singles = [s for s in summarize(records) if s.policy.startswith("single:")]
    return max(singles, key=lambda s: (s.accuracy, -s.tokens)).policy if singles else None


def decide(records: list[EvalRecord], conductor: str, lookup: Path, checkpoint: Path, fidelity: Optional[float]) -> Verdict:
    """Ship the conductor only where its held-out accuracy is above the lookup's; the lookup otherwise."""
    shipped = SHIPPED_LABEL if any(r.policy == SHIPPED_LABEL for r in records) else "lookup (per task)"
    vs = margin(records, conductor, shipped)
    single = best_single(records)
    common = {"fidelity": fidelity, "vs_lookup": vs, "vs_per_task_lookup": margin(records, conductor, "lookup (per task)"),
              "vs_best_single": margin(records, conductor, single) if single else None, "lookup": str(lookup), "checkpoint": str(checkpoint)}
    if vs is None:
        return Verdict(ship="conductor", why="not compared with the lookup (no held-out questions: --eval-n 0); its margin is unmeasured", **common)
    if vs.mean > 0:
        sure = "" if vs.low > 0 else " (its interval includes 0: more --eval-n would say whether it is real)"
        return Verdict(ship="conductor", why=f"the conductor beats the lookup it learned from: {vs.text()}{sure}", **common)
    return Verdict(ship="lookup", why=f"the conductor does not beat the per-task lookup it learned from ({vs.text()}); "
                                      "the fit ships the lookup itself as the pool's policy", **common)


def write_verdict(out: Path, verdict: Verdict) -> None:
    (out / VERDICT_FILE).write_text(verdict.model_dump_json(indent=1) + "\n")
