"""The fit's search on its pool: profile the workers, screen the candidates per group, run the finalists on every
training question, and choose each question's target.

Everything runs as workflow runs graded by the training reward (``WorkflowReward`` on the fit's replay store;
a dry run passes a recorder that runs nothing, ``train/dry_run.py``), through a ``Runner`` that runs them in small
batches, advances the progress bar and stops at a batch boundary once a spend cap is reached.

* **profile**: every model alone on the first ``profile_n`` training questions of each group (these are
  also the screen's first questions, so the search replays them);
* **search** per group: the shared candidate set (``candidates.py``), successive halving from the screen
  (``screening.screen_candidates``) down to ``finalists``;
* **targets** per group: the finalists on every training question of the group. Their mean reward (a small
  cost per step included) ranks them: the best is the group's entry in the per-task lookup table. Each
  question's target is the best finalist if it answered that question right, else the best-ranked finalist
  that did, else the best: the conductor is taught when another plan than its group's usual one is needed.
  The best fixed workflow is the candidate with the highest mean screen reward over all groups (every
  candidate ran the same first screen questions).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

from .candidates import Candidate
from ..data import COLUMNS, TrainRow
from .screening import screen_candidates


class FitStopped(RuntimeError):
    """A spend cap was reached: the fit stops here, keeping what it paid for in the replay store."""


@dataclass
class Outcome:
    reward: float
    correct: bool
    tokens: int  # the run's tokens (every worker call's input and output)
    steps: int
    output_tokens: int = 0  # the run's output tokens (0 where nothing ran: a dry run)


class Runner:
    """Runs (row, workflow text) pairs on a grader in batches of ``batch``: advances ``advance`` after each
    and raises FitStopped once ``stopped()`` says a cap was reached (that batch's outcomes are void)."""

    def __init__(self, grader: Any, *, batch: int = 8, advance: Callable[[int], None] = lambda n: None,
                 stopped: Callable[[], Optional[BaseException]] = lambda: None):
        self.grader, self.batch, self.advance, self.stopped = grader, batch, advance, stopped

    async def outcomes(self, pairs: list[tuple[TrainRow, str]]) -> list[Outcome]:
        out: list[Outcome] = []
        for start in range(0, len(pairs), self.batch):
            chunk = pairs[start : start + self.batch]
            columns = {key: [getattr(row, key) for row, _ in chunk] for key in COLUMNS if key != "prompt"}
            try:
                rewards = await self.grader.workflow_reward([row.prompt for row, _ in chunk], [t for _, t in chunk], **columns)
            except Exception as exc:
                cap = self.stopped()
                if cap is not None:
                    raise FitStopped(str(cap)) from exc
                raise
            cap = self.stopped()
            if cap is not None:
                raise FitStopped(str(cap))
            samples = self.grader.last_samples
            out += [Outcome(r, s.correct, s.tokens, s.steps, s.run.totals.usage.output_tokens if s.run else 0) for r, s in zip(rewards, samples)]
            self.advance(len(chunk))
        return out

    async def workflow_reward(self, prompts, completions, **columns) -> list[float]:
        """The grader's interface (what ``screening.screen_candidates`` calls), batched and metered."""
        rows = [TrainRow(prompt=p, **{k: columns[k][i] for k in COLUMNS if k != "prompt" and k in columns}) for i, p in enumerate(prompts)]
        return [o.reward for o in await self.outcomes(list(zip(rows, completions)))]


# ------------------------------------------------------------------------------------------ profile


def single_candidates(candidates: list[Candidate]) -> list[Candidate]:
    return [c for c in candidates if c.name.startswith("single:")]


async def profile(runner: Runner, singles: list[Candidate], rows: dict[str, list[TrainRow]], n: int) -> dict:
    """Each model alone on the first ``n`` training questions of every group: accuracy overall and per group,
    tokens per run. Returns the profile (``profile.json``)."""
    pairs = [(row, c.text) for group in rows.values() for row in group[:n] for c in singles]
    got = await runner.outcomes(pairs)
    workers: dict[str, dict] = {}
    for (row, text), outcome in zip(pairs, got):
        name = next(c.name for c in singles if c.text == text)[len("single:"):]
        w = workers.setdefault(name, {"runs": 0, "correct": 0, "tokens": 0, "output_tokens": 0, "per_group": {}})
        w["runs"] += 1
        w["correct"] += int(outcome.correct)
        w["tokens"] += outcome.tokens
        w["output_tokens"] += outcome.output_tokens
        g = w["per_group"].setdefault(row.domain, [0, 0])
        g[0], g[1] = g[0] + int(outcome.correct), g[1] + 1
    for w in workers.values():
        w["accuracy"] = w["correct"] / max(1, w["runs"])
        w["tokens_per_run"] = w["tokens"] / max(1, w["runs"])
        w["output_tokens_per_run"] = w["output_tokens"] / max(1, w["runs"])  # one call a run: the worker's output per call
        w["per_group"] = {g: c / t for g, (c, t) in w["per_group"].items()}
    return {"questions_per_group": n, "workers": workers}


def profile_accuracy(profile_data: Optional[dict]) -> Optional[dict[str, float]]:
    if not profile_data:
        return None
    return {name: w["accuracy"] for name, w in profile_data["workers"].items()}


# ------------------------------------------------------------------------------------------ search


async def search_groups(runner: Runner, candidates: list[Candidate], rows: dict[str, list[TrainRow]], *, screen_n: int, rounds: int,
                        finalists: int, seed: int) -> dict:
    """Per group, successive halving of the candidates from the first ``screen_n`` questions (``rounds``
    rounds, ``screen_n`` new questions a round) to ``finalists``. Returns ``search.json``'s content."""
    texts = [c.text for c in candidates]
    name = {c.text: c.name for c in candidates}
    groups: dict[str, dict] = {}
    for group, group_rows in rows.items():
        rng = random.Random(f"fit-search|{seed}|{group}")
        screen, spare = group_rows[:screen_n], group_rows[screen_n:]
        kept, first, _ = await screen_candidates(runner, texts, screen, spare, rounds=rounds, per_round=screen_n,
                                                 keep=min(finalists, len(texts)), rng=rng)
        groups[group] = {"screen": {name[t]: round(m, 6) for t, m in zip(texts, first)}, "finalists": [name[t] for t in kept]}
    steps = {c.name: len(c.workflow.steps) for c in candidates}
    overall = {c.name: sum(g["screen"][c.name] for g in groups.values()) / max(1, len(groups)) for c in candidates}
    best_fixed = max(candidates, key=lambda c: (round(overall[c.name], 9), -steps[c.name])).name
    return {"candidates": [asdict(c) for c in candidates], "groups": groups, "best_fixed": best_fixed,
            "screen_mean": {k: round(v, 6) for k, v in overall.items()}}


# ------------------------------------------------------------------------------------------ targets


@dataclass
class GroupTargets:
    ranking: list[dict]  # finalists best first: name, mean_reward, accuracy, tokens
    best: str
    per_question: list[dict] = field(default_factory=list)  # question, target, right (names of finalists right)


async def run_finalists(runner: Runner, finalists: list[Candidate], rows: list[TrainRow]) -> dict[str, list[Outcome]]:
    """Every finalist on every row (runs already made by the search are replayed from the store)."""
    pairs = [(row, c.text) for c in finalists for row in rows]
    got = await runner.outcomes(pairs)
    n = len(rows)
    return {c.name: got[i * n : (i + 1) * n] for i, c in enumerate(finalists)}


def choose_targets(rows: list[TrainRow], outcomes: dict[str, list[Outcome]]) -> GroupTargets:
    """The ranking of a group's finalists and each question's target (see the module docstring)."""
    def summary(name: str) -> dict:
        got = outcomes[name]
        n = max(1, len(got))
        return {"name": name, "mean_reward": round(sum(o.reward for o in got) / n, 6), "accuracy": round(sum(o.correct for o in got) / n, 6),
                "tokens": round(sum(o.tokens for o in got) / n, 1)}

    ranking = sorted((summary(name) for name in outcomes), key=lambda s: (-s["mean_reward"], s["tokens"]))
    order = [s["name"] for s in ranking]
    best = order[0]
    per_question = []
    for i, row in enumerate(rows):
        right = [name for name in order if outcomes[name][i].correct]
        per_question.append({"question": row.question, "target": right[0] if right else best, "right": right})
    return GroupTargets(ranking, best, per_question)


async def targets_for_groups(runner: Runner, candidates: list[Candidate], search: dict, rows: dict[str, list[TrainRow]]) -> dict:
    """``targets.json``'s content: per group the finalists' ranking and best, and every question's target."""
    by_name = {c.name: c for c in candidates}
    groups = {}
    for group, group_rows in rows.items():
        finalists = [by_name[n] for n in search["groups"][group]["finalists"]]
        chosen = choose_targets(group_rows, await run_finalists(runner, finalists, group_rows))
        groups[group] = asdict(chosen)
    return {"groups": groups}


def lookup_table(search: dict, targets: dict) -> tuple[dict[str, str], str]:
    """(group -> its best finalist's name, the best fixed workflow's name: the table's default)."""
    return {g: t["best"] for g, t in targets["groups"].items()}, search["best_fixed"]



def group_rows(rows: list[TrainRow]) -> dict[str, list[TrainRow]]:
    out: dict[str, list[TrainRow]] = {}
    for row in rows:
        out.setdefault(row.domain, []).append(row)
    return out


