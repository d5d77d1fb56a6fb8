"""A fit's settings and what its stages share: ``FitSettings`` (its flags), the training recipe, ``FitContext`` (the
pool, the questions and the recipe, made once), the pool work (profile -> search -> targets) and the records the
conductor's manifest keeps. ``run.py`` runs the stages in order.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field

from ... import graders
from ...pool import PoolConfigError, PoolSpec, default_pool_path, load_pool
from ...tasks.kinds import TRAIN_KINDS
from ..search.candidates import Candidate, candidate_set, declared_left_out
from ..config import RewardSettings, TrainConfig, load_train_config
from ..data import Item, TrainRow, build_rows
from .spend_caps import MeteredStore
from .questions import FitQuestions, fit_questions
from ..search.fit_targets import Runner, group_rows, profile, profile_accuracy, search_groups, single_candidates, targets_for_groups
from .state import FitState, Hooks, digest, spent_since

if TYPE_CHECKING:
    from ...conductor.familiar import Fallback, Familiarity

STAGES = ("profile", "search", "targets", "copy", "grpo", "evaluate")


class FitSettings(BaseModel):
    """A fit's settings: its flags. ``out`` holds everything it writes."""

    model_config = ConfigDict(extra="forbid")

    pool: str  # a pool file, or "default": the packaged offline pool
    out: Path
    tasks: list[str] = Field(default_factory=list)  # registered tasks (default: the training kinds)
    questions: Optional[Path] = None  # or a JSONL of your own questions
    eval_tasks: list[str] = Field(default_factory=list)  # kinds evaluated but never trained on
    per_task: int = Field(8, ge=2)  # training questions per group (the finalists run on all of them)
    eval_n: int = Field(4, ge=0)  # held-out questions per group, and per --eval-task
    profile_n: int = Field(2, ge=1)  # questions per group for the profile and each screening round
    screen_rounds: int = Field(2, ge=1)
    finalists: int = Field(3, ge=1)
    grpo_steps: int = Field(0, ge=0)
    recipe: Optional[Path] = None  # a training config for the model, prompt, copy and GRPO settings
    init: Optional[str] = None  # a trained conductor the copy starts from (the recipe's model.init otherwise)
    seed: int = 0
    max_calls: Optional[int] = Field(None, ge=1)
    max_cost: Optional[float] = Field(None, gt=0)
    output_share: float = Field(0.25, gt=0, le=1)  # the dry run's output tokens per call, as a share of max_tokens
    # Threads per in-process llama.cpp model (None: every core this process may use). A fit is a long job
    # that owns the machine, where all cores decode faster than the pools' default of 1 (docs/providers.md).
    threads: Optional[int] = Field(None, ge=1)
    # The copy must write its target plan on this share of the training questions (copy.py); under it the fit
    # copies on up to max_copy_epochs (default 3x the recipe's epochs), then stops and names what to raise.
    fidelity_bar: float = Field(0.95, ge=0, le=1)
    max_copy_epochs: Optional[int] = Field(None, ge=1)
    copy_epochs: Optional[int] = Field(None, ge=1)  # the recipe's warmup_sft.epochs, replaced
    copy_lr: Optional[float] = Field(None, gt=0)  # the recipe's warmup_sft.learning_rate, replaced

    @property
    def pool_path(self) -> Path:
        return default_pool_path() if self.pool == "default" else Path(self.pool)


# ------------------------------------------------------------------------------------------ set-up


def recipe(settings: FitSettings, spec: PoolSpec) -> TrainConfig:
    """The training config the copy and GRPO run with: the recipe's model, prompt, warm-up and GRPO settings;
    the fit's pool, output folder and step cap."""
    from importlib import resources

    path = settings.recipe or Path(str(resources.files("openconductor").joinpath("data/fit_recipe.toml")))
    # [data] records where the questions came from (train_config.json); the fit hands the trainer its own items.
    tasks = ["questions"] if settings.questions is not None else list(settings.tasks or TRAIN_KINDS)
    overrides = {"pool": str(settings.pool_path.resolve()), "run.output_dir": str((settings.out / "train").resolve()),
                 "prompt.max_steps": spec.conductor.max_steps, "search": {}, "reward.replay": None,
                 "data": {"kind": "tasks", "tasks": tasks, "n_train": max(len(tasks), settings.per_task * len(tasks))}}
    if settings.init:
        overrides["model.init"] = settings.init
    if settings.copy_epochs:
        overrides["warmup_sft.epochs"] = settings.copy_epochs
    if settings.copy_lr:
        overrides["warmup_sft.learning_rate"] = settings.copy_lr
    return load_train_config(path, overrides)


def search_reward(cfg: TrainConfig) -> RewardSettings:
    """The search's reward: the recipe's, with at least a small cost per step (ties go to shorter plans)."""
    return dataclasses.replace(cfg.reward, step_weight=max(cfg.reward.step_weight, 0.01), cost_weight=0.0, token_weight=0.0)


def pool_digest(spec: PoolSpec) -> str:
    return digest(spec.outcome_view({"workers", "workflows", "strongest"}))


