"""The reward: execute each sampled workflow on the live pool and grade its final answer.

Per completion: parse with ``parse_and_validate`` (unparseable → ``reward.unparseable``), run it with
the runtime executor (``executor.solve`` with a policy that returns exactly that workflow), grade the
final answer (correct → ``reward.correct``, well formed but wrong → ``reward.wrong``), then subtract
the optional cost and step penalties. All completions of a batch run concurrently on one shared
``Pool`` whose per-worker semaphores keep each worker within its own concurrency limit. A worker
failure never raises out of here: it is logged and scored as ``reward.worker_failure`` says.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Sequence

from ..cache import ResponseCache
from ..evaluation import EvalRecord, shape
from ..executor import review_previous, solve
from ..policies.base import Previous
from ..policies.baselines import GivenWorkflow
from ..conductor.prompt import conductor_messages
from ..pool import Pool, PoolSpec
from ..records import Run
from ..workflow import Workflow, WorkflowError, parse_and_validate
from .config import PromptSettings, RewardSettings, TrainConfig
from .data import decode_grading, shown_aliases, shown_names

log = logging.getLogger(__name__)


async def grade_answer(task: str, answer: str, reference: Any, options: Optional[dict] = None) -> tuple[bool, float]:
    """(well_formed, score in [0, 1]). Simulated tasks grade here; real ones use openconductor.graders
    (``agrade``: off this event loop, so a slow grade never stalls the other rollouts), with the
    question's grader ``options`` (e.g. a reasoning-gym generator's name). A grader that raises (a
    malformed reference, a grader bug) scores this answer 0 with the reason logged: one answer never
    fails the whole reward batch."""
    try:
        if task == "simulated":
            from ..sim.world import grade_simulated

            well_formed, correct = grade_simulated(answer, reference)
            return well_formed, float(correct)
        from ..graders import agrade  # lazy: real graders (math-verify, sandbox) are heavy

        result = await agrade(task, answer, reference, **(options or {}))
    except Exception as exc:
        log.warning("grading a %s answer failed, scored 0: %s: %s", task, type(exc).__name__, exc)
        return False, 0.0
    return bool(answer.strip()) and result.extracted is not None, float(result.score)


@dataclass
class Sample:
    """One graded completion: its reward and what the metrics need."""

    reward: float
    parsed: bool
    error: Optional[str] = None  # typed workflow error code, or the run's failure
    correct: bool = False
    accepted: bool = False  # a recursive round that kept the previous answer
    steps: int = 0
    all_accesses: int = 0
    workers: list[str] = field(default_factory=list)
    pattern: tuple = ()
    tokens: int = 0
    cost_usd: float = 0.0
    final_answer: str = ""
    run: Optional[Run] = None


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def blend(first: float, later: float, discount: float) -> float:
    """Round 1's reward when a recursive round followed it: (1 - discount) * r1 + discount * r2."""
    return (1.0 - discount) * first + discount * later


async def score_completion(
    text: str,
    *,
    question: str,
    reference: Any,
    task: str,
    pool: Pool,
    settings: RewardSettings,
    max_steps: int,
    previous: Optional[str] = None,
    seed: Optional[int] = None,
    grader_options: Optional[dict] = None,
    names: Sequence[str] = (),
    aliases: Sequence[tuple[str, int]] = (),
) -> Sample:
    """Parse, execute and grade one completion (``previous``: a recursive round's earlier answer; ``names``:
    the shown workers' names when ids follow the names the reasoning gives, ``workflow.bind_named``; ``aliases``: more
    words that name them, ``conductor.ranking.rank_aliases``)."""
    recursive = previous is not None
    try:
        workflow = parse_and_validate(text, len(pool.spec.workers), max_steps=max_steps, allow_empty=recursive, names=names,
                                       aliases=aliases)
    except WorkflowError as exc:
        return Sample(reward=settings.unparseable, parsed=False, error=exc.code)
    if recursive and workflow.is_accept:
        well_formed, score = await grade_answer(task, previous, reference, grader_options)
        reward = _graded(settings, well_formed, score)
        return Sample(reward=reward, parsed=True, correct=score >= 1.0, accepted=True, final_answer=previous)
    try:
        run = await solve(question, GivenWorkflow(workflow, name="trained-sample", raw=text), pool, seed=seed)
    except Exception as exc:  # never crash training on a worker or executor problem
        log.warning("workflow execution failed: %s", exc)
        return _failed(settings, workflow, f"executor: {exc}")
    sample = Sample(
        reward=0.0,
        parsed=True,
        steps=len(workflow.steps),
        all_accesses=sum(1 for s in workflow.steps if s.access == "all"),
        workers=[pool.workers[s.worker].name for s in workflow.steps],
        pattern=tuple((pool.workers[s.worker].name, s.access if s.access == "all" else tuple(s.access)) for s in workflow.steps),
        tokens=run.totals.usage.total_tokens,
        cost_usd=run.totals.usage.cost_usd,
        final_answer=run.final_answer,
        run=run,
    )
    if run.status not in ("ok", "limit") and settings.worker_failure != "grade":
        log.info("run %s ended %s: %s", run.id, run.status, run.error)
        sample.error, sample.reward = f"run_{run.status}", float(settings.worker_failure)
    else:
        well_formed, score = await grade_answer(task, run.final_answer, reference, grader_options)
        sample.correct = score >= 1.0
        sample.reward = _graded(settings, well_formed, score)
    sample.reward -= _penalty(settings, sample.cost_usd, sample.steps, sample.tokens)
    return sample


