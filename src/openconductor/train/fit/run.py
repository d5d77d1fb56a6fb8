"""``conductor fit POOL``: from a pool file to a conductor for it, as one resumable command.

    pool ──profile──▶ worker profiles ──search──▶ finalists per group ──targets──▶ a plan per training question
         ──copy (SFT)──▶ conductor ──GRPO (optional)──▶ conductor ──evaluate──▶ report, checkpoint

Each stage writes its result into the output folder and records a digest of what decided it (the pool, the
questions, its settings, the stage before it); a rerun skips every stage whose digest is unchanged, and redoes
the rest. Every worker call goes through one replay store (``OUT/replay.sqlite3``), so nothing is paid twice:
a stage that is redone, or a run stopped by a cap and started again, replays what was already paid for. The
caps (``max_calls``, ``max_cost``) are on the fit's total over all its invocations (``spend_caps.py``).

The stages reuse the training code: the search's successive halving (``search/screening.py``), the
reward (``WorkflowReward``), the trainer's warm-up and GRPO (``trainer.prepare`` / ``trainer.train``) and the
one evaluator. ``context.py`` holds the settings and the pool work the stages share, ``../search/fit_targets.py`` the profile and the search,
``copy.py`` the copy and its fidelity, ``../evaluate.py`` the evaluation, ``ship.py`` what the fit ships,
``../dry_run.py`` the dry run, ``../search/candidates.py`` the candidate plans.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .context import FitContext, FitSettings, _candidates, context, fit_record, gate_row, local_threads, place_checkpoint, pool_stages, record_familiarity, search_reward
from .spend_caps import MeteredStore, Spend
from .distributed import Relay
from ..search.fit_targets import FitStopped, Runner
from .ship import write_lookup
from .state import FitState, Hooks, StageTracker, digest, spent_since

if TYPE_CHECKING:
    from .ship import Verdict

def grpo_stage(ctx: FitContext, state: FitState, key: str, meter: MeteredStore, relay: Optional[Relay] = None) -> tuple[Path, str]:
    """GRPO from the copy on the training questions, every rollout run through the replay store: ``OUT/train/final``.
    An interrupted GRPO of the same digest resumes from its last checkpoint. ``relay``: the other processes of an
    ``accelerate launch``, which join this GRPO (``distributed.py``)."""
    from ...conductor.manifest import has_manifest
    from ..trainer import train
    from .distributed import GrpoJob, share_spend

    run_dir, steps = ctx.out / "train", ctx.settings.grpo_steps
    key = digest(key, steps)
    final = run_dir / "final"
    if state.done("grpo", key) and has_manifest(final):
        return final, key
    partial = state.stages.get("grpo-started", {}).get("digest") == key
    if not partial:  # checkpoints of another copy or another step count are not this run's
        for old in list(run_dir.glob("checkpoint-*")) + [final]:
            shutil.rmtree(old, ignore_errors=True)
    state.stages["grpo-started"] = {"digest": key}
    ctx.hooks.stage("grpo", steps)
    cfg = dataclasses.replace(ctx.cfg, warmup_sft=dataclasses.replace(ctx.cfg.warmup_sft, examples=sum(map(len, ctx.rows.values()))),
                              grpo={**ctx.cfg.grpo, "max_steps": steps})
    started, before, resume = time.monotonic(), meter.spend.as_dict(), partial and any(run_dir.glob("checkpoint-*"))
    if relay is not None:
        relay.send(GrpoJob(cfg, resume, ctx.questions.train, ctx.spec))
    train(cfg, resume=resume, items=ctx.questions.train, cache=meter, pool_spec=ctx.spec, on_step=ctx.hooks.advance)
    if relay is not None:
        share_spend(meter)
    state.finish("grpo", key, time.monotonic() - started, spent_since(meter, before))
    return final, key


# ------------------------------------------------------------------------------------------ evaluation


async def evaluate_stage(ctx: FitContext, state: FitState, key: str, meter: MeteredStore, conductors: dict[str, Path],
                         settings: Optional[dict[str, dict[str, Any]]] = None, lookup: Optional[Path] = None) -> str:
    """Held-out (and unseen-kind) questions: baselines and conductors through the one evaluator; the report."""
    from ...evaluation import start_fresh
    from ..evaluate import HELD_OUT, UNSEEN, baseline_policies, eval_task, evaluate_fit, report
    from ..search.fit_targets import lookup_table

    out = ctx.out / "eval"
    key = digest(key, ctx.questions.eval_digest())
    if state.done("evaluate", key) and (out / "report.md").exists():
        return (out / "report.md").read_text().rstrip()
    if state.stages.get("evaluate-started", {}).get("digest") != key:
        start_fresh(out)  # results of another conductor or other questions are moved aside, never mixed in
    state.stages["evaluate-started"] = {"digest": key}
    tasks = [eval_task(HELD_OUT, ctx.questions.held_out)] if ctx.questions.held_out else []
    tasks += [eval_task(UNSEEN, ctx.questions.unseen)] if ctx.questions.unseen else []
    if not tasks:
        return "no held-out questions (--eval-n 0): nothing evaluated"
    search, targets = (json.loads((ctx.out / f"{n}.json").read_text()) for n in ("search", "targets"))
    table, best_fixed = lookup_table(search, targets)
    baselines = baseline_policies(ctx.spec, _candidates(ctx), table, best_fixed)
    if lookup is not None:  # the lookup as the fit would ship it: what the conductor must beat
        from .ship import SHIPPED_LABEL, shipped_lookup

        baselines.append((SHIPPED_LABEL, shipped_lookup(lookup)))
    n_questions = sum(len(t.questions) for t in tasks)
    ctx.hooks.stage("evaluate", n_questions * (len(baselines) + len(conductors)))
    started, before = time.monotonic(), meter.spend.as_dict()
    records = await evaluate_fit(ctx.spec, tasks, baselines, conductors, out, cache=meter, on_record=lambda r: ctx.hooks.advance(1), settings=settings,
                                 threads=local_threads(ctx.settings))
    text = report(records, list(conductors), [label for label, _ in baselines]).rstrip()
    (out / "report.md").write_text(text + "\n")
    state.finish("evaluate", key, time.monotonic() - started, spent_since(meter, before))
    return text


# ------------------------------------------------------------------------------------------ the whole fit


@dataclasses.dataclass
class FitResult:
    checkpoint: Optional[Path]
    report: str
    spend: Spend
    stopped: Optional[str] = None  # why a cap stopped it, if one did
    refused: Optional[str] = None  # why the copy is not done (under the fidelity bar), naming what to raise
    lookup: Optional[Path] = None  # the per-task lookup as a policy file (always written once the targets are)
    verdict: Optional["Verdict"] = None  # what the fit ships, with the conductor's margins


def run_fit(settings: FitSettings, hooks: Optional[Hooks] = None) -> FitResult:
    """Every stage not yet done; stops cleanly at a cap (``FitResult.stopped``), keeping what was paid for, and at a
    copy under the fidelity bar (``FitResult.refused``). A Ctrl-C is recorded against the stage it stopped."""
    from .spend_caps import SpendCapReached
    from ..reward import WorkflowReward

    relay = Relay(settings)  # before anything is spent: it refuses a cap it cannot keep
    ctx = context(settings, hooks)
    settings.out.mkdir(parents=True, exist_ok=True)
    state = FitState(settings.out)
    ctx.hooks = tracker = StageTracker(ctx.hooks, state)
    meter = MeteredStore(settings.out / "replay.sqlite3", workers={w.name for w in ctx.spec.workers}, max_calls=settings.max_calls,
                         max_cost=settings.max_cost, spent_before=state.spend)
    state.on_finish = lambda: state.save(settings, meter.total)
    grader = WorkflowReward(ctx.spec, search_reward(ctx.cfg), ctx.cfg.prompt, cache=meter, owns_cache=False)
    runner = Runner(grader, advance=ctx.hooks.advance, stopped=lambda: meter.refused)
    result = FitResult(None, "", meter.total)
    try:
        got = asyncio.run(_pool_work(ctx, runner, state, meter, grader))
        result.lookup = write_lookup(ctx)
        result = _model_stages(ctx, state, meter, got["digest"], result, relay)
        state.interrupted = {} if result.refused is None else state.interrupted
    except (FitStopped, SpendCapReached) as exc:
        result.stopped = str(meter.refused or exc)
    except KeyboardInterrupt:
        tracker.interrupted()
        raise
    finally:
        relay.send(None)  # no GRPO (done before, or the fit stopped): the other processes end
        state.save(settings, meter.total)
        meter.close()
    result.spend = meter.total
    return result


def _model_stages(ctx: FitContext, state: FitState, meter: MeteredStore, key: str, result: FitResult, relay: Optional[Relay] = None) -> FitResult:
    """The copy and its fidelity; then, for a copy that is done, GRPO, the evaluation and what the fit ships."""
    from .copy import checked_copy
    from .report import full_report
    from .ship import write_verdict

    settings = ctx.settings
    copied = checked_copy(ctx, state, key)
    if not copied.done:
        result.refused = copied.advice
        result.report = full_report(ctx.out, "", ctx.cfg.reward, copied.fidelity, settings.fidelity_bar, None)
        return result
    warm, key = copied.warm, copied.key
    source = warm
    if settings.grpo_steps:
        source, key = grpo_stage(ctx, state, key, meter, relay)
    if relay is not None:
        relay.send(None)  # the other processes end before the evaluation, which runs here only
    record_familiarity(ctx, *{warm, source})
    record = {**fit_record(ctx, source), "fidelity": round(copied.fidelity.share, 4), "copy_epochs": state.stages["copy"].get("epochs")}
    result.checkpoint = checkpoint = place_checkpoint(source, settings.out / "conductor", record)
    conductors = {"conductor": checkpoint} | ({"conductor, copy only": warm} if settings.grpo_steps else {})
    gate = gate_row(ctx.spec, checkpoint)
    evaluation = asyncio.run(evaluate_stage(ctx, state, key, meter, conductors | {label: checkpoint for label in gate}, gate, result.lookup))
    result.verdict = ship_verdict(ctx, checkpoint, result.lookup, copied.fidelity.share)
    write_verdict(ctx.out, result.verdict)
    result.report = full_report(ctx.out, evaluation, ctx.cfg.reward, copied.fidelity, settings.fidelity_bar, result.verdict)
    (ctx.out / "report.md").write_text(result.report)
    write_model_card(ctx, checkpoint, result)
    return result


def ship_verdict(ctx: FitContext, checkpoint: Path, lookup: Optional[Path], fidelity: Optional[float]) -> "Verdict":
    """Conductor or lookup, from the evaluation's held-out records (``ship.decide``)."""
    from ..evaluate import HELD_OUT, _all, _latest
    from .ship import decide

    path = ctx.out / "eval"
    records = [r for r in _latest(_all(path)) if r.task == HELD_OUT] if (path / "results.jsonl").exists() else []
    return decide(records, "conductor", lookup or ctx.out, checkpoint, fidelity)


def write_model_card(ctx: FitContext, checkpoint: Path, result: FitResult) -> None:
    from ...conductor.manifest import read_manifest
    from .report import model_card

    record = (read_manifest(checkpoint).model_extra or {}).get("fit") or {}
    settings = {**json.loads(ctx.settings.model_dump_json()), "workers": [w.name for w in ctx.spec.workers]}
    (checkpoint / "README.md").write_text(model_card(ctx.settings.pool, settings, record, result.report, result.verdict))


async def _pool_work(ctx: FitContext, runner: Runner, state: FitState, meter: MeteredStore, grader) -> dict[str, Any]:
    try:
        return await pool_stages(ctx, runner, state, meter)
    finally:
        await grader.aclose()


# ------------------------------------------------------------------------------------------ the dry run


def plan_fit(settings: FitSettings) -> dict[str, Any]:
    """What the fit would spend per stage on an empty replay store, without calling a worker (``train/dry_run.py``)."""
    from ..dry_run import plan_fit as plan

    return plan(settings)