@dataclasses.dataclass
class FitContext:
    settings: FitSettings
    spec: PoolSpec
    cfg: TrainConfig
    questions: FitQuestions
    rows: dict[str, list[TrainRow]]  # training rows per group
    hooks: Hooks

    @property
    def out(self) -> Path:
        return self.settings.out


def local_threads(settings: FitSettings) -> int:
    return settings.threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def context(settings: FitSettings, hooks: Optional[Hooks] = None) -> FitContext:
    spec = load_pool(settings.pool_path).with_local_threads(local_threads(settings))
    cfg = recipe(settings, spec)
    q = fit_questions(tasks=settings.tasks, questions=settings.questions, per_task=settings.per_task, eval_per_task=settings.eval_n,
                      eval_tasks=settings.eval_tasks, seed=settings.seed)
    rows = group_rows(build_rows(cfg, spec.for_execution(), q.train))
    return FitContext(settings, spec.for_execution(), cfg, q, rows, hooks or Hooks())


def _format(ctx: FitContext):
    """The conductor's output format the fit's candidates must be written in."""
    return ctx.cfg.rollout.format(len(ctx.spec.workers), ctx.cfg.prompt.max_steps, fine_grained=ctx.cfg.prompt.fine_grained)


def _admits(ctx: FitContext) -> Callable[[str], bool]:
    """Whether the conductor's constrained output format can write ``text``."""
    fmt = _format(ctx)
    return lambda text: not ctx.cfg.rollout.constrained or fmt.complete(fmt.advance(fmt.start(), text))


def candidates_for(ctx: FitContext, accuracy: Optional[dict[str, float]]) -> list[Candidate]:
    return candidate_set(ctx.spec, ctx.cfg.prompt.max_steps, accuracy, admits=_admits(ctx))


def left_out_notes(ctx: FitContext) -> list[str]:
    """Which of the pool file's workflows the search does not consider under their own name, and why (the fit and
    its dry run say so; the recipe's bounds are under [rollout] and [prompt])."""
    return [f"[workflows.{key}] is left out of the search's candidates because {why}"
            for key, why in declared_left_out(ctx.spec, ctx.cfg.prompt.max_steps, _admits(ctx), _format(ctx).why_not).items()]


def note_left_out(ctx: FitContext) -> None:
    for text in left_out_notes(ctx):
        ctx.hooks.note(text)


# ------------------------------------------------------------------------------------------ the pool stages


async def pool_stages(ctx: FitContext, runner: Runner, state: Optional[FitState], meter: Optional[MeteredStore]) -> dict[str, Any]:
    """Profile, search and targets (each skipped when done with the same digest); returns their results."""
    s = ctx.settings
    key = digest(pool_digest(ctx.spec), ctx.questions.digest(), s.profile_n, s.seed, graders.SCORING_VERSION)
    got: dict[str, Any] = {}

    async def stage(name: str, key: str, total: int, work: Callable[[], Any]) -> Any:
        path = ctx.out / f"{name}.json"
        if state is not None and state.done(name, key) and path.exists():
            return json.loads(path.read_text())
        ctx.hooks.stage(name, total)
        started, before = time.monotonic(), (meter.spend.as_dict() if meter else {})
        result = await work()
        if state is not None:
            path.write_text(json.dumps(result, indent=1))
            state.finish(name, key, time.monotonic() - started, spent_since(meter, before) if meter else {})
        return result

    note_left_out(ctx)
    singles = single_candidates(candidates_for(ctx, None))
    n_groups = len(ctx.rows)
    got["profile"] = await stage("profile", key, len(singles) * n_groups * s.profile_n,
                                 lambda: profile(runner, singles, ctx.rows, s.profile_n))
    candidates = candidates_for(ctx, profile_accuracy(got["profile"]))
    key = digest(key, got["profile"], [c.text for c in candidates], s.screen_rounds, s.finalists)
    total = n_groups * s.profile_n * sum(-(-len(candidates) // 2**r) for r in range(s.screen_rounds))
    got["search"] = await stage("search", key, total, lambda: search_groups(
        runner, candidates, ctx.rows, screen_n=s.profile_n, rounds=s.screen_rounds, finalists=s.finalists, seed=s.seed))
    key = digest(key, got["search"], s.per_task)
    total = sum(len(got["search"]["groups"][g]["finalists"]) * len(rows) for g, rows in ctx.rows.items())
    got["targets"] = await stage("targets", key, total, lambda: targets_for_groups(runner, candidates, got["search"], ctx.rows))
    got["candidates"], got["digest"] = candidates, key
    return got


# ------------------------------------------------------------------------------------------ the model stages


def per_question_targets(ctx: FitContext, got: dict[str, Any]) -> tuple[list[TrainRow], list[str], dict]:
    """The copy's (rows, target texts, summary): every training question with the plan chosen for it."""
    text = {c.name: c.text for c in got["candidates"]}
    chosen: dict[tuple[str, str], str] = {}
    for group, t in got["targets"]["groups"].items():
        for q in t["per_question"]:
            chosen[(group, q["question"])] = q["target"]
    rows = [row for i in range(max(map(len, ctx.rows.values()))) for row in (g[i] for g in ctx.rows.values() if i < len(g))]
    names = [chosen[(row.domain, row.question)] for row in rows]
    best = {g: t["best"] for g, t in got["targets"]["groups"].items()}
    summary = {"selection": "per question (conductor fit)", "groups": best, "questions": len(rows),
               "not_the_groups_best": sum(1 for row, n in zip(rows, names) if n != best[row.domain])}
    return rows, [text[n] for n in names], summary


def _written_to(cfg: TrainConfig, output_dir: str) -> TrainConfig:
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, output_dir=output_dir))