def record_reward(record: EvalRecord, settings: RewardSettings) -> float:
    """The reward ``score_completion`` gives, from an evaluator's record of the same run (held-out tables).
    The token penalty counts the workers' tokens only: the plan's own tokens are the model's, not the run's."""
    if not record.planned:
        return settings.unparseable
    if record.status not in ("ok", "limit") and settings.worker_failure != "grade":
        reward = float(settings.worker_failure)
    else:
        reward = _graded(settings, bool(record.final_answer.strip()) and record.extracted is not None, record.score)
    return reward - _penalty(settings, record.cost_usd, record.steps, record.worker_tokens)


def _penalty(settings: RewardSettings, cost_usd: float, steps: int, tokens: int) -> float:
    return settings.cost_weight * cost_usd + settings.step_weight * steps + settings.token_weight * tokens / 1000


def _graded(settings: RewardSettings, well_formed: bool, score: float) -> float:
    if not well_formed:
        return settings.unparseable
    return settings.wrong + (settings.correct - settings.wrong) * score


def _failed(settings: RewardSettings, workflow: Workflow, error: str) -> Sample:
    reward = 0.0 if settings.worker_failure == "grade" else float(settings.worker_failure)
    return Sample(reward=reward, parsed=True, error=error, steps=len(workflow.steps))


def topology(sample: Sample) -> str:
    """A short name for a workflow's shape, from its access lists alone (``evaluation.shape``)."""
    return shape([a for _, a in sample.pattern])


def batch_metrics(samples: list[Sample], groups: list[str], domains: Optional[list[str]] = None) -> dict[str, float]:
    """Per-step numbers a user watches (all averaged over the batch's completions).

    With ``domains`` (the dataset's domain column) the same numbers per domain: accuracy, format errors,
    steps, the first and the final step's worker (who answers, who has the last word) and the topology
    shares.
    """
    n = len(samples) or 1
    parsed = [s for s in samples if s.parsed and not s.accepted]
    metrics = {
        "format_error_rate": sum(not s.parsed for s in samples) / n,
        "accuracy": sum(s.correct for s in samples) / n,
        "worker_failure_rate": sum(1 for s in samples if s.parsed and s.error) / n,
    }
    if parsed:
        steps = sum(s.steps for s in parsed)
        metrics["steps_per_workflow"] = steps / len(parsed)
        metrics["all_access_share"] = sum(s.all_accesses for s in parsed) / max(1, steps)
        metrics["tokens_per_workflow"] = sum(s.tokens for s in parsed) / len(parsed)
        metrics["cost_per_workflow"] = sum(s.cost_usd for s in parsed) / len(parsed)
        counts = Counter(name for s in parsed for name in s.workers)
        for name, count in counts.items():
            metrics[f"worker_share/{name}"] = count / max(1, steps)
    by_group: dict[str, list[Sample]] = defaultdict(list)
    for group, sample in zip(groups, samples):
        by_group[group].append(sample)
    diversity = [len({s.pattern for s in g if s.parsed}) / len(g) for g in by_group.values()]
    metrics["topology_diversity"] = sum(diversity) / len(diversity) if diversity else 0.0
    for name, count in Counter(topology(s) for s in parsed).items():
        metrics[f"topology/{name}"] = count / max(1, len(parsed))
    by_domain: dict[str, list[Sample]] = defaultdict(list)
    for domain, sample in zip(domains or [], samples):
        if domain:
            by_domain[domain].append(sample)
    for domain, group in by_domain.items():
        ok = [s for s in group if s.parsed and not s.accepted]
        metrics[f"{domain}/accuracy"] = sum(s.correct for s in group) / len(group)
        metrics[f"{domain}/format_error_rate"] = sum(not s.parsed for s in group) / len(group)
        if ok:
            metrics[f"{domain}/steps_per_workflow"] = sum(s.steps for s in ok) / len(ok)
            # The first step answers from the question alone (in solve-then-check plans, the author); the
            # final step has the last word.
            for which, at in (("first", 0), ("final", -1)):
                for name, count in Counter(s.workers[at] for s in ok).items():
                    metrics[f"{domain}/{which}_worker/{name}"] = count / len(ok)
    return metrics


def _grading(column: Optional[str], reference: Any) -> tuple[Any, dict]:
    """(reference, grader options) of a row: its ``grading`` column when it has one (rows built from tasks
    or from a JSONL file, by ``Item.grading`` in this process), else its plain ``reference`` (simulated rows)."""
    if not column:
        return reference, {}
    return decode_grading(column)


RecursiveSampler = Callable[[list[list[dict]]], Awaitable[list[str]]]


