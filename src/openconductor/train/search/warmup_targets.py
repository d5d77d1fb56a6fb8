"""The search for the warm-up's targets: random workflows run on the pool, graded, the best kept.

``warmup_targets`` decides what the supervised warm-up copies for each prompt. Without a search
(``search.candidates = 0``) it copies random targets (``warmup.format_targets``: balanced over steps and
shapes, random workers). With one, the targets are selected by rejection sampling (``select_targets``):
``selection = "question"`` keeps each prompt's best of ``candidates`` random workflows run on its own
question; ``selection = "domain"`` screens ``candidates`` per domain on a few training questions
(``screen_candidates``: successive halving), ranks the finalists on others (``rank_finalists``: rounds
with catch-up) and gives every prompt of the domain its best. Settings: ``[search]``
(``settings.TargetSearchSettings``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import Optional

from ...pool import PoolSpec
from ...workflow import Step, Workflow, parse
from ..config import TrainConfig, TrainConfigError
from ..data import TrainRow
from ..reward import WorkflowReward, replay_store
from ..warmup import format_targets, keep_best, single_worker_plans
from . import screening
from .screening import mean_rewards, rank_finalists, screen_candidates

log = logging.getLogger(__name__)


def warmup_targets(cfg: TrainConfig, spec: PoolSpec, rows: list[TrainRow]) -> tuple[list[TrainRow], list[str], Optional[dict]]:
    """The warm-up's (row of each target, targets, search summary or None): searched when ``search.candidates``
    is set, else drawn at random."""
    w = cfg.warmup_sft
    if cfg.search.candidates:
        return select_targets(cfg, spec, rows)
    targets = format_targets(w.examples, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed, fine_grained=cfg.prompt.fine_grained,
                             code_runners=_code_runners(cfg, spec))
    # Each prompt gets `targets_per_prompt` consecutive targets: they share its forward pass.
    shown = [rows[(i // w.targets_per_prompt) % len(rows)] for i in range(w.examples)]
    # Randomized pools show fewer workers: keep every target's ids within the prompt's pool.
    return shown, [_clip_ids(t, len(row.workers)) for t, row in zip(targets, shown)], None


def select_targets(cfg: TrainConfig, spec: PoolSpec, rows: list[TrainRow]) -> tuple[list[TrainRow], list[str], dict]:
    """Warm-up targets by rejection sampling: random workflows run on the pool and graded by the run's
    reward; the ``targets_per_prompt`` best are kept. ``selection = "question"`` draws ``candidates`` per
    prompt and ranks them on that prompt's question (step/cost terms zeroed); ``"domain"`` searches
    ``candidates`` per domain across many of its training questions (``domain_search``).
    Returns (the row of each target, the targets, a summary for the warm-up's manifest)."""
    w, search = cfg.warmup_sft, cfg.search
    n_prompts = -(-w.examples // w.targets_per_prompt)
    # First-round rows only: a recursive round's best move may be to accept, which no candidate is.
    first = [row for row in rows if row.round == 1]
    prompts = [first[i % len(first)] for i in range(n_prompts)]
    if search.selection == "domain":
        priced = {name: getattr(search, name) for name in ("step_weight", "token_weight") if getattr(search, name) is not None}
        reward = dataclasses.replace(cfg.reward, **priced)
    else:
        reward = dataclasses.replace(cfg.reward, step_weight=0.0, cost_weight=0.0, token_weight=0.0)
    grader = WorkflowReward(spec, reward, cfg.prompt, cache=replay_store(cfg))

    async def select() -> tuple[list[list[tuple[TrainRow, str, float]]], dict]:
        try:
            if search.selection == "domain":
                return await domain_search(cfg, spec, grader, prompts, first)
            return await per_question(cfg, spec, grader, prompts)
        finally:
            await grader.aclose()

    started = time.monotonic()
    kept, summary = asyncio.run(select())
    # Consecutive targets per prompt (they share its forward pass), cut to `examples`.
    picked = [one for best in kept for one in best][: w.examples]
    summary = {"selection": search.selection, "prompts": n_prompts, "candidates": search.candidates, "kept_per_prompt": w.targets_per_prompt, **summary,
               "mean_reward_kept": sum(score for _, _, score in picked) / len(picked), "seconds": round(time.monotonic() - started, 1)}
    log.info("warm-up targets selected (%s): mean reward %.3f over the candidates, %.3f kept (%.0f s)",
             search.selection, summary["mean_reward_candidates"], summary["mean_reward_kept"], summary["seconds"])
    return [row for row, _, _ in picked], [text for _, text, _ in picked], summary


async def per_question(cfg: TrainConfig, spec: PoolSpec, grader: WorkflowReward, prompts: list[TrainRow]):
    """``candidates`` random workflows per prompt, each run once on that prompt's question."""
    n, per_prompt = cfg.search.candidates, cfg.warmup_sft.targets_per_prompt
    drawn = format_targets(len(prompts) * n, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed, fine_grained=cfg.prompt.fine_grained,
                           code_runners=_code_runners(cfg, spec))
    candidates = [[_clip_ids(t, len(row.workers)) for t in drawn[i * n : (i + 1) * n]] for i, row in enumerate(prompts)]
    flat = await screening.grade_pairs(grader, [(row, t) for row, texts in zip(prompts, candidates) for t in texts])
    scores = [flat[i * n : (i + 1) * n] for i in range(len(prompts))]
    scored = [[(row, text, score) for text, score in zip(texts, marks)] for row, texts, marks in zip(prompts, candidates, scores)]
    return keep_best(scored, scores, per_prompt, cfg.data.seed), {"mean_reward_candidates": sum(flat) / len(flat)}


def _domain_candidates(cfg: TrainConfig, spec: PoolSpec, w, domain: str, g: int) -> list[str]:
    """The distinct workflows the search of domain number ``g`` tries (``w``: its search settings); at least
    targets_per_prompt of them, else the config is refused."""
    per_prompt = cfg.warmup_sft.targets_per_prompt
    drawn = format_targets(w.candidates, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed * 7919 + g, fine_grained=cfg.prompt.fine_grained,
                           code_runners=_code_runners(cfg, spec))
    if w.single_worker_plans:
        drawn += single_worker_plans(spec)
    texts = list(dict.fromkeys(drawn))
    if len(texts) < per_prompt:
        size = cfg.search.domains.get(domain)
        setting = f"search.domains.{domain}.candidates" if size and size.candidates else "search.candidates"
        raise TrainConfigError(f"search: only {len(texts)} distinct workflows among {w.candidates} candidates for domain {domain!r}, "
                               f"fewer than targets_per_prompt = {per_prompt}; raise {setting}")
    return texts


async def domain_search(cfg: TrainConfig, spec: PoolSpec, grader: WorkflowReward, prompts: list[TrainRow], first: list[TrainRow]):
    """Per domain, ``candidates`` random workflows are screened on ``max(2, questions // 8)`` of its
    training questions (``screen_rounds`` > 1: successive halving, ``screen_candidates``); the best eighth are
    ranked by mean reward on up to ``questions`` others (not the screen's: the questions that
    picked a finalist would flatter it), and the ``targets_per_prompt`` best become the targets of every
    prompt of that domain. One question's lucky outcome picks nothing here (the weakness of per-question
    selection: long chains win by having more chances to repair). Fixed pools only (the config check):
    ids must mean the same worker on every row."""
    rng = random.Random(f"domain-search|{cfg.data.seed}")
    kept_by_domain: dict[str, list[tuple[str, float]]] = {}
    report = []
    screened: list[float] = []
    domains = list(dict.fromkeys(row.domain for row in prompts))
    unknown = sorted(set(cfg.search.domains) - set(domains))
    if unknown:
        raise TrainConfigError(f"search.domains names {unknown}, which are not domains of the warm-up's prompts (a task's own name, "
                               f"e.g. letter_counting for rg:letter_counting); they are: {domains}")
    for g, domain in enumerate(domains):
        w, per_prompt = cfg.search.for_domain(domain), cfg.warmup_sft.targets_per_prompt
        questions = [row for row in first if row.domain == domain]
        texts = _domain_candidates(cfg, spec, w, domain, g)
        per_round = max(2, w.questions // 8)
        screen = rng.sample(questions, min(len(questions), per_round))
        rest = [row for row in questions if row not in screen]
        ranking = rng.sample(rest, min(len(rest), w.questions)) or screen  # a domain of <= 2 questions: the screen
        n_final = max(per_prompt, len(texts) // 8)
        # Later rounds' questions come from neither the first screen nor the ranking (drawn in that order,
        # so a one-round search draws what it always drew).
        spare = [row for row in rest if row not in ranking]
        finalists, marks, spare = await screen_candidates(grader, texts, screen, spare, rounds=w.screen_rounds, per_round=per_round, keep=n_final, rng=rng)
        screened += marks
        final = await mean_rewards(grader, finalists, ranking)
        # Its own random stream: drawing more questions here must not move later domains' draws.
        ranked, by_text, contenders = await rank_finalists(grader, finalists, final, spare, rounds=w.rank_rounds, per_round=len(ranking),
                                                  seed=cfg.data.seed, rng=random.Random(f"rank-rounds|{cfg.data.seed}|{domain}"))
        best = ranked[:per_prompt]
        top = by_text[ranked[0]]
        if w.keep_within is not None:
            # A small search keeps weak plans beside its one good one; copy only those near the best (and not
            # beaten in a ranking round), repeated to fill the prompt's targets (the warm-up's size stays).
            near = [t for t in best if t in contenders and by_text[t] >= top - w.keep_within]
            best = [near[i % len(near)] for i in range(per_prompt)]
        kept_by_domain[domain] = [(t, by_text[t]) for t in best]
        report.append({"domain": domain, "screened_on": len(screen), "screen_rounds": w.screen_rounds, "ranked_on": len(ranking),
                       "rank_rounds": w.rank_rounds, "candidates": len(texts),
                       "best": top, "kept_mean": sum(by_text[t] for t in best) / len(best),
                       "kept_steps": [len(parse(t).steps) for t in best], "kept_distinct": len(set(best)),
                       "kept": [{"workflow": t, "mean_reward": round(by_text[t], 4)} for t in dict.fromkeys(best)],
                       "finalists": [{"workflow": t, "mean_reward": round(by_text[t], 4), "contender": t in contenders} for t in ranked]})
        log.info("domain search %s: %d candidates, best %.3f after %d ranking round(s) of %d questions", domain, len(texts), top,
                 w.rank_rounds, len(ranking))
    kept = [[(row, text, score) for text, score in kept_by_domain[row.domain]] for row in prompts]
    return kept, {"mean_reward_candidates": sum(screened) / len(screened), "domains": report}


def _code_runners(cfg: TrainConfig, spec: PoolSpec) -> tuple[int, ...]:
    """Ids of the pool's code-running tools, for write-run warm-up shapes; none on randomized pools,
    where an id means a different worker on every row."""
    if cfg.randomize.enabled:
        return ()
    return tuple(i for i, w in enumerate(spec.workers) if w.provider == "python")


def _clip_ids(text: str, n: int) -> str:
    wf = parse(text)
    steps = tuple(Step(s.worker % n, s.subtask, s.access) for s in wf.steps)
    return Workflow(steps, wf.reasoning).render()
