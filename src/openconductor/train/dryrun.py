"""What a run's target search would run, without running it (``conductor train CONFIG --dry-run``).

The search's own code (``search/warmup_targets.py``: ``domain_search`` / ``per_question``) runs with a stand-in grader that executes
nothing: it records each (question, workflow) it is asked to grade and scores every one alike. So the count
of workflow runs is the search's, not a copy of its arithmetic, and stays right when the search changes.
Exact except for rank rounds (``search.rank_rounds`` > 1), whose catch-up runs depend on the outcomes.

Worker calls: every step of every run is one call, except that a step which sees no earlier step (access
``[]``) asked of the same worker, with the same subtask, on the same question as an earlier run, is answered
by the replay store (``reward.replay``): those repeats are known before anything runs. Repeats of later steps
depend on what earlier steps answered, so ``calls`` is an upper bound on what a run with an empty store spends.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from ..pool import PoolSpec, load_pool
from ..workflow import parse
from .config import TrainConfig
from .data import build_rows, load_items


@dataclass
class SearchPlan:
    runs: int = 0  # workflow runs
    steps: int = 0  # steps in those runs: worker calls if nothing is replayed
    replayed_first_steps: int = 0  # context-free steps the replay store answers within the search
    per_worker: Counter = field(default_factory=Counter)  # calls per worker name (repeats left out)
    per_domain: dict[str, int] = field(default_factory=dict)  # runs per domain
    exact: bool = True  # False when rank rounds make the count depend on the outcomes

    @property
    def calls(self) -> int:
        """Worker calls the search makes at most on an empty replay store."""
        return self.steps - self.replayed_first_steps


class _Recorder:
    """Stands in for ``WorkflowReward``: records what the search asks it to grade, runs nothing, and gives every
    workflow the same reward (so screens and rankings keep the search's seeded tie order)."""

    def __init__(self, spec: PoolSpec):
        self.spec = spec
        self.plan = SearchPlan()
        self._seen: set[tuple[str, str, str]] = set()

    async def workflow_reward(self, prompts, completions, **columns) -> list[float]:
        for question, domain, text in zip(columns["question"], columns.get("domain") or [""] * len(completions), completions):
            steps = parse(text).steps
            self.plan.runs += 1
            self.plan.steps += len(steps)
            self.plan.per_domain[domain] = self.plan.per_domain.get(domain, 0) + 1
            for step in steps:
                name = self.spec.workers[step.worker].name
                key = (question, name, step.subtask)
                if not step.access and key in self._seen:
                    self.plan.replayed_first_steps += 1
                    continue
                if not step.access:
                    self._seen.add(key)
                self.plan.per_worker[name] += 1
        return [0.5] * len(completions)

    async def aclose(self) -> None:
        return None


def plan_search(cfg: TrainConfig, spec: Optional[PoolSpec] = None) -> SearchPlan:
    """The runs and worker calls of ``cfg``'s target search (``[search]``), counted without calling a worker."""
    from .search.warmup_targets import domain_search, per_question

    spec = spec or load_pool(cfg.pool_path)
    recorder = _Recorder(spec)
    if not cfg.search.candidates or not cfg.warmup_sft.examples:
        return recorder.plan
    # First-round rows only, as the search uses (a recursive row's draft answer would be a real call).
    first_round = dataclasses.replace(cfg, recursion=dataclasses.replace(cfg.recursion, fraction=0.0))
    first = build_rows(first_round, spec, load_items(first_round))
    n_prompts = -(-cfg.warmup_sft.examples // cfg.warmup_sft.targets_per_prompt)
    prompts = [first[i % len(first)] for i in range(n_prompts)]
    if cfg.search.selection == "domain":
        asyncio.run(domain_search(cfg, spec, recorder, prompts, first))
        domains = {row.domain for row in prompts}
        recorder.plan.exact = all(cfg.search.for_domain(d).rank_rounds == 1 for d in domains)
    else:
        asyncio.run(per_question(cfg, spec, recorder, prompts))
    return recorder.plan