class WorkflowReward:
    """The reward's state for one training run; TRL calls its ``workflow_reward`` (a plain coroutine
    function, which TRL recognises as async) with every dataset column."""

    def __init__(
        self,
        pool_spec: PoolSpec,
        settings: RewardSettings,
        prompt: PromptSettings,
        *,
        discount: float = 0.25,
        recursive_sampler: Optional[RecursiveSampler] = None,
        cache: Optional[ResponseCache] = None,
        owns_cache: bool = True,
    ):
        self.pool_spec, self.settings, self.prompt = pool_spec, settings, prompt
        self.cache = cache  # the replay store (RewardSettings.replay), shared by every worker call
        self.owns_cache = owns_cache  # False: the caller closes the store (it outlives this reward)
        self._cache_seen = (0, 0)  # (hits, misses) at the last logged batch
        self.discount = discount
        self.recursive_sampler = recursive_sampler  # set by the trainer: samples from the live model
        self._pool: Optional[Pool] = None
        self.last_samples: list[Sample] = []
        self.calls = 0

    def pool(self) -> Pool:
        # Built lazily inside TRL's reward event loop, and kept: one set of workers for the whole run.
        if self._pool is None:
            self._pool = Pool(self.pool_spec.for_execution(), self.cache)
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
        if self.cache is not None and self.owns_cache:
            self.cache.close()

    def _replay_metrics(self) -> dict[str, float]:
        """This batch's worker calls answered from the replay store, and the store's size."""
        if self.cache is None:
            return {}
        hits, misses = self.cache.hits - self._cache_seen[0], self.cache.misses - self._cache_seen[1]
        self._cache_seen = (self.cache.hits, self.cache.misses)
        return {"replay/hit_rate": hits / (hits + misses) if hits + misses else 0.0, "replay/new_calls": float(misses), "replay/entries": float(len(self.cache))}

    async def workflow_reward(self, prompts, completions, **columns) -> list[float]:
        self.calls += 1
        log_metric = columns.get("log_metric")
        n = len(completions)
        col = lambda name, default=None: columns.get(name) or [default] * n  # noqa: E731
        questions, references, tasks = col("question", ""), col("reference", ""), col("task", "simulated")
        workers, rounds, previous, blend_flags = col("workers"), col("round", 1), col("previous", ""), col("blend", False)
        gradings = [_grading(g, r) for g, r in zip(col("grading", ""), references)]
        shown = col("names")
        full = self.pool()
        limit = asyncio.Semaphore(self.settings.max_concurrency)

        async def one(i: int) -> Sample:
            pool = full.view(list(workers[i])) if workers[i] is not None else full
            names = shown_names(shown[i], workers[i], self.pool_spec) if self.prompt.ids_follow_names else ()
            aliases = shown_aliases(self.prompt, workers[i], self.pool_spec)
            async with limit:
                reference, options = gradings[i]
                sample = await score_completion(
                    completion_text(completions[i]),
                    question=questions[i], reference=reference, task=tasks[i], pool=pool,
                    settings=self.settings, max_steps=self.prompt.max_steps,
                    previous=previous[i] if rounds[i] == 2 else None, grader_options=options, names=names, aliases=aliases,
                )
                if rounds[i] == 1 and blend_flags[i] and sample.parsed and self.recursive_sampler is not None:
                    sample.reward = await self._blend_with_recursion(sample, questions[i], reference, tasks[i], pool, options)
            return sample

        samples = await asyncio.gather(*(one(i) for i in range(n)))
        refused = getattr(self.cache, "refused", None)
        if refused is not None:  # a metered store refused calls at a spend cap: these rewards are void, stop here
            raise refused
        self.last_samples = list(samples)
        if log_metric is not None:
            groups = [f"{q}|{r}|{p}" for q, r, p in zip(questions, rounds, previous)]
            for name, value in {**batch_metrics(samples, groups, col("domain", "")), **self._replay_metrics()}.items():
                log_metric(name, value)
        return [s.reward for s in samples]

    async def _blend_with_recursion(self, first: Sample, question: str, reference: Any, task: str, pool: Pool,
                                    options: Optional[dict] = None) -> float:
        """Run one on-policy recursive round after a round-1 workflow and blend the two rewards."""
        messages = conductor_messages(
            question, pool.spec, max_steps=self.prompt.max_steps,
            # The round's steps with their verdicts, as the runtime's review shows them (not the answer alone).
            previous=review_previous(first.run.steps) if first.run is not None else Previous(answer=first.final_answer),
            show=self.prompt.show, fine_grained=self.prompt.fine_grained, examples=self.prompt.examples, style=self.prompt.style,
        )
        [text] = await self.recursive_sampler([messages])
        later = await score_completion(
            text, question=question, reference=reference, task=task, pool=pool, settings=self.settings,
            max_steps=self.prompt.max_steps, previous=first.final_answer, grader_options=options,
        )
        return blend(first.reward, later.reward, self.discount)

    __call__ = workflow_reward


def replay_store(cfg: TrainConfig) -> Optional[ResponseCache]:
    """The run's replay store of real worker calls (``reward.replay``), or None."""
    return ResponseCache(cfg.path(cfg.reward.replay), match="context") if cfg.reward.replay else None
