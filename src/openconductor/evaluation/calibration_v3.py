"""World v3 against the paper's Table 7, and what its visible evidence is worth. Every number is SIMULATED.

The Table 7 rows are v2's (``calibration.py``: every single worker, MoA, self-reflection, the
oracle per-domain router), run through the executor on stratified v3 questions. Then *lookup tables*:
one workflow per group of questions (per domain, per domain x level, per subtopic, per bucket =
subtopic x level), each the best of ``candidate_plans`` by accuracy on separate selection questions
(``run_plan``: the world's decisions without the executor), scored through the executor on the
calibration questions. The per-bucket table is the best a policy that reads the question's evidence
can do with these plans (an oracle over buckets); its margin over the per-domain table is what v3 adds
over v2, where that margin is 0 by construction.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Hashable, Sequence

from ..pool import Pool, PoolSpec
from ..sim import world_v3
from ..sim.plan_search import GROUPINGS, candidate_plans
from ..sim.questions import Question
from ..sim.world_v3 import PARAMS_V3, Profile, V3Params, run_plan
from ..workflow import Workflow
from .calibration import Row, _PerQuestion, systems, table_rows

LOOKUP = "best lookup table: one plan per "


def plan_scores(plans: Sequence[Workflow], profiles: Sequence[Profile], questions: Sequence[Question], params: V3Params = PARAMS_V3) -> list[list[bool]]:
    """Per plan, per question: whether it answers right (``run_plan``)."""
    steps = [[(s.worker, s.subtask, s.access) for s in wf.steps] for wf in plans]
    return [[run_plan(q.text, st, profiles, params)[1] for q in questions] for st in steps]


def lookup_tables(plans: Sequence[Workflow], scores: list[list[bool]], questions: Sequence[Question]) -> dict[str, dict[Hashable, Workflow]]:
    """Per grouping, the most accurate plan of each group on ``questions`` (ties: the earlier, i.e. shorter, plan)."""
    out = {}
    for label, key in GROUPINGS.items():
        members: dict[Hashable, list[int]] = defaultdict(list)
        for i, q in enumerate(questions):
            members[key(q)].append(i)
        out[label] = {k: plans[max(range(len(plans)), key=lambda p: (sum(scores[p][i] for i in idx), -p))] for k, idx in members.items()}
    return out


async def calibrate_v3_async(spec: PoolSpec, n: int = 1000, seed: int = 7, *, select_n: int = 4800, select_seed: int = 101,
                             concurrency: int = 64) -> list[Row]:
    profiles = [Profile.from_spec(w) for w in spec.workers]
    questions = world_v3.make_questions(n, seed, stratify=profiles)
    tables: dict[str, dict[Hashable, Workflow]] = {}
    if select_n:  # 0: the Table 7 rows only
        selection = world_v3.make_questions(select_n, select_seed, exclude=frozenset(q.text for q in questions))
        plans = candidate_plans(len(profiles))
        tables = lookup_tables(plans, plan_scores(plans, profiles, selection), selection)
    by_text = {q.text: q for q in questions}
    async with Pool(spec) as pool:
        entries = [(label, kind, policy) for label, kind, policy in systems(spec) if kind != "family"]
        for label, table in tables.items():
            key = GROUPINGS[label]
            entries.append((f"{LOOKUP}{label} ({len(table)} plans)", "lookup",
                            _PerQuestion(label, lambda q, t=table, k=key: t[k(q)], by_text)))  # type: ignore[misc]
        rows = await table_rows(entries, questions, pool, concurrency)
    return rows


def calibrate_v3(spec: PoolSpec, n: int = 1000, seed: int = 7, **kw) -> list[Row]:
    return asyncio.run(calibrate_v3_async(spec, n, seed, **kw))


def evidence_margin(rows: Sequence[Row]) -> float:
    """Points of average accuracy the per-bucket lookup gains over the per-domain one."""
    lookup = {label: next(r for r in rows if r.system.startswith(LOOKUP + label + " (")) for label in ("domain", "bucket (subtopic x level)")}
    return lookup["bucket (subtopic x level)"].accuracy["avg"] - lookup["domain"].accuracy["avg"]

