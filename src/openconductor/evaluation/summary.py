"""Summaries of graded runs: per (task, policy) accuracy, tokens, calls, cost, steps and latency, broken
down per domain (accuracy, steps, who writes the first and the final step), the workflows' shapes, and
paired-bootstrap intervals of the accuracy difference to a named baseline."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import Optional, Sequence

from pydantic import BaseModel, Field

from .records import EvalError, EvalRecord


class DomainStats(BaseModel):
    """One domain's share of a summary row. Worker shares are over all the domain's runs (a run without a
    workflow has neither a first nor a final worker)."""

    n: int
    accuracy: float
    steps: float  # per run that had a workflow
    first_worker: dict[str, float] = Field(default_factory=dict)  # in a solve-then-check chain: who writes the answer
    final_worker: dict[str, float] = Field(default_factory=dict)  # who has the last word


class Interval(BaseModel):
    """A paired difference in accuracy to a baseline over the same (question, repeat) pairs, with its
    paired-bootstrap 95 % interval."""

    baseline: str
    n: int
    mean: float
    low: float
    high: float


class SummaryRow(BaseModel):
    task: str
    policy: str
    n: int
    accuracy: float
    stderr: float
    mean_score: float
    tokens: float  # per question, workers + conductor
    conductor_tokens: float
    calls: float
    cost_usd: float
    steps: float  # per run that had a workflow
    latency_s: float
    plan_fallbacks: int
    errors: int
    parse_rate: float = 1.0  # share of runs whose policy produced a workflow
    domains: dict[str, DomainStats] = Field(default_factory=dict)
    worker_share: dict[str, float] = Field(default_factory=dict)  # the final step's worker, over all runs
    shapes: dict[str, float] = Field(default_factory=dict)  # workflow shapes ("unparseable": no workflow)
    vs: Optional[Interval] = None  # against the baseline summarize() was given


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stderr(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1) / n)


def shape(accesses: Sequence) -> str:
    """A short name for a workflow's shape, from its access lists alone: single, fan-out, chain-N or other."""
    if len(accesses) <= 1:
        return "single"
    normal = [a if a == "all" else tuple(a) for a in accesses]
    if sum(1 for a in normal[:-1] if a == ()) >= 2:
        return "fan-out"
    if all(a == "all" or a == (i - 1,) for i, a in enumerate(normal) if i):
        return f"chain-{len(normal)}"
    return "other"


def shares(counts: Counter, n: int) -> dict[str, float]:
    """Counts as shares of ``n``, most common first."""
    return {k: v / n for k, v in counts.most_common()}


def domain_stats(records: list[EvalRecord]) -> dict[str, DomainStats]:
    by_domain: dict[str, list[EvalRecord]] = defaultdict(list)
    for r in records:
        by_domain[r.domain].append(r)
    out = {}
    for domain, rs in by_domain.items():
        planned = [r.steps for r in rs if r.planned]
        out[domain] = DomainStats(
            n=len(rs), accuracy=mean([float(r.correct) for r in rs]), steps=mean(planned),
            first_worker=shares(Counter(r.workers_used[0] for r in rs if r.workers_used), len(rs)),
            final_worker=shares(Counter(r.workers_used[-1] for r in rs if r.workers_used), len(rs)),
        )
    return out


def _row(task: str, policy: str, rs: list[EvalRecord]) -> SummaryRow:
    correct = [1.0 if r.correct else 0.0 for r in rs]
    planned = [r for r in rs if r.planned]
    return SummaryRow(
        task=task, policy=policy, n=len(rs), accuracy=mean(correct), stderr=_stderr(correct),
        mean_score=mean([r.score for r in rs]), tokens=mean([r.tokens for r in rs]),
        conductor_tokens=mean([r.conductor_tokens for r in rs]), calls=mean([r.calls for r in rs]),
        cost_usd=mean([r.cost_usd for r in rs]), steps=mean([r.steps for r in planned]),
        latency_s=mean([r.wall_s for r in rs]), plan_fallbacks=sum(1 for r in rs if r.plan_fallback),
        errors=sum(1 for r in rs if r.status in ("error", "plan_failed")), parse_rate=len(planned) / len(rs),
        domains=domain_stats(rs), worker_share=shares(Counter(r.workers_used[-1] for r in rs if r.workers_used), len(rs)),
        shapes=shares(Counter(shape(r.accesses) if r.planned else "unparseable" for r in rs), len(rs)),
    )


