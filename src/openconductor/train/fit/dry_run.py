"""The fit's dry run (``conductor fit POOL --dry-run``): the fit's own stage code with a recorder in place of the pool
(``cost.py``), so each stage's calls, tokens and cost are counted as a real run on an empty replay store makes them,
and each stage's wall time estimated from the seconds per call measured on the user's own endpoints (``timing.py``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .context import FitSettings, Hooks, context, left_out_notes, per_question_targets, pool_stages
from ..search.fit_targets import Runner

if TYPE_CHECKING:
    from .cost import Estimate


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
    """What the fit would spend per stage on an empty replay store (``cost.py``), without calling a worker.
    Uses the measured output tokens per call of ``OUT/profile.json`` when a profile has run."""
    from .cost import Recorder
    from ..search.fit_targets import lookup_table

    measured = _measured_output(settings.out)
    ctx = context(settings)
    recorder = Recorder(ctx.spec, output_tokens=measured, output_share=settings.output_share)
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


def wall_time(settings: FitSettings, ctx, by_stage: dict, targets: int) -> dict[str, Any]:
    """Seconds per stage (None where a worker's seconds per call are unmeasured), the copy's, and their sources."""
    from .timing import copy_seconds, seconds_per_call, stage_seconds

    per_call, source = seconds_per_call(settings.out, ctx.spec)
    seconds: dict[str, Optional[float]] = {name: stage_seconds(e.per_worker, per_call, ctx.spec) for name, e in by_stage.items()}
    copy, copy_source = copy_seconds(settings.out, targets, ctx.cfg.warmup_sft.epochs)
    seconds["copy"] = copy
    known = [v for v in seconds.values() if v is not None]
    return {"seconds": {k: None if v is None else round(v, 1) for k, v in seconds.items()},
            "total_seconds": round(sum(known), 1) if len(known) == len(seconds) else None,
            "calls_timed": source, "copy_timed": copy_source, "seconds_per_call": per_call}


def _sum(parts) -> "Estimate":
    from .cost import Estimate

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
