"""The simulated world against the paper's Table 7: the project's own baselines, run through the executor.

``calibrate(pool, n)`` runs every baseline of the paper's constrained, in-distribution table on ``n``
simulated questions through the evaluator (``openconductor.evaluation``: the ordinary ``executor.solve``,
policies from ``openconductor.policies``; the oracle router and the workflow families as per-domain
lookup tables), and returns one row per baseline with the world's per-domain accuracy next to the
paper's. Every world number is SIMULATED.
``benchmarks/world_calibration.py`` prints it; ``tests/test_world.py`` checks the tolerances.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ..policies.base import Policy, make_policy
from ..policies.baselines import GivenWorkflow
from ..policies.lookup import LookupTable, OracleRouter
from ..pool import Pool, PoolSpec
from ..sim import world
from ..sim.world import DOMAINS, Traits
from ..tasks.simulated import simulated_task
from ..workflow import Step, Workflow
from ..workflow.wordings import AGGREGATE, CHECK, IMPLEMENT, PLAN, SOLVE
from .runner import evaluate
from .summary import summarize

# The paper's Table 7 (constrained setting, in-distribution, accuracy %): MATH500, MMLU, RLPR, LCB.
PAPER: dict[str, tuple[Optional[float], ...]] = {
    "gemini-2.5-pro": (85.30, 91.53, 39.57, 40.14),
    "claude-sonnet-4": (82.90, 90.66, 32.60, 38.00),
    "gpt-5-minimal": (74.45, 89.79, 33.13, 57.50),
    "qwen3-32b": (76.85, 83.28, 34.35, 31.21),
    "r1-distill-qwen-32b": (78.50, 84.41, 32.75, 24.86),
    "gemma-3-27b-it": (37.45, 63.58, 14.93, 7.21),
    "MoA (7 proposers + random aggregator, 8 calls)": (83.10, 88.46, 38.37, 38.57),
    "self-reflection x5 (gpt-5-minimal)": (76.93, 91.79, 31.80, 57.57),
    "self-reflection x5 (gemini-2.5-pro)": (None, None, None, None),  # the notes give its average only
    "oracle per-domain router": (85.30, 91.53, 39.57, 57.50),
    "trained Conductor (paper)": (89.33, 93.14, 42.63, 64.29),
}
PAPER_AVG = {"self-reflection x5 (gemini-2.5-pro)": 64.2}
# Tolerances the world is held to (points of average accuracy; singles: per domain).
TOLERANCE = {"single": 2.0, "MoA": 3.0, "self-reflection": 3.0, "oracle": 1.0}


@dataclass
class Row:
    system: str
    kind: str  # single | MoA | self-reflection | oracle | family
    accuracy: dict[str, float]  # per domain and "avg", in %
    tokens: float  # mean tokens per question (input + output of every worker call; simulated words)
    calls: float
    paper: dict[str, Optional[float]] = field(default_factory=dict)

    def gap(self, key: str) -> Optional[float]:
        ref = self.paper.get(key)
        return None if ref is None else self.accuracy[key] - ref

    def within(self) -> Optional[bool]:
        """Whether the row is inside its tolerance (None: no paper value to compare with)."""
        if self.kind == "single":
            gaps = [self.gap(d) for d in DOMAINS]
            return all(g is not None and abs(g) <= TOLERANCE["single"] for g in gaps)
        gap = self.gap("avg")
        if self.kind in TOLERANCE and gap is not None:
            return abs(gap) <= TOLERANCE[self.kind]
        return None


def _paper(name: str) -> dict[str, Optional[float]]:
    values = PAPER.get(name, (None,) * 4)
    out = dict(zip(DOMAINS, values))
    known = [v for v in values if v is not None]
    out["avg"] = PAPER_AVG.get(name, sum(known) / 4 if len(known) == 4 else None)
    return out


def best_for(spec: PoolSpec, domain: str, *, exclude: tuple[int, ...] = (), key: str = "") -> int:
    """The worker with the highest skill on ``domain`` (plus an aptitude, e.g. "plan"), not in ``exclude``."""
    traits = [Traits.from_spec(w) for w in spec.workers]

    def score(i: int) -> float:
        t = traits[i]
        return world._probit(float(t.skills.get(domain, 0.0))) + (getattr(t, key) if key else 0.0)

    candidates = [i for i, w in enumerate(spec.workers) if w.provider == "simulated" and i not in exclude]
    return max(candidates, key=score)




def families(spec: PoolSpec) -> dict[str, Callable[[str], Workflow]]:
    """Workflow families that use the pool's declared strengths per domain (an oracle's choices)."""

    def route_check(domain: str) -> Workflow:
        a = best_for(spec, domain)
        b = best_for(spec, domain, exclude=(a,), key="check")
        return Workflow((Step(a, SOLVE, ()), Step(b, CHECK, "all")))

    def plan_implement_check(domain: str) -> Workflow:
        p = best_for(spec, domain, key="plan")
        a = best_for(spec, domain, key="implement")
        b = best_for(spec, domain, exclude=(a,), key="check")
        return Workflow((Step(p, PLAN, ()), Step(a, IMPLEMENT, "all"), Step(b, CHECK, "all")))

    def fan_out(domain: str) -> Workflow:
        a = best_for(spec, domain)
        b = best_for(spec, domain, exclude=(a,))
        c = best_for(spec, domain, exclude=(a, b), key="check")
        return Workflow((Step(a, SOLVE, ()), Step(b, SOLVE, ()), Step(c, AGGREGATE, "all")))

    return {
        "family: route + cross-check (2 steps)": route_check,
        "family: plan -> implement -> cross-check (3 steps)": plan_implement_check,
        "family: two solvers + aggregator (3 steps)": fan_out,
    }


def systems(spec: PoolSpec) -> list[tuple[str, str, Policy]]:
    """(label, kind, policy) for every baseline of the table."""
    names = [w.name for w in spec.workers if w.provider == "simulated"]
    out: list[tuple[str, str, Policy]] = [(n, "single", make_policy("single", worker=n)) for n in names]
    out.append(("MoA (7 proposers + random aggregator, 8 calls)", "MoA", make_policy("moa", proposers=7, aggregator="random")))
    for n in ("gpt-5-minimal", "gemini-2.5-pro"):
        if n in names:
            out.append((f"self-reflection x5 ({n})", "self-reflection", make_policy("self-reflection", worker=n, rounds=4)))
    out.append(("oracle per-domain router", "oracle", OracleRouter({d: spec.workers[best_for(spec, d)].name for d in DOMAINS})))
    for label, make in families(spec).items():
        out.append((label, "family", LookupTable({d: make(d) for d in DOMAINS}, name=label)))
    return out


class _PerQuestion(Policy):
    """A given workflow per question, found by its text (world v3's per-subtopic and per-bucket lookups)."""

    def __init__(self, name: str, make: Callable[[Any], Workflow], by_text: Mapping[str, Any]):  # world v2's or v3's questions
        self.name, self.make, self.by_text = name, make, by_text

    async def plan(self, request):
        return await GivenWorkflow(self.make(self.by_text[request.question]), name=self.name).plan(request)


async def table_rows(entries: list[tuple[str, str, Policy]], questions: list, pool: Pool, concurrency: int) -> list[Row]:
    """One table row per (label, kind, policy), each run on every question through the evaluator; only
    the paper's own systems get its numbers."""
    records = await evaluate([simulated_task(questions)], [(label, policy) for label, _, policy in entries], pool,
                             concurrency=concurrency, seed=0, seed_per_question=False, stream_tokens=False)
    summary = {row.policy: row for row in summarize(records)}
    rows = []
    for label, kind, _ in entries:
        found = summary[label]
        acc = {d: 100.0 * found.domains[d].accuracy if d in found.domains else 0.0 for d in DOMAINS}
        acc["avg"] = sum(acc[d] for d in DOMAINS) / len(DOMAINS)
        rows.append(Row(label, kind, acc, found.tokens, found.calls, _paper(label if kind not in ("family", "lookup") else "")))
    return rows


async def calibrate_async(spec: PoolSpec, n: int = 1000, seed: int = 7, *, concurrency: int = 64) -> list[Row]:
    traits = [Traits.from_spec(w) for w in spec.workers if w.provider == "simulated"]
    async with Pool(spec) as pool:
        rows = await table_rows(systems(spec), world.make_questions(n, seed, stratify=traits), pool, concurrency)
    best = max((r for r in rows if r.kind == "family"), key=lambda r: r.accuracy["avg"])
    rows.append(Row(f"best workflow family = {best.system.removeprefix('family: ')}", "best-family", best.accuracy,
                    best.tokens, best.calls, _paper("trained Conductor (paper)")))
    return rows


def calibrate(spec: PoolSpec, n: int = 1000, seed: int = 7) -> list[Row]:
    return asyncio.run(calibrate_async(spec, n, seed))


def table(rows: list[Row]) -> str:
    cols = list(DOMAINS) + ["avg"]
    head = ("| system | " + " | ".join(f"world {c}" for c in cols) + " | " + " | ".join(f"paper {c}" for c in cols)
            + " | tokens/q | calls/q | within tolerance |")
    lines = [head, "|---" * (2 * len(cols) + 4) + "|"]
    for r in rows:
        paper = " | ".join("—" if r.paper.get(c) is None else f"{r.paper[c]:.1f}" for c in cols)
        ok = r.within()
        mark = {True: "yes", False: "NO", None: "—"}[ok]
        if r.kind == "best-family":
            mark = "yes (>= 72)" if r.accuracy["avg"] >= 72.0 else "NO (< 72)"
        lines.append(f"| {r.system} | " + " | ".join(f"{r.accuracy[c]:.1f}" for c in cols) + f" | {paper} | {r.tokens:,.0f} | {r.calls:.1f} | {mark} |")
    return "\n".join(lines)
