"""Screening and ranking workflows by their mean reward on training questions, shared by both searches on a real
pool: the warm-up's domain search (``warmup_targets.py``) and the fit's (``fit_targets.py``). ``screen_candidates``
is successive halving; ``rank_finalists`` ranks the survivors in rounds with catch-up.
"""

from __future__ import annotations

import random

from ..data import COLUMNS, TrainRow
from ..reward import WorkflowReward
from ..warmup import keep_best


async def grade_pairs(grader: WorkflowReward, pairs: list[tuple[TrainRow, str]]) -> list[float]:
    """The reward of each (row, workflow text), run on the pool."""
    columns = {key: [getattr(row, key) for row, _ in pairs] for key in COLUMNS if key != "prompt"}
    return await grader.workflow_reward([row.prompt for row, _ in pairs], [text for _, text in pairs], **columns)


async def screen_candidates(grader: WorkflowReward, texts: list[str], screen: list[TrainRow], spare: list[TrainRow], *, rounds: int, per_round: int,
                  keep: int, rng: random.Random) -> tuple[list[str], list[float], list[TrainRow]]:
    """Successive halving: every text on ``screen``; each later round the best half (never fewer than
    ``keep``) on ``per_round`` new questions from ``spare``, ranked by the mean over all its questions so
    far. Returns the ``keep`` best texts, the first round's mean rewards (all candidates) and the spare
    questions no round used."""
    first = await mean_rewards(grader, texts, screen)
    # Every survivor has run on the same questions, so ranking by total reward is ranking by the mean.
    totals = {t: m * len(screen) for t, m in zip(texts, first)}
    alive = list(texts)
    for _ in range(rounds - 1):
        new = rng.sample(spare, min(len(spare), per_round))
        if len(alive) <= keep or not new:
            break
        spare = [row for row in spare if row not in new]
        alive = sorted(alive, key=lambda t: -totals[t])[: max(keep, -(-len(alive) // 2))]
        for t, m in zip(alive, await mean_rewards(grader, alive, new)):
            totals[t] += m * len(new)
    return sorted(alive, key=lambda t: -totals[t])[:keep], first, spare


async def rank_finalists(grader: WorkflowReward, finalists: list[str], final: list[float], spare: list[TrainRow], *, rounds: int, per_round: int,
                seed: int, rng: random.Random) -> tuple[list[str], dict[str, float], set[str]]:
    """The finalists best first, after ``rounds - 1`` more ranking rounds. Each round draws ``per_round``
    new questions; the better half of all finalists (at least 2), ranked by the mean over every ranking
    question each has run, must have run every round's questions: whoever is behind catches up, and the
    half is re-ranked until it has. So a finalist that lost its place on the first questions comes back
    when the leaders' means fall on the new ones, as a leader's first-round luck tends to (two plans
    one question apart of 16 can be far apart on held-out questions).
    Returns (texts in rank order: the last round's better half, then the rest; each text's mean reward;
    that half).
    Ties in a seeded random order, as ``keep_best`` breaks them."""
    totals = {t: m * per_round for t, m in zip(finalists, final)}
    counts = dict.fromkeys(finalists, per_round)
    ran = dict.fromkeys(finalists, 0)  # extra rounds each text has run
    batches: list[list[TrainRow]] = []

    def mean(t: str) -> float:
        # Rounded: a text that caught up on two batches at once sums its rewards in another order than one
        # that ran them round by round, and exact ties must stay ties (keep_within = 0, the seeded tie-break).
        return round(totals[t] / counts[t], 9)

    def order() -> list[str]:
        return keep_best([finalists], [[mean(t) for t in finalists]], len(finalists), seed)[0]

    cut = len(finalists)
    for _ in range(rounds - 1):
        new = rng.sample(spare, min(len(spare), per_round))
        if len(finalists) <= 1 or not new:
            break
        spare = [row for row in spare if row not in new]
        batches.append(new)
        cut = max(2, -(-len(finalists) // 2))
        while behind := [t for t in order()[:cut] if ran[t] < len(batches)]:
            for t in behind:
                missed = [row for batch in batches[ran[t]:] for row in batch]
                [caught_up] = await mean_rewards(grader, [t], missed)
                totals[t] += caught_up * len(missed)
                counts[t] += len(missed)
                ran[t] = len(batches)
    ranked = order()
    return ranked, {t: mean(t) for t in finalists}, set(ranked[:cut])


async def mean_rewards(grader: WorkflowReward, texts: list[str], questions: list[TrainRow]) -> list[float]:
    """Each workflow's mean reward over the questions (the workflows' subtasks name no question)."""
    flat = await grade_pairs(grader, [(row, t) for t in texts for row in questions])
    n = len(questions)
    return [sum(flat[i * n : (i + 1) * n]) / n for i in range(len(texts))]
