"""The fit's copy, and whether it copied: copy fidelity, more epochs while it falls short, and what to raise.

A copy that contradicts its targets is worse than no copy: it is the per-task lookup, learned wrong. A fit on a
two-endpoint pool with six targets, all "the coder", gave a checkpoint that chose the tiny model on every
question and was reported done. So after the copy, the conductor writes a plan for every training question (greedy,
under the runtime's grammar and wordings, as ``conductor ask`` plans) and the fit counts the questions whose plan is
the target's: the same worker, subtask and visible steps at every step (the reasoning line is free text and not
compared). That share is the copy's **fidelity**.

Below the bar (``--fidelity-bar``, 0.95) the fit copies on from the copy it has, the recipe's epochs a round, up
to ``--max-copy-epochs``; still below it, the copy is not done: the fit stops before GRPO and the evaluation and
names what to raise (targets per kind, epochs, learning rate), every stage kept for the rerun. Each round is
saved as it ends (``fit.json``'s copy record counts its epochs), so a rerun goes on from the last one.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pydantic import BaseModel

from ...workflow import WorkflowError, parse

if TYPE_CHECKING:
    from .context import FitContext, FitState

FIDELITY_FILE = "fidelity.json"
# Fewer targets of a kind than this and a copy has too few examples to tell its kinds apart: the fit warns.
MIN_TARGETS_PER_KIND = 4
# Fewer optimiser steps than this in the whole copy and a 135M model barely moves from its start (the issue's
# copy of 6 targets, batch 8, 4 epochs: 4 steps, loss 3.07 -> 2.11, every plan wrong).
MIN_COPY_STEPS = 20
MISSES_KEPT = 5


class Miss(BaseModel):
    group: str
    question: str
    target: str
    written: str


class Fidelity(BaseModel):
    """How many training questions the conductor plans as its target, overall and per group."""

    matched: int
    n: int
    per_group: dict[str, tuple[int, int]]  # group -> (matched, questions)
    misses: list[Miss] = []  # the first few plans that differ from their target, to read
    epochs: int = 0  # the copy's epochs when measured

    @property
    def share(self) -> float:
        return self.matched / self.n if self.n else 0.0


def plan_key(text: str) -> Optional[tuple]:
    """What a plan does, for comparing two: per step its worker, subtask and the steps it sees (None: no plan)."""
    try:
        steps = parse(text).steps
    except WorkflowError:
        return None
    return tuple((s.worker, s.subtask.strip(), s.visible(i)) for i, s in enumerate(steps))


def same_plan(written: str, target: str) -> bool:
    key = plan_key(written)
    return key is not None and key == plan_key(target)


def fidelity_of(groups: list[str], questions: list[str], targets: list[str], written: list[str], epochs: int = 0) -> Fidelity:
    """The fidelity of ``written`` plans to their ``targets`` (all four lists in the same order)."""
    per_group: dict[str, list[int]] = {}
    misses: list[Miss] = []
    for group, question, target, plan in zip(groups, questions, targets, written):
        hit = same_plan(plan, target)
        counts = per_group.setdefault(group, [0, 0])
        counts[0], counts[1] = counts[0] + hit, counts[1] + 1
        if not hit and len(misses) < MISSES_KEPT:
            misses.append(Miss(group=group, question=question[:200], target=target, written=plan))
    return Fidelity(matched=sum(m for m, _ in per_group.values()), n=len(targets), misses=misses, epochs=epochs,
                    per_group={g: (m, n) for g, (m, n) in per_group.items()})


# ------------------------------------------------------------------------------------------ is it learnable


@dataclasses.dataclass
class CopyPlan:
    """The copy's size: targets per group and the optimiser steps the recipe gives them."""

    per_group: dict[str, int]
    epochs: int
    batch_size: int
    learning_rate: float

    @property
    def steps(self) -> int:
        return -(-sum(self.per_group.values()) // max(1, self.batch_size)) * self.epochs

    def warnings(self) -> list[str]:
        """What makes this copy too small to learn from, each naming the setting to raise."""
        out = []
        few = {g: n for g, n in self.per_group.items() if n < MIN_TARGETS_PER_KIND}
        if few:
            shown = ", ".join(f"{g} {n}" for g, n in list(few.items())[:5]) + (", ..." if len(few) > 5 else "")
            out.append(f"too few targets to learn from: {len(few)} kind(s) have under {MIN_TARGETS_PER_KIND} ({shown}); "
                       f"raise --per-task (8 is the default) or give more questions of those kinds")
        if self.steps < MIN_COPY_STEPS:
            out.append(f"a copy of {self.steps} optimiser steps ({sum(self.per_group.values())} targets, batch {self.batch_size}, "
                       f"{self.epochs} epoch(s)) is too small to learn from: it needs {MIN_COPY_STEPS} or more; raise --copy-epochs "
                       f"to {self.epochs_for(MIN_COPY_STEPS)} or --per-task")
        return out

    def epochs_for(self, steps: int) -> int:
        per_epoch = max(1, self.steps // max(1, self.epochs))
        return -(-steps // per_epoch)


def advice(fid: Fidelity, plan: CopyPlan, bar: float, cap: int) -> str:
    """Why the copy is not done, and what to raise, in the order most likely to help."""
    head = (f"the copy is not done: it writes its target plan on {fid.matched} of {fid.n} training questions ({fid.share:.0%}), "
            f"under the bar of {bar:.0%}, after {fid.epochs} epoch(s)")
    raise_ = [*plan.warnings()]
    raise_.append(f"raise --max-copy-epochs (now {cap}) or --copy-epochs (now {plan.epochs}) to copy longer")
    raise_.append(f"raise --copy-lr (now {plan.learning_rate:g}) if the loss barely moves")
    worst = sorted(fid.per_group.items(), key=lambda kv: kv[1][0] / max(1, kv[1][1]))[:3]
    where = ", ".join(f"{g} {m}/{n}" for g, (m, n) in worst)
    return head + f" (worst kinds: {where}). To change: " + "; ".join(raise_) + (
        ". Or lower --fidelity-bar to accept it. Every stage done is kept: the same command with the change goes on from here")


# ------------------------------------------------------------------------------------------ the stage


def copy_stage(ctx: "FitContext", state: "FitState", key: str) -> tuple[Path, str]:
    """The supervised copy of the per-question targets (the trainer's warm-up): ``OUT/train/warmup``."""
    from ...conductor.manifest import has_manifest
    from ..trainer import prepare
    from .context import _candidates, _written_to, copy_digest, digest, per_question_targets

    warm = ctx.out / "train" / "warmup"
    before, key, done = key, copy_digest(key, ctx.cfg), state.stages.get("copy", {})
    # A copy finished before the digest left out the folder's path (2026-11-29) is kept too, under its old digest so
    # that the stages after it stay done: the recipe with this folder's path, or with the folder it was last saved
    # from; "recipe" remembers it wherever the folder goes next.
    old = {digest(before, dataclasses.asdict(ctx.cfg))}
    if state.previous_out:
        old.add(digest(before, dataclasses.asdict(_written_to(ctx.cfg, str((Path(state.previous_out) / "train").resolve())))))
    recorded = done.get("digest")
    if has_manifest(warm) and recorded is not None and (recorded == key or recorded in old or done.get("recipe") == key):
        if recorded != key:
            done["recipe"] = key
        return warm, done["digest"]
    shutil.rmtree(warm, ignore_errors=True)  # a copy made for other targets must not be loaded as this one
    got = json.loads((ctx.out / "targets.json").read_text())
    rows, texts, summary = per_question_targets(ctx, {"targets": got, "candidates": _candidates(ctx)})
    ctx.hooks.stage("copy", None)
    model, tokenizer, done_epochs = copy_model(ctx, state, key, warm.with_name("warmup.partial"))
    w = dataclasses.replace(ctx.cfg.warmup_sft, examples=len(rows), targets_per_prompt=1, epochs=ctx.cfg.warmup_sft.epochs - done_epochs)
    started = time.monotonic()
    prepare(dataclasses.replace(ctx.cfg, warmup_sft=w), model=model, tokenizer=tokenizer, pool_spec=ctx.spec, items=ctx.questions.train,
            targets=(rows, texts, summary), on_epoch=lambda n: save_epoch(model, warm.with_name("warmup.partial"), state, done_epochs + n))
    state.stages.pop("copy-started", None)
    shutil.rmtree(warm.with_name("warmup.partial"), ignore_errors=True)
    state.finish("copy", key, time.monotonic() - started, {})
    return warm, key


def copy_model(ctx: "FitContext", state: "FitState", key: str, partial: Path):
    """(model, tokenizer, epochs already done): the recipe's start, or the copy an interruption left after its last
    whole epoch (``warmup.partial``; the optimiser starts afresh from it)."""
    from ..trainer import init_checkpoint, load_model, load_weights, weights_file

    began = state.stages.get("copy-started", {})
    done = began.get("epochs", 0) if began.get("digest") == key and weights_file(partial) is not None else 0
    if not done:
        shutil.rmtree(partial, ignore_errors=True)
    state.stages["copy-started"] = {"digest": key, "epochs": done}
    model, tokenizer = load_model(ctx.cfg)
    if ctx.cfg.model.init:
        load_weights(model, init_checkpoint(ctx.cfg.model.init))
    if done:
        load_weights(model, partial)
        ctx.hooks.note(f"copy: going on from epoch {done} of {ctx.cfg.warmup_sft.epochs} (saved before the interruption)")
    return model, tokenizer, done


def save_epoch(model, partial: Path, state: "FitState", epochs: int) -> None:
    """The copy after ``epochs`` whole epochs, for a rerun after an interruption to go on from."""
    model.save_pretrained(partial, safe_serialization=True)
    state.stages["copy-started"]["epochs"] = epochs
    if state.on_finish is not None:
        state.on_finish()


def copy_plan(ctx: "FitContext") -> CopyPlan:
    counts = {g: len(rows) for g, rows in ctx.rows.items()}
    w = ctx.cfg.warmup_sft
    return CopyPlan(counts, w.epochs, w.batch_size, w.learning_rate)


def max_epochs(ctx: "FitContext") -> int:
    return ctx.settings.max_copy_epochs or 3 * ctx.cfg.warmup_sft.epochs


def measure(ctx: "FitContext", checkpoint: Path, epochs: int) -> Fidelity:
    """The conductor at ``checkpoint`` plans every training question; its fidelity to the per-question targets."""
    import asyncio

    from .context import _candidates, local_threads, per_question_targets

    got = json.loads((ctx.out / "targets.json").read_text())
    rows, texts, _ = per_question_targets(ctx, {"targets": got, "candidates": _candidates(ctx)})
    ctx.hooks.stage("fidelity", len(rows))
    written = asyncio.run(runtime_plans(ctx.spec, checkpoint, [r.question for r in rows], local_threads(ctx.settings), ctx.hooks.advance))
    return fidelity_of([r.domain for r in rows], [r.question for r in rows], texts, written, epochs)


async def runtime_plans(spec, checkpoint: Path, questions: list[str], threads: int, advance=lambda n: None) -> list[str]:
    """Each question's plan as ``conductor ask --conductor CHECKPOINT`` writes it (its llama.cpp copy under the grammar
    where it has one, greedy; its wordings held), planned only, never run. A plan the conductor failed to write (the
    pool's fallback ran instead) is its last raw text, which no target matches."""
    from ...policies import make_policy
    from ...policies.base import PlanRequest
    from ...pool import Pool
    from ..evaluate import with_checkpoint

    planned, options = with_checkpoint(spec, checkpoint)
    # Every question planned, none gated: the training questions are the familiar ones by construction.
    planned = planned.with_local_threads(threads).model_copy(update={"conductor": planned.conductor.model_copy(update={"unfamiliar": "plan"})})
    policy = make_policy("conductor", **options)
    out: list[str] = []
    async with Pool(planned) as pool:
        for question in questions:
            plan = await policy.plan(PlanRequest(question=question, pool=pool, max_steps=planned.conductor.max_steps, seed=0))
            ok = plan.workflow is not None and plan.record.fallback is None
            out.append(plan.workflow.render() if ok and plan.workflow is not None else plan.record.raw)
            advance(1)
    return out


def copy_on(ctx: "FitContext", warm: Path, epochs: int) -> None:
    """``epochs`` more of the copy, from the copy at ``warm`` (kept as ``warmup.prev`` until the new one is written,
    so an interruption loses only the round it was in)."""
    from ..trainer import load_model, load_weights, prepare
    from .context import _candidates, per_question_targets

    prev = warm.with_name(warm.name + ".prev")
    shutil.rmtree(prev, ignore_errors=True)
    warm.rename(prev)
    model, tokenizer = load_model(ctx.cfg)
    load_weights(model, prev)
    got = json.loads((ctx.out / "targets.json").read_text())
    rows, texts, summary = per_question_targets(ctx, {"targets": got, "candidates": _candidates(ctx)})
    w = dataclasses.replace(ctx.cfg.warmup_sft, examples=len(rows), targets_per_prompt=1, epochs=epochs)
    prepare(dataclasses.replace(ctx.cfg, warmup_sft=w), model=model, tokenizer=tokenizer, pool_spec=ctx.spec, items=ctx.questions.train,
            targets=(rows, texts, summary))
    shutil.rmtree(prev, ignore_errors=True)


def restore_round(warm: Path) -> None:
    """A round interrupted after it moved the copy aside: the copy before it is the copy."""
    from ...conductor.manifest import has_manifest

    prev = warm.with_name(warm.name + ".prev")
    if not has_manifest(warm) and has_manifest(prev):
        shutil.rmtree(warm, ignore_errors=True)
        prev.rename(warm)


@dataclasses.dataclass
class CopyResult:
    warm: Path
    key: str  # the digest the later stages build on (the copy's, and its epochs when it copied on)
    fidelity: Fidelity
    done: bool  # at or over the bar
    advice: str = ""


def checked_copy(ctx: "FitContext", state: "FitState", key: str) -> CopyResult:
    """The recipe's copy (skipped when done), then its fidelity; more rounds while under the bar."""
    from .context import check_pool_plans, digest

    for text in copy_plan(ctx).warnings():
        ctx.hooks.note(f"warning: {text}")
    restore_round(ctx.out / "train" / "warmup")
    warm, key = copy_stage(ctx, state, key)
    check_pool_plans(ctx.spec, warm)  # a pool that cannot plan with this copy is refused before its fidelity is measured
    record = state.stages["copy"]
    base = ctx.cfg.warmup_sft.epochs
    record.setdefault("epochs", base)
    record.setdefault("targets", sum(map(len, ctx.rows.values())))  # the dry run's copy time per target and epoch
    bar, cap = ctx.settings.fidelity_bar, max_epochs(ctx)
    fid = _recorded(ctx, record) or _measured(ctx, state, record, warm)
    while fid.share < bar and record["epochs"] < cap:
        more = min(base, cap - record["epochs"])
        ctx.hooks.note(f"copy fidelity {fid.share:.0%} ({fid.matched}/{fid.n}) is under the bar of {bar:.0%}: "
                       f"{more} more epoch(s) of the copy (up to {cap})")
        ctx.hooks.stage("copy", None)
        started = time.monotonic()
        copy_on(ctx, warm, more)
        record["epochs"] += more
        record["seconds"] = round(record.get("seconds", 0.0) + time.monotonic() - started, 1)
        record.pop("fidelity", None)
        _save(state)
        fid = _measured(ctx, state, record, warm)
    later = key if record["epochs"] == base else digest(key, record["epochs"])
    done = fid.share >= bar
    return CopyResult(warm, later, fid, done, "" if done else advice(fid, copy_plan(ctx), bar, cap))


def _recorded(ctx: "FitContext", record: dict) -> Optional[Fidelity]:
    path = ctx.out / FIDELITY_FILE
    if record.get("fidelity") is None or not path.exists():
        return None
    fid = Fidelity.model_validate_json(path.read_text())
    return fid if fid.epochs == record["epochs"] else None


def _measured(ctx: "FitContext", state: "FitState", record: dict, warm: Path) -> Fidelity:
    fid = measure(ctx, warm, record["epochs"])
    (ctx.out / FIDELITY_FILE).write_text(fid.model_dump_json(indent=1))
    record["fidelity"] = round(fid.share, 4)
    _save(state)
    return fid


def _save(state: "FitState") -> None:
    if state.on_finish is not None:
        state.on_finish()
