"""What a run would spend, without running it: ``conductor train CONFIG --dry-run`` (``plan_search``) and
``conductor fit POOL --dry-run`` (``plan_fit``). Both run the search's own code with a recorder in place of the
reward (``WorkflowReward``): it runs nothing, scores every workflow alike (so screens and rankings keep the
search's seeded tie order) and counts what a real run on an empty replay store would ask of the workers. So a
count is the search's, not a copy of its arithmetic, and stays right when the search changes.

**The warm-up's target search** (``plan_search``: ``search/warmup_targets.py``'s ``domain_search`` /
``per_question``): exact except for rank rounds (``search.rank_rounds`` > 1), whose catch-up runs depend on the
outcomes. Worker calls: every step of every run is one call, except that a step which sees no earlier step (access
``[]``) asked of the same worker, with the same subtask, on the same question as an earlier run, is answered by the
replay store (``reward.replay``): those repeats are known before anything runs. Repeats of later steps depend on
what earlier steps answered, so ``calls`` is an upper bound on what a run with an empty store spends.

**The fit** (``plan_fit``: the fit's own stage code, ``FitRecorder``): each stage's calls, tokens and cost, and
its wall time from the seconds per call measured on the user's own endpoints (``fit/timing.py``). A step's call is
identified the way the replay store keys it: by the question, the worker, the subtask and what the step sees,
recursively (the visible steps' own keys stand for their outputs, which the store replays whenever their keys
repeat). So a step that repeats an earlier one, within a stage or across stages (the profile's runs are the
search's first screen; the finalists' runs include the search's), is counted once, as the store will answer it
once. The count is exact up to two unknowns: which candidates become finalists (the recorder's tie order stands in
for the real ranking; the count of runs is the same) and the conductor's own plans in the evaluation and in GRPO
(counted as its group's best plan, never replayed: an upper bound).

Tokens per call (the fit): the input is the worker message's length (rendered, with each visible output at its
estimated length) in tokens, about 3.5 characters a token (a simulated worker counts words); the output is the
worker's measured output per call once the profile has run, else ``output_share`` of its ``max_tokens``. Cost: the
pool's prices on those tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .. import worker_message
from ..pool import TOOL_PROVIDERS, PoolSpec, WorkerSpec, load_pool
from ..workflow import parse
from .config import TrainConfig
from .data import build_rows, load_items
from .fit.state import Hooks
from .reward import Sample

if TYPE_CHECKING:
    from .fit.context import FitSettings

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


class _SearchRecorder:
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
    recorder = _SearchRecorder(spec)
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


CHARS_PER_TOKEN = 3.5
TEMPLATE_TOKENS = 12  # a chat template's own tokens around one user message
TOOL_OUTPUT_TOKENS = 16  # a program's printed answer, as the next step reads it
OUTPUT_SHARE = 0.25


@dataclass
class Estimate:
    """Calls, tokens and cost a stage (or the whole fit) would spend on an empty replay store."""

    runs: int = 0
    calls: int = 0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cost_usd: float = 0.0
    per_worker: dict[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> float:
        return self.input_tokens + self.output_tokens

    def add(self, other: "Estimate") -> "Estimate":
        workers = dict(self.per_worker)
        for k, v in other.per_worker.items():
            workers[k] = workers.get(k, 0) + v
        return Estimate(self.runs + other.runs, self.calls + other.calls, self.input_tokens + other.input_tokens,
                        self.output_tokens + other.output_tokens, self.cost_usd + other.cost_usd, workers)

    def as_dict(self) -> dict:
        return {"runs": self.runs, "calls": self.calls, "input_tokens": round(self.input_tokens), "output_tokens": round(self.output_tokens),
                "tokens": round(self.tokens), "cost_usd": round(self.cost_usd, 6), "per_worker": dict(self.per_worker)}


def text_tokens(worker: WorkerSpec, text: str) -> float:
    """The tokens ``worker`` is billed for ``text`` (simulated workers count words)."""
    if worker.provider == "simulated":
        return float(len(text.split()))
    return len(text) / CHARS_PER_TOKEN + TEMPLATE_TOKENS


class FitRecorder:
    """Stands in for the reward (``WorkflowReward``): counts the calls of the runs it is asked to grade,
    across every stage it is used for, as the replay store would make them; runs nothing."""

    def __init__(self, spec: PoolSpec, *, output_tokens: Optional[dict[str, float]] = None, output_share: float = OUTPUT_SHARE):
        self.spec = spec
        self.output = {w.name: (output_tokens or {}).get(w.name, w.max_tokens * output_share) for w in spec.workers}
        self.seen: set[str] = set()
        self.estimate = Estimate()
        self.last_samples: list[Sample] = []

    def stage(self) -> Estimate:
        """What was counted since the last call (one stage's share), and start a new count."""
        done, self.estimate = self.estimate, Estimate()
        return done

    def _out(self, worker: WorkerSpec) -> float:
        return TOOL_OUTPUT_TOKENS if worker.provider in TOOL_PROVIDERS else self.output[worker.name]

    def run(self, question: str, text: str, seed: Optional[int | str] = None) -> int:
        """Count one workflow run on ``question``; returns its estimated tokens."""
        steps = parse(text).steps
        keys: list[str] = []
        tokens = 0.0
        self.estimate.runs += 1
        for i, step in enumerate(steps):
            worker = self.spec.workers[step.worker]
            visible = step.visible(i)
            key = hashlib.sha256(repr((question, seed, worker.name, step.subtask, [keys[j] for j in visible])).encode()).hexdigest()
            keys.append(key)
            if worker.provider in TOOL_PROVIDERS:
                continue  # a tool's run has no tokens
            earlier = [(steps[j].worker, steps[j].subtask, "") for j in visible]
            inp = text_tokens(worker, worker_message.render(question, earlier, step.subtask))
            inp += sum(self._out(self.spec.workers[steps[j].worker]) for j in visible)
            out = self._out(worker)
            tokens += inp + out
            if key in self.seen:
                continue
            self.seen.add(key)
            e = self.estimate
            e.calls += 1
            e.input_tokens += inp
            e.output_tokens += out
            e.cost_usd += (inp * worker.price_input_per_m + out * worker.price_output_per_m) / 1e6
            e.per_worker[worker.name] = e.per_worker.get(worker.name, 0) + 1
        for i, step in enumerate(steps):  # tool steps spend no tokens but are real calls (the sandbox runs)
            worker = self.spec.workers[step.worker]
            if worker.provider in TOOL_PROVIDERS and keys[i] not in self.seen:
                self.seen.add(keys[i])
                self.estimate.calls += 1
                self.estimate.per_worker[worker.name] = self.estimate.per_worker.get(worker.name, 0) + 1
        return round(tokens)

    async def workflow_reward(self, prompts, completions, **columns) -> list[float]:
        questions = columns.get("question") or [""] * len(completions)
        self.last_samples = []
        for question, text in zip(questions, completions):
            tokens = self.run(question, text)
            self.last_samples.append(Sample(reward=0.5, parsed=True, steps=len(parse(text).steps), tokens=tokens))
        return [0.5] * len(completions)

    async def aclose(self) -> None:
        return None


class _StageSplit(Hooks):
    """Cuts the recorder's count at each stage start, so the dry run reports each stage's share."""

    def __init__(self, recorder):
        self.recorder, self.current, self.by_stage = recorder, "", {}

    def stage(self, name: str, total: Optional[int]) -> None:
        self.close()
        self.current = name

    def close(self) -> None:
        if self.current:
            self.by_stage[self.current] = self.recorder.stage()


def plan_fit(settings: FitSettings) -> dict[str, Any]:
    """What the fit would spend per stage on an empty replay store, without calling a worker.
    Uses the measured output tokens per call of ``OUT/profile.json`` when a profile has run."""
    from .fit.context import context, left_out_notes, per_question_targets, pool_stages
    from .search.fit_targets import Runner, lookup_table

    measured = _measured_output(settings.out)
    ctx = context(settings)
    recorder = FitRecorder(ctx.spec, output_tokens=measured, output_share=settings.output_share)
    split = _StageSplit(recorder)
    ctx.hooks = split
    got = asyncio.run(pool_stages(ctx, Runner(recorder), None, None))
    split.close()
    rows = [row for group in ctx.rows.values() for row in group]
    plans = per_question_targets(ctx, got)[1]
    text = {c.name: c.text for c in got["candidates"]}
    if settings.grpo_steps:
        g = ctx.cfg.settings
        rollouts = settings.grpo_steps * g["per_device_train_batch_size"] * g["gradient_accumulation_steps"]
        for i in range(rollouts):  # every rollout a new run (an upper bound: GRPO samples at temperature 1)
            recorder.run(rows[i % len(rows)].question, plans[i % len(plans)], seed=f"grpo-{i}")
        split.by_stage["grpo"] = recorder.stage()
    table, best_fixed = lookup_table(got["search"], got["targets"])
    singles = [c.text for c in got["candidates"] if c.name.startswith("single:")]
    conductors = 2 if settings.grpo_steps else 1
    for item in ctx.questions.held_out + ctx.questions.unseen:
        mine = text[table.get(item.domain, best_fixed)]
        for plan in singles + [text[best_fixed], mine]:
            recorder.run(item.question, plan, seed="eval")
        for k in range(conductors):  # the conductor's plan: counted as its group's, never replayed (an upper bound)
            recorder.run(item.question, mine, seed=f"conductor-{k}")
    split.by_stage["evaluate"] = recorder.stage()
    total = _sum(split.by_stage.values())
    return {"stages": {k: v.as_dict() for k, v in split.by_stage.items()}, "total": total.as_dict(),
            "output_tokens_per_call": "measured by the profile" if measured else f"{settings.output_share:g} x max_tokens",
            "left_out": left_out_notes(ctx), "time": wall_time(settings, ctx, split.by_stage, len(rows))}


def wall_time(settings: "FitSettings", ctx, by_stage: dict, targets: int) -> dict[str, Any]:
    """Seconds per stage (None where a worker's seconds per call are unmeasured), the copy's, and their sources."""
    from .fit.timing import copy_seconds, seconds_per_call, stage_seconds

    per_call, source = seconds_per_call(settings.out, ctx.spec)
    seconds: dict[str, Optional[float]] = {name: stage_seconds(e.per_worker, per_call, ctx.spec) for name, e in by_stage.items()}
    warmup = ctx.cfg.warmup_sft
    seconds["copy"], seconds["fidelity"], copy_source = copy_seconds(settings.out, targets, warmup.epochs, warmup.batch_size)
    known = [v for v in seconds.values() if v is not None]
    return {"seconds": {k: None if v is None else round(v, 1) for k, v in seconds.items()},
            "total_seconds": round(sum(known), 1) if len(known) == len(seconds) else None,
            "calls_timed": source, "copy_timed": copy_source, "seconds_per_call": per_call}


def _sum(parts) -> Estimate:
    total = Estimate()
    for part in parts:
        total = total.add(part)
    return total


def _measured_output(out: Path) -> Optional[dict[str, float]]:
    path = out / "profile.json"
    if not path.exists():
        return None
    workers = json.loads(path.read_text()).get("workers", {})
    return {name: w["output_tokens_per_run"] for name, w in workers.items() if "output_tokens_per_run" in w}
