"""The ``[search]`` table of a training config (``TargetSearchSettings``, ``warmup_targets.py`` reads it) and the settings
that moved there from ``[warmup_sft]`` (named apart from ``sim.plan_search.SearchSettings``, the simulated world's
search). ``train/config.py`` holds the rest of the config and loads it."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

_STRICT = ConfigDict(extra="forbid")


@dataclass(config=_STRICT)
class DomainSearchSize:
    """One domain's overrides of the domain search's size (``[search.domains.NAME]``): a domain whose runs
    are slow (code: each HumanEval run takes 20-60 s on 2 cores) can search fewer candidates on fewer
    questions than the quick ones. Unset fields keep ``[search]``'s value."""

    candidates: Optional[int] = Field(None, ge=1)
    questions: Optional[int] = Field(None, ge=1)
    screen_rounds: Optional[int] = Field(None, ge=1)
    rank_rounds: Optional[int] = Field(None, ge=1)


@dataclass(config=_STRICT)
class TargetSearchSettings:
    """The search for the warm-up's targets (``warmup_targets.py``): random workflows run on the pool and
    graded by the run's reward; the ``warmup_sft.targets_per_prompt`` best become the targets.

    ``candidates`` = 0 (the default) searches nothing: the warm-up copies random drawn targets.
    """

    # Random workflows drawn (per prompt, or per domain), of which the targets_per_prompt best are kept.
    # Each candidate is one workflow run on the pool per question it is tried on (real calls on a real pool).
    candidates: int = Field(0, ge=0)
    # "question": `candidates` per prompt, ranked on that prompt's question alone, by correctness only (the
    # step and cost terms are left to GRPO, so shapes stay varied); ties in random order. "domain":
    # `candidates` per domain, screened on max(2, questions // 8) of its training questions, the best eighth
    # ranked by mean reward (step and cost terms included) on `questions` others; every prompt of the domain
    # is given its best. About candidates * (questions // 8 + questions / 8) workflow runs per domain. One
    # question's lucky outcome picks nothing in a domain search, where per question long chains win by
    # having more chances to repair. Fixed pools only (randomized pools renumber the ids per question).
    selection: Literal["question", "domain"] = "question"
    questions: int = Field(64, ge=1)
    # Successive halving before the ranking. Round 1 screens every candidate on the screen's questions;
    # each later round runs the surviving half on as many new questions and keeps the best half by mean
    # reward over all its screen questions so far, down to the finalists. 1 = one screen (the best eighth
    # after 2 questions). More rounds spare a good plan one unlucky question.
    screen_rounds: int = Field(1, ge=1)
    # Race the finalists on more questions. Each later round draws `questions` new training questions,
    # which the better half of the finalists (at least 2, by the mean over every ranking question each has
    # run) must all have run: whoever enters that half behind catches up. 1 = rank once. A race decided by
    # one question of 16 is a coin toss.
    rank_rounds: int = Field(1, ge=1)
    # The per-step cost the domain search ranks with; None: reward.step_weight. Lets the search prefer
    # short plans while GRPO afterwards is paid for accuracy alone (reward.step_weight = 0), so it has no
    # gradient toward dropping the checks the search found.
    step_weight: Optional[float] = Field(None, ge=0.0)
    # The per-1k-token cost the domain search ranks with; None: reward.token_weight. As step_weight: the
    # search prices tokens, GRPO afterwards need not.
    token_weight: Optional[float] = Field(None, ge=0.0)
    # Keep only the finalists whose mean reward is within this of the domain's best (each repeated to fill
    # targets_per_prompt); None keeps the targets_per_prompt best whatever their reward. A small search keeps
    # weak plans beside its one good one, and the copy then mixes their wordings.
    keep_within: Optional[float] = Field(None, ge=0.0)
    # Also rank the one-step plan "ask worker i" for every model in the pool (not its tools), so that asking
    # the best single worker is always among the finalists' rivals: a small search of random plans can miss it.
    single_worker_plans: bool = False
    # Per-domain sizes (the domain is the task's name, e.g. "humaneval"); see DomainSearchSize.
    domains: dict[str, DomainSearchSize] = Field(default_factory=dict)

    def for_domain(self, domain: str) -> "TargetSearchSettings":
        """These settings with ``domains[domain]``'s overrides applied."""
        size = self.domains.get(domain)
        if size is None:
            return self
        changed = {k: v for k, v in vars(size).items() if v is not None}
        return dataclasses.replace(self, **changed)


# Settings that moved from [warmup_sft] to [search]: old name -> new name.
MOVED_TO_SEARCH = {"candidates": "candidates", "selection": "selection", "search_questions": "questions", "screen_rounds": "screen_rounds",
                   "rank_rounds": "rank_rounds", "step_weight": "step_weight", "token_weight": "token_weight", "keep_within": "keep_within",
                   "single_worker_plans": "single_worker_plans", "domains": "domains"}


def _moved_settings(data: dict[str, Any]) -> Optional[str]:
    """The first setting of an older config that has a new name, as a message that gives it; else None."""
    warmup = data.get("warmup_sft")
    for key in (warmup if isinstance(warmup, dict) else {}):
        if key in MOVED_TO_SEARCH:
            return (f"warmup_sft.{key} is search.{MOVED_TO_SEARCH[key]} now: the search for the warm-up's targets has its own "
                    "[search] table (move the setting there)")
    search = data.get("search")
    domains = search.get("domains") if isinstance(search, dict) else None
    for name, size in (domains if isinstance(domains, dict) else {}).items():
        if isinstance(size, dict) and "search_questions" in size:
            return f"search.domains.{name}.search_questions is search.domains.{name}.questions now"
    if isinstance(search, dict) and "search_questions" in search:
        return "search.search_questions is search.questions now"
    return None