def summarize(records: list[EvalRecord], *, against: Optional[str] = None, resamples: int = 10_000) -> list[SummaryRow]:
    """One row per (task, policy), in the order they first appear. ``against``: a policy label; every other
    row of a task it ran on gets ``vs``, its paired accuracy difference to it (EvalError if no record has it)."""
    groups: dict[tuple[str, str], list[EvalRecord]] = defaultdict(list)
    for r in records:
        groups[(r.task, r.policy)].append(r)
    rows = [_row(task, policy, rs) for (task, policy), rs in groups.items()]
    if against is None:
        return rows
    if not any(policy == against for _, policy in groups):
        raise EvalError(f"baseline {against!r} is not among the policies evaluated: {', '.join(dict.fromkeys(p for _, p in groups))}")
    for row in rows:
        base = groups.get((row.task, against))
        if base is not None and row.policy != against:
            row.vs = compare(groups[(row.task, row.policy)], base, name=against, resamples=resamples)
    return rows


def compare(records: list[EvalRecord], baseline: list[EvalRecord], *, name: str, resamples: int = 10_000) -> Optional[Interval]:
    """The accuracy difference of ``records`` to ``baseline`` (the records of the policy called ``name``) over
    the (question, repeat) pairs both ran, with its paired-bootstrap 95 % interval; None when they share none."""
    theirs = {(r.question_id, r.repeat): int(r.correct) for r in baseline}
    pairs = [(int(r.correct), theirs[(r.question_id, r.repeat)]) for r in records if (r.question_id, r.repeat) in theirs]
    if not pairs:
        return None
    m, lo, hi = paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs], resamples=resamples)
    return Interval(baseline=name, n=len(pairs), mean=m, low=lo, high=hi)


def paired_bootstrap(a: list[int], b: list[int], *, resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(mean of a - b, 2.5th and 97.5th percentile of that mean over questions resampled with replacement)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired bootstrap needs two equally long, non-empty per-question lists")
    diff = [x - y for x, y in zip(a, b)]
    n, rng = len(diff), random.Random(seed)
    means = sorted(sum(diff[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return sum(diff) / n, means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def pooled_bootstrap(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *, resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """The mean over pools of (a - b) in points, with a 95 % interval from resampling each pool's questions."""
    rng = random.Random(seed)
    diffs = [[x - y for x, y in zip(a, b)] for a, b in pairs]
    mean = 100 * sum(sum(d) / len(d) for d in diffs) / len(diffs)
    draws = sorted(100 * sum(sum(d[rng.randrange(len(d))] for _ in d) / len(d) for d in diffs) / len(diffs) for _ in range(resamples))
    return mean, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def interval_text(vs: Optional[Interval]) -> str:
    """``+1.2 [-0.3, +2.7]`` in points, or a dash."""
    return "—" if vs is None else f"{100 * vs.mean:+.1f} [{100 * vs.low:+.1f}, {100 * vs.high:+.1f}]"


def markdown_table(rows: list[SummaryRow]) -> str:
    against = next((r.vs.baseline for r in rows if r.vs is not None), None)
    extra = f" vs {against} (points, 95% CI) |" if against else ""
    lines = [
        "| task | policy | n | accuracy ± s.e. | tokens/q | calls/q | cost/q ($) | steps | latency (s) | fallbacks | errors |" + extra,
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if against else ""),
    ]
    for r in rows:
        lines.append(
            f"| {r.task} | {r.policy} | {r.n} | {100 * r.accuracy:.1f} ± {100 * r.stderr:.1f} | {r.tokens:.0f} | "
            f"{r.calls:.2f} | {r.cost_usd:.5f} | {r.steps:.2f} | {r.latency_s:.1f} | {r.plan_fallbacks} | {r.errors} |"
            + (f" {interval_text(r.vs)} |" if against else "")
        )
    return "\n".join(lines)
