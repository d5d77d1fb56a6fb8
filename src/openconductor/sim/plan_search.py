"""The plan search on a world-v3 pool (SIMULATED): one search behind the lookup tables, the warm-up's targets
across generated pools, and the per-pool re-run that unseen pools are scored against.

Per group of questions (a domain, a subtopic, a bucket, ...): a screen on the group's first questions
finds the best solvers, planners and checkers of the pool; plans of five shapes over them (and every
worker alone) are ranked on the next questions, and the ``top`` best are kept (``search_group``). A
plan's score on a question is 1 if right, minus ``token_weight`` per 1,000 tokens of its run (every
call's input and output), so near-ties go to the cheaper plan. Plans run on the world's
fast path (``world_v3.run_plan``: the executor's decisions and token counts, without the executor), so a
search of a whole pool takes seconds. The questions are training-side:
never the ones a table is scored on.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

from .questions import Question
from .world_v3 import Profile, run_plan
from ..workflow import Step, Workflow
from ..workflow.wordings import AGGREGATE, CHECK, IMPLEMENT, PLAN, SOLVE


SEARCH_SEED = 5_000  # the training-side questions every plan search and lookup is scored on (never the held-out sets')
BUCKET = "bucket (subtopic x level)"  # the finest grouping: what a copy's targets and the rank lookup use
GROUPINGS: dict[str, Callable[[Question], Hashable]] = {
    "domain": lambda q: q.domain,
    "domain x level": lambda q: (q.domain, q.level),
    "subtopic": lambda q: (q.domain, q.subtopic),
    BUCKET: lambda q: q.bucket,
}


def candidate_plans(n_workers: int) -> list[Workflow]:
    """Every plan of five shapes over the pool: one worker; solve -> check; plan -> implement;
    plan -> implement -> check; two solvers -> aggregator (6 workers: 384 plans; 8: 872)."""
    w = range(n_workers)
    out = [Workflow((Step(a, SOLVE, ()),), "one agent answers.") for a in w]
    out += [Workflow((Step(a, SOLVE, ()), Step(b, CHECK, "all")), "an answer, then a check.") for a in w for b in w]
    out += [Workflow((Step(p, PLAN, ()), Step(a, IMPLEMENT, "all")), "a plan, then an answer that follows it.") for p in w for a in w]
    out += [Workflow((Step(p, PLAN, ()), Step(a, IMPLEMENT, "all"), Step(b, CHECK, "all")), "plan, implement, check.")
            for p in w for a in w for b in w]
    out += [Workflow((Step(a, SOLVE, ()), Step(b, SOLVE, ()), Step(c, AGGREGATE, "all")), "two independent answers, then one agent combines them.")
            for a, b in itertools.combinations(w, 2) for c in w]
    return out


@dataclass(frozen=True)
class SearchSettings:
    screen: int = 32  # a group's first questions: every worker alone, and every worker as planner and as checker
    finalists: int = 4  # workers kept per slot from the screen to compose multi-step plans
    rank: int = 48  # the next questions: every composed plan (and every single worker) is ranked on them
    top: int = 4  # plans kept per group
    token_weight: float = 0.012  # per 1,000 tokens: the price that kept v2's accuracy at ~0.25x MoA's tokens

    @property
    def questions(self) -> int:
        """Questions a group needs: the screen's and the ranking's."""
        return self.screen + self.rank


@dataclass(frozen=True)
class Scored:
    plan: Workflow
    score: float  # mean over the ranking questions
    accuracy: float
    tokens: float
    questions: int


def steps_of(plan: Workflow) -> list[tuple[int, str, object]]:
    """A plan as the steps ``run_plan`` takes: (worker, subtask, access) each."""
    return [(s.worker, s.subtask, s.access) for s in plan.steps]


def _score(plans: Sequence[Workflow], profiles: Sequence[Profile], questions: Sequence[Question], token_weight: float) -> list[Scored]:
    out = []
    for plan in plans:
        steps, right, tokens = steps_of(plan), 0, 0
        for q in questions:
            result = run_plan(q.text, steps, profiles)
            right += result.correct
            tokens += result.tokens
        n = max(1, len(questions))
        out.append(Scored(plan, (right - token_weight * tokens / 1000) / n, right / n, tokens / n, len(questions)))
    return out


def _best(scored: Sequence[Scored], k: int) -> list[int]:
    """Indices of the k best (ties: the earlier)."""
    return sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))[:k]


def search_group(profiles: Sequence[Profile], questions: Sequence[Question], settings: SearchSettings = SearchSettings()) -> list[Scored]:
    """The ``settings.top`` best plans for one group of questions, best first (ties: the shorter plan).

    Screen (the group's first ``screen`` questions): every worker alone; every worker planning for the best
    solver; the best solver checked by every worker. The ``finalists`` best of each become the solvers,
    planners and checkers of the composed plans (``candidate_plans``' five shapes over them), which are
    ranked with every single worker on the next ``rank`` questions."""
    n, k = len(profiles), settings.finalists
    screen, ranking = questions[: settings.screen], questions[settings.screen : settings.questions]
    solo = _score([Workflow((Step(a, SOLVE, ()),)) for a in range(n)], profiles, screen, settings.token_weight)
    solvers = _best(solo, k)
    lead = solvers[0]
    planned = _score([Workflow((Step(p, PLAN, ()), Step(lead, IMPLEMENT, "all"))) for p in range(n)], profiles, screen, settings.token_weight)
    checked = _score([Workflow((Step(lead, SOLVE, ()), Step(c, CHECK, "all"))) for c in range(n)], profiles, screen, settings.token_weight)
    planners, checkers = _best(planned, k), _best(checked, k)
    plans = [w for w in candidate_plans(n) if _fits(w, solvers, planners, checkers)]
    ranked = _score(plans, profiles, ranking or screen, settings.token_weight)
    return [ranked[i] for i in _best(ranked, settings.top)]


def _fits(plan: Workflow, solvers: Sequence[int], planners: Sequence[int], checkers: Sequence[int]) -> bool:
    """Whether a candidate uses only finalists in each slot (a single worker always fits)."""
    if len(plan.steps) == 1:
        return True
    slots = {SOLVE: solvers, IMPLEMENT: solvers, PLAN: planners, CHECK: checkers, AGGREGATE: checkers}
    return all(s.worker in slots[s.subtask] for s in plan.steps)


def search_pool(profiles: Sequence[Profile], questions: Sequence[Question], group: Callable[[Question], Hashable],
                settings: SearchSettings = SearchSettings()) -> dict[Hashable, list[Scored]]:
    """``search_group`` for every group of ``questions`` (each group uses its first ``settings.questions``)."""
    members: dict[Hashable, list[Question]] = defaultdict(list)
    for q in questions:
        members[group(q)].append(q)
    return {key: search_group(profiles, qs, settings) for key, qs in members.items()}


def lookup(tables: dict[Hashable, list[Scored]], group: Callable[[Question], Hashable]) -> Callable[[Question], Workflow]:
    """The lookup-table policy of a search: a question's group's best plan."""
    return lambda q: tables[group(q)][0].plan


# ------------------------------------------------------------------ plans over ranks: one table for every pool

RANKS = 3  # a rank plan's worker k is the k-th best worker of the question's area


def at_ranks(plan: Workflow, order: Sequence[int]) -> Workflow:
    """A plan over ranks made concrete for one pool: rank k becomes ``order[k]`` (the pool's k-th best in the
    question's area; a pool with fewer workers repeats its last)."""
    return Workflow(tuple(Step(order[min(s.worker, len(order) - 1)], s.subtask, s.access) for s in plan.steps), plan.reasoning)


def rank_search(pools: Sequence[tuple[Sequence[Profile], dict]], questions: Sequence[Question],
                group: Callable[[Question], Hashable], token_weight: float = SearchSettings.token_weight,
                ranked_by: Callable[[Question], Hashable] = lambda q: q.domain) -> dict[Hashable, Scored]:
    """Per group, the plan over ranks (``candidate_plans(RANKS)``: the five shapes over the 1st-3rd best of the
    question's area) with the best mean score over every pool's ``questions``. ``pools``: each pool's
    profiles and its ranking (``area_ranking``; or ``subtopic_ranking``, with ``ranked_by`` the question's
    (domain, subtopic), ``sim.pools.RANKINGS``). The table names no worker, so it applies to any pool: what a
    conductor that reads the ranking could reach without learning a single pool."""
    plans = candidate_plans(RANKS)
    members: dict[Hashable, list[Question]] = defaultdict(list)
    for q in questions:
        members[group(q)].append(q)
    out = {}
    for key, asked in members.items():
        places = {ranked_by(q) for q in asked}
        if len(places) != 1:  # a rank is a place in one ranking
            raise ValueError(f"group {key!r} mixes rankings {sorted(places)}: a plan over ranks needs one ranking per group")
        per_pool = [_score([at_ranks(p, ranking[ranked_by(asked[0])]) for p in plans], profiles, asked, token_weight) for profiles, ranking in pools]
        mean = [[sum(getattr(scored[k], f) for scored in per_pool) / len(pools) for f in ("score", "accuracy", "tokens")] for k in range(len(plans))]
        best = min(range(len(plans)), key=lambda k: (-mean[k][0], k))
        out[key] = Scored(plans[best], *mean[best], len(asked) * len(pools))
    return out