def copy_digest(key: str, cfg: TrainConfig) -> str:
    """What decides the copy: the stage before and the recipe, not where its files are written. A fit folder copied
    or moved elsewhere (to branch a GRPO run off a finished copy) keeps its copy."""
    return digest(key, dataclasses.asdict(_written_to(cfg, "")))


def check_pool_plans(spec: PoolSpec, checkpoint: Path) -> None:
    """Refuses, before GRPO and the evaluation, a conductor its own pool file could not plan with: a
    ``[conductor] max_tokens`` that leaves its subtasks less room than the longest wording its copy taught (which the
    runtime holds it to). The message names the least max_tokens that fits; every stage done is kept."""
    from ...conductor.checkpoint import trained_conductor
    from ...conductor.prompt import planning_format

    planned, _ = trained_conductor(spec, checkpoint, engine="transformers")
    try:
        planning_format(planned, planned.conductor.max_steps)
    except PoolConfigError as exc:
        raise PoolConfigError(f"{exc}. The fit keeps every stage done: edit the pool file and run the same command again") from None


def place_checkpoint(source: Path, target: Path, record: dict) -> Path:
    """The conductor the pool file names: a copy of ``source`` (weights hard-linked where the disk allows),
    its manifest recording how the fit made it (``record``)."""
    from ...conductor.manifest import read_manifest

    shutil.rmtree(target, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            if Path(src).suffix == ".json":
                raise OSError("written below: a copy, not a link to the source's file")
            Path(dst).hardlink_to(src)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)
    read_manifest(target).model_copy(update={"fit": record}).write(target)
    return target


def fit_record(ctx: FitContext, source: Path) -> dict:
    """What a fit's checkpoint records of its making: the command's settings, the per-question copy, each
    group's best plan and the best fixed workflow (the baselines its evaluation uses)."""
    search, targets = (json.loads((ctx.out / f"{n}.json").read_text()) for n in ("search", "targets"))
    return {"settings": json.loads(ctx.settings.model_dump_json()), "targets": "per question", "from": source.name,
            "groups_best": {g: t["best"] for g, t in targets["groups"].items()}, "best_fixed": search["best_fixed"]}


def familiarity_of(items: list[Item], fallback: "Fallback") -> "Familiarity":
    """The familiarity of a conductor trained on ``items`` (each item's group is its domain)."""
    from ...conductor.familiar import Familiarity, answer_instructions

    return Familiarity.build([i.question for i in items], [i.domain for i in items], fallback, answer_instructions((i.question, i.bare) for i in items))


def record_familiarity(ctx: FitContext, *folders: Path) -> None:
    """``familiar.json`` in each conductor folder: the training questions, the threshold that tells a question of an
    unseen kind, and the best fixed workflow that ``[conductor] unfamiliar = "best-fixed"`` runs for one."""
    from ...conductor.familiar import FAMILIAR_FILE, Fallback, FamiliarityError

    search = json.loads((ctx.out / "search.json").read_text())
    best = {c.name: c for c in _candidates(ctx)}[search["best_fixed"]]
    try:
        familiar = familiarity_of(ctx.questions.train, Fallback(name=best.name, workflow=best.text, workers=[w.name for w in ctx.spec.workers]))
    except FamiliarityError as exc:  # one group (a questions file without kinds): nothing to leave out
        ctx.hooks.note(f"{FAMILIAR_FILE} not written: {exc}")
        for folder in folders:
            (folder / FAMILIAR_FILE).unlink(missing_ok=True)  # an earlier fit's would describe other questions
        return
    for folder in folders:
        familiar.write(folder)


def gate_row(spec: PoolSpec, checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The conductor under the other ``[conductor] unfamiliar`` setting than the pool file's, so that the report shows,
    paired, what the gate does on this pool's held-out and unseen questions; none without a familiar.json."""
    from ...conductor.familiar import FAMILIAR_FILE

    if not (checkpoint / FAMILIAR_FILE).exists():
        return {}
    other = "plan" if spec.conductor.unfamiliar == "best-fixed" else "best-fixed"
    return {f"conductor, unfamiliar = {other}": {"unfamiliar": other}}


def _candidates(ctx: FitContext) -> list[Candidate]:
    return [Candidate(**c) for c in json.loads((ctx.out / "search.json").read_text())["candidates"]]
