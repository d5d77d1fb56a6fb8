"""Search-and-copy across generated pools: the warm-up of a general conductor for world-v3 pools (SIMULATED).

For the training pool (``examples/pools/simulated_paper_v3.toml``) and ``pools`` generated training pools
(``sim/pools.py``, training families only), the plan search (``sim/plan_search.py``) finds the best plans per
bucket (subtopic x level) on that pool; then every example asks one question of a bucket with the pool
*described* (``show = "descriptions"``: the pool's ids mean different workers in every pool, so only the
descriptions say who is who) and its target is that pool's best plan for the question's bucket. Each
target's one line of reasoning names the question's level and subtopic and the workers of the plan
by name ("hard geometry: plan euclid-14b, solve atlas-pro, check sentinel-70b"), so that the ids are
written after the conductor has said, in words, whom it picked and why; a name is next to its id in
the prompt's pool list.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..conductor.prompt import conductor_messages
from ..conductor.ranking import area_keys, ranked_by_area
from ..conductor.ranking import rank_aliases as ranking_words
from ..pool import WORKER_VIEWS, PoolSpec, PoolView, load_pool
from ..sim.pools import DOMAIN_AREA, RANKINGS, generate_pool, pool_spec, renamed, with_profile
from ..sim.questions import SUBTOPIC_NAMES, Question
from ..sim.world_v3 import Profile, make_questions
from ..workflow import Workflow
from ..sim.plan_search import AGGREGATE, BUCKET, CHECK, IMPLEMENT, PLAN, SEARCH_SEED, SOLVE, Scored, SearchSettings, search_pool
from .config import TrainConfigError
from .data import TrainRow
from .prefix_sft import copy_plans
from .trainer import init_checkpoint, init_source

log = logging.getLogger(__name__)

_ROLE_WORDS = {SOLVE: "solve", CHECK: "check", PLAN: "plan", IMPLEMENT: "implement", AGGREGATE: "combine"}
_SHORT = {"number_theory": "number theory", "combinatorics": "combinatorics", "finance": "finance", "operations": "operations",
          "arrays": "arrays", "dp": "dynamic programming", "graphs": "graphs", "strings": "strings"}
REASON_CHARS = 80  # the runtime grammar's bound on the reasoning line


@dataclass
class PromptShape:
    max_steps: int = 3
    style: str = "compact"
    examples: bool = False
    rename_workers: bool = False  # generated pools' workers get fresh names in every example (``DataSettings.rename_workers``)
    show: PoolView = "descriptions"  # how the pool is shown: "descriptions", "profile" (descriptions and the measured ranking) or "ranking" (names and the ranking)
    rank_aliases: bool = False  # targets name a worker by its place in the ranking of the question's area ("math#1") where it has one

    @classmethod
    def of(cls, cfg) -> "PromptShape":
        """The shape a TrainConfig asks for (the pool described: ids or bare names say nothing across pools)."""
        if cfg.prompt.show not in WORKER_VIEWS:
            raise TrainConfigError(f"a general conductor over generated pools needs prompt.show = \"descriptions\", \"profile\" or \"ranking\" "
                                   f"(got {cfg.prompt.show!r}): every generated pool numbers and names different workers")
        return cls(cfg.prompt.max_steps, cfg.prompt.style, cfg.prompt.examples, cfg.data.rename_workers, cfg.prompt.show, cfg.prompt.rank_aliases)


TARGETS = ("search", "ranks", "mixed")


@dataclass
class CopySettings:
    pools: int = 60  # generated training pools, besides the training pool
    pool_seed: int = 10_000  # they are generate_pool(pool_seed + i)
    per_pool: int = 48  # examples per generated pool (one question per bucket)
    training_pool_examples: int = 480  # examples on the training pool
    question_seed: int = 0  # the examples' questions (training side)
    search_seed: int = SEARCH_SEED  # the search's questions (training side, not the examples'), as the lookups'
    search: SearchSettings = field(default_factory=SearchSettings)
    # "search": each pool's own best plan per bucket; "ranks": the rank lookup's (one plan per bucket over the
    # places in the question's area's ranking, found across all training pools, made concrete on each pool);
    # "mixed": the training pool's own (it is seen, so its lookup is the bar there), the rank lookup's elsewhere.
    targets: str = "search"
    rank_questions: int = 5  # "ranks": questions per bucket and pool the rank table is found on (unseen_pools.py's)
    # Whose measured ranking every training pool shows (its workers' ``profile``) and the rank table's places are in:
    # the question's area, or its subtopic (``sim.pools.RANKINGS``; 16 ranking lines, rank words like "graph#1").
    ranking: str = "area"
    # The price the training pool's own plans are searched at (targets "search" or "mixed"); None: ``search.token_weight``.
    # The training pool is seen, so its own per-bucket table is the bar there, whatever price the generated pools'
    # targets are found at (those are priced for the unseen-pool token goal).
    training_pool_token_weight: Optional[float] = None
    # (screen, rank): the questions a bucket the training pool's own plans are searched on; None: ``search``'s. The
    # per-bucket lookup it is held to is searched on ``sim_eval.LOOKUP_SEARCH`` (80, 160), three times the copy's default.
    training_pool_search: Optional[tuple[int, int]] = None

    def __post_init__(self) -> None:
        if self.targets not in TARGETS:
            raise ValueError(f"copy targets must be one of {', '.join(TARGETS)}, got {self.targets!r}")
        if self.ranking not in RANKINGS:
            raise ValueError(f"the ranking must be one of {', '.join(RANKINGS)}, got {self.ranking!r}")
        if self.training_pool_token_weight is not None and self.training_pool_token_weight < 0:
            raise ValueError(f"the training pool's token price must be 0 or more, got {self.training_pool_token_weight}")
        if self.training_pool_search is not None:
            screen, rank = self.training_pool_search
            if screen < 1 or rank < 1:
                raise ValueError(f"the training pool's search needs at least 1 screening and 1 ranking question a bucket, got {screen}, {rank}")
            self.training_pool_search = (int(screen), int(rank))


def training_pools(settings: CopySettings, training_pool: Path) -> list[PoolSpec]:
    """The training pool, then the generated ones (training families only), each worker's profile measured per
    ``settings.ranking`` (the training pool's file has none: it is measured the same way)."""
    pools = [load_pool(training_pool)] + [pool_spec(generate_pool(settings.pool_seed + i)) for i in range(settings.pools)]
    return [with_profile(spec, settings.ranking) for spec in pools]


def reasoning(plan: Workflow, spec: PoolSpec, question: Question, rank_aliases: bool = False) -> str:
    """The target's one line: level, subtopic, and each step's role and worker name, within the grammar's bound.
    With ``rank_aliases``, a worker among the best of the question's area is named by its place there ("math#1"), or
    of its subtopic where the pool's profile ranks subtopics ("graph#1")."""
    head = f"{question.level} {_SHORT.get(question.subtopic, question.subtopic)}"
    names = [spec.workers[s.worker].name for s in plan.steps]
    if rank_aliases:
        lines = list(ranked_by_area(spec))
        line = SUBTOPIC_NAMES[question.subtopic] if SUBTOPIC_NAMES[question.subtopic] in lines else DOMAIN_AREA[question.domain]
        area = area_keys(lines or list(DOMAIN_AREA.values())).get(line, line) + "#"
        place = {i: word for word, i in ranking_words(spec) if word.startswith(area)}
        names = [place.get(s.worker, n) for s, n in zip(plan.steps, names)]
    for body in (", ".join(f"{_ROLE_WORDS.get(s.subtask, 'solve')} {n}" for s, n in zip(plan.steps, names)), ", ".join(names)):
        if len(head) + 2 + len(body) <= REASON_CHARS:
            return f"Reasoning: {head}: {body}"
    return f"Reasoning: {head}"


def target(plan: Workflow, spec: PoolSpec, question: Question, rank_aliases: bool = False) -> str:
    return Workflow(plan.steps, reasoning(plan, spec, question, rank_aliases)).render()


def search_tables(spec: PoolSpec, questions: list[Question], settings: SearchSettings) -> dict:
    profiles = [Profile.from_spec(w) for w in spec.workers]
    return search_pool(profiles, questions, lambda q: q.bucket, settings)


@dataclass
class Searched:
    """One training pool's search outcome for its copy examples: each question and its bucket's best plan."""
    spec: PoolSpec
    questions: list[Question]
    best: list[Scored]


@dataclass
class CopyData:
    groups: list[tuple[list[list[dict]], list[str]]]  # per pool: prompts and targets
    rows: list[dict]  # one per example, for the run dir (pool, bucket, question, target, search score)
    seconds: float  # the search's
    searched: list[Searched] = field(default_factory=list)  # what the examples were made from (saved by copy_data.py)


def search(settings: CopySettings, training_pool: Path, *, exclude: frozenset[str] = frozenset()) -> tuple[list[Searched], float]:
    """Search every training pool (the slow, CPU-only part) and pair each example's question with its
    bucket's best plan (``exclude``: held-out question texts). Returns them and the seconds taken."""
    start = time.monotonic()
    pools = training_pools(settings, training_pool)
    searched = search_questions(settings, exclude)
    own_searched = own_search_questions(settings, exclude) or searched
    taken = exclude | {q.text for q in searched} | {q.text for q in own_searched}
    counts = [settings.training_pool_examples] + [settings.per_pool] * settings.pools
    asked = make_questions(sum(counts), settings.question_seed, exclude=taken)
    ranks = rank_targets(rank_table_of(pools, searched, settings, settings.ranking), settings.ranking) if settings.targets != "search" else None
    out, used = [], 0
    for p, (spec, count) in enumerate(zip(pools, counts)):
        questions = asked[used : used + count]
        used += count
        own_plans = settings.targets == "search" or (settings.targets == "mixed" and p == 0)  # pool 0: the training pool
        if ranks is not None and not own_plans:
            out.append(Searched(spec, questions, ranks(spec, questions)))
            continue
        tables: dict = search_tables(spec, own_searched, own_search(settings)) if p == 0 else search_tables(spec, searched, settings.search)
        out.append(Searched(spec, questions, [tables[q.bucket][0] for q in questions]))
        log.info("pool %d/%d %s: searched %d buckets", p + 1, len(pools), spec.name, len(tables))
    return out, time.monotonic() - start


def own_search(settings: CopySettings) -> SearchSettings:
    """The search settings for the training pool's own plans (``training_pool_search`` and ``training_pool_token_weight``
    where given)."""
    own = settings.search
    if settings.training_pool_search is not None:
        own = dataclasses.replace(own, screen=settings.training_pool_search[0], rank=settings.training_pool_search[1])
    if settings.training_pool_token_weight is not None:
        own = dataclasses.replace(own, token_weight=settings.training_pool_token_weight)
    return own


def first_per_bucket(questions: list[Question], k: int) -> list[Question]:
    """The first ``k`` questions of every bucket, in order."""
    counts: Counter = Counter()
    kept = []
    for q in questions:
        counts[q.bucket] += 1
        if counts[q.bucket] <= k:
            kept.append(q)
    return kept


def search_questions(settings: CopySettings, exclude: frozenset[str], search: Optional[SearchSettings] = None) -> list[Question]:
    """The training-side questions the plan search (and the rank lookup) scores plans on (``search``: another size than
    ``settings.search``'s; at ``sim_eval.LOOKUP_SEARCH``'s they are the lookups' own, ``lookup_search_questions``)."""
    return make_questions(48 * (search or settings.search).questions, settings.search_seed, exclude=exclude)


def own_search_questions(settings: CopySettings, exclude: frozenset[str]) -> list[Question]:
    """The questions the training pool's own plans are searched on where ``training_pool_search`` sizes that search
    apart; else none (it shares ``search_questions``)."""
    return search_questions(settings, exclude, own_search(settings)) if settings.training_pool_search else []


def rank_table_of(pools: list[PoolSpec], searched: list[Question], settings: CopySettings, ranking: str = "area") -> dict:
    """The rank lookup across ``pools``, on the first ``settings.rank_questions`` of each bucket of ``searched``
    (``ranking``: over the area's measured ranking, or the subtopic's, ``sim.pools.RANKINGS``)."""
    from .sim_eval import rank_table

    return rank_table(pools, first_per_bucket(searched, settings.rank_questions), BUCKET, settings.search.token_weight, ranking)


def rank_lookup_table(training_pool: Path, exclude: frozenset[str], settings: Optional[CopySettings] = None, ranking: str = "area") -> dict:
    """The rank lookup as ``--targets ranks`` finds it (across every training pool, on the search's questions;
    ``exclude``: held-out question texts): the table the benchmarks score beside a conductor, on the training
    pool and on unseen pools."""
    settings = settings or CopySettings()
    return rank_table_of(training_pools(settings, training_pool), search_questions(settings, exclude), settings, ranking)


def rank_targets(table: dict, ranking: str = "area"):
    """For ``targets = "ranks"``: the rank lookup ``table`` (``rank_lookup_table``, the one ``unseen_pools.py``
    scores) as a function (pool, its questions) -> each question's bucket plan on that pool's ranking, scored as
    in the table (its mean over the pools)."""
    from .sim_eval import rank_lookup_plans

    log.info("rank table: %d buckets", len(table))

    def best(spec: PoolSpec, questions: list[Question]) -> list[Scored]:
        plans = rank_lookup_plans(spec, questions, table, BUCKET, ranking)
        return [dataclasses.replace(table[q.bucket], plan=plan) for q, plan in zip(questions, plans)]

    return best


def shown_pool(spec: PoolSpec, pool_index: int, example: int, rename: bool) -> PoolSpec:
    """The pool as one training example shows it: the training pool (index 0) as it is; a generated pool,
    with ``rename``, under fresh worker names drawn for this example (the same on every load)."""
    if not rename or pool_index == 0:
        return spec
    return renamed(spec, random.Random(f"rename|{spec.name}|{example}"))


def examples(searched: list[Searched], prompt: PromptShape, seconds: float) -> CopyData:
    """The copy's prompts (each pool described, as at run time) and targets (the best plans) of searched pools."""
    groups, rows = [], []
    for p, s in enumerate(searched):
        shown = [shown_pool(s.spec, p, i, prompt.rename_workers) for i in range(len(s.questions))]
        prompts = [conductor_messages(q.text, spec, max_steps=prompt.max_steps, show=prompt.show, fine_grained=False,
                                      examples=prompt.examples, style=prompt.style) for q, spec in zip(s.questions, shown)]
        targets = [target(b.plan, spec, q, prompt.rank_aliases) for b, q, spec in zip(s.best, s.questions, shown)]
        groups.append((prompts, targets))
        rows += [{"pool": s.spec.name, "bucket": list(q.bucket), "question": q.text, "target": t, "search_accuracy": round(b.accuracy, 4),
                  "search_tokens": round(b.tokens)} for q, t, b in zip(s.questions, targets, s.best)]
    return CopyData(groups, rows, seconds, searched)


def build(settings: CopySettings, training_pool: Path, prompt: PromptShape, *, exclude: frozenset[str] = frozenset()) -> CopyData:
    """Search every training pool and write its examples (``exclude``: held-out question texts)."""
    searched, seconds = search(settings, training_pool, exclude=exclude)
    return examples(searched, prompt, seconds)


def held_out_texts(n: int, seed: int) -> frozenset[str]:
    """The texts of the held-out test questions (never searched or copied on)."""
    return frozenset(q.text for q in make_questions(n, seed))


def summary(data: CopyData, settings: CopySettings, seconds_copy: Optional[float] = None) -> dict:
    by_pool: dict[str, list[float]] = {}
    for r in data.rows:
        by_pool.setdefault(r["pool"], []).append(r["search_accuracy"])
    return {"pools": len(by_pool), "examples": len(data.rows), "search_seconds": round(data.seconds, 1), "copy_seconds": seconds_copy,
            "settings": {"pools": settings.pools, "pool_seed": settings.pool_seed, "per_pool": settings.per_pool,
                         "training_pool_examples": settings.training_pool_examples, "search_screen": settings.search.screen, "search_rank": settings.search.rank, "search_finalists": settings.search.finalists,
                         "token_weight": settings.search.token_weight, "targets": settings.targets, "rank_questions": settings.rank_questions,
                         "ranking": settings.ranking, "training_pool_token_weight": settings.training_pool_token_weight,
                         "training_pool_search": settings.training_pool_search}}


def _copy_key(cfg, settings: CopySettings, test_n: int) -> dict:
    from .copy_data import data_key

    return data_key(settings, cfg.pool_path, test_n=test_n, eval_seed=cfg.data.eval_seed)


def _write_rows(data: CopyData, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "copy_targets.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in data.rows)


def search_run(cfg, settings: CopySettings, *, test_n: int = 1000) -> Path:
    """The plan search alone (CPU): writes RUN/copy_data.json.gz (``copy_data.py``) and RUN/copy_targets.jsonl."""
    from . import copy_data

    shape = PromptShape.of(cfg)
    data = build(settings, cfg.pool_path, shape, exclude=held_out_texts(test_n, cfg.data.eval_seed))
    _write_rows(data, cfg.output_dir)
    log.info("search: %d examples over %d pools in %.0f s", len(data.rows), len(data.groups), data.seconds)
    return copy_data.save(data, cfg.output_dir / copy_data.FILE_NAME, _copy_key(cfg, settings, test_n))


def copy_run(cfg, settings: CopySettings, *, test_n: int = 1000, epochs: int = 1, lr: float = 1e-3, batch_size: int = 16,
             max_batches: Optional[int] = None, max_minutes: Optional[float] = None, data_file: Optional[Path] = None,
             init: Optional[Path] = None) -> Path:
    """Search (or load ``data_file``, written by ``search_run``), copy and export: RUN/warmup is the conductor
    (``cfg``: a TrainConfig for the model, prompt, training pool, eval seed and run dir; ``max_batches`` /
    ``max_minutes``: stop the copy after that many steps / that much time; ``init``: a trained conductor's
    directory to start from instead of a fresh adapter, e.g. to move a shipped one onto new targets or a new
    view of the pool). Returns the exported dir."""
    import torch

    from .trainer import accelerator_device, export, load_model, load_weights

    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    out = cfg.output_dir
    if data_file is not None:
        from . import copy_data

        shape = PromptShape.of(cfg)
        data = copy_data.load(data_file, _copy_key(cfg, settings, test_n), cfg.pool_path, shape)
        log.info("copy data %s: %d examples over %d pools (searched in %.0f s)", data_file, len(data.rows), len(data.groups), data.seconds)
    else:
        data = build(settings, cfg.pool_path, PromptShape.of(cfg),
                     exclude=held_out_texts(test_n, cfg.data.eval_seed))
        log.info("search: %d examples over %d pools in %.0f s", len(data.rows), len(data.groups), data.seconds)
    _write_rows(data, out)
    model, tokenizer = load_model(cfg)
    if init is not None:
        load_weights(model, init)
    model.to(accelerator_device())  # copy_plans runs where the model is
    started = time.monotonic()
    losses = copy_plans(model, tokenizer, data.groups, epochs=epochs, lr=lr, batch_size=batch_size, seed=cfg.data.seed,
                        max_batches=max_batches, max_seconds=None if max_minutes is None else 60 * max_minutes)
    extra = {"stage": "search-and-copy across generated pools", "copy": summary(data, settings, round(time.monotonic() - started, 1)),
             "copy_run": {"epochs": epochs, "lr": lr, "batch_size": batch_size, "max_batches": max_batches, "max_minutes": max_minutes,
                          "batches": len(losses), "device": str(model.device), "copy_data": str(data_file) if data_file else None,
                          "init": init_source(init) if init is not None else None},
             "warmup_losses": losses}
    return export(model, tokenizer, out / "warmup", cfg, extra=extra)


def union_pool(pools: list[PoolSpec]) -> tuple[PoolSpec, list[list[int]]]:
    """One pool holding every training pool's workers (a name taken twice gets a ``~k`` suffix, and keeps its
    own as ``options.identity`` so the simulated world answers as in its pool: the reward runs each row's
    plan on a view of it), and each pool's indices in it, in that pool's order."""
    workers, indices, taken = [], [], set()
    for spec in pools:
        own = []
        for w in spec.workers:
            name, k = w.name, 1
            while name in taken:
                name, k = f"{w.name}~{k}", k + 1
            taken.add(name)
            own.append(len(workers))
            renamed = {"name": name} if name != w.name else {}
            if renamed and w.provider == "simulated":  # only the simulated world reads an identity
                renamed["options"] = {**w.options, "identity": w.options.get("identity") or w.name}
            workers.append(w.model_copy(update=renamed))
        indices.append(own)
    union = pools[0].model_copy(update={"name": "sim-training-pools", "workers": workers, "strongest": None})
    return union.for_execution(), indices


def grpo_rows(cfg, pools: list[PoolSpec], indices: list[list[int]], per_pool: int, seed: int, exclude: frozenset[str]) -> list[TrainRow]:
    """GRPO rows across pools: each asks a training-side question with its own pool described (as at run time)
    and runs on that pool's workers in the union. Questions that every worker of the pool answers right alone
    are skipped (any plan earns the same reward: no signal)."""
    from ..sim.world_v3 import solo_correct

    questions = make_questions(per_pool * len(pools) * 4, seed, exclude=exclude)
    by_pool: list[list[TrainRow]] = []
    for p, (spec, own) in enumerate(zip(pools, indices)):
        profiles = [Profile.from_spec(w) for w in spec.workers]
        mine = questions[p * per_pool * 4 : (p + 1) * per_pool * 4]  # each pool its own questions
        kept = [q for q in mine if not all(solo_correct(q.text, pr) for pr in profiles)][:per_pool]
        shown = [shown_pool(spec, p, 10_000 + i, cfg.data.rename_workers) for i in range(len(kept))]  # not the copy's names
        by_pool.append([TrainRow(prompt=conductor_messages(q.text, view, max_steps=cfg.prompt.max_steps, show=cfg.prompt.show, fine_grained=False,
                                                        examples=cfg.prompt.examples, style=cfg.prompt.style),
                                 question=q.text, reference=q.reference, task="simulated", domain=q.domain, workers=own,
                                 names=[w.name for w in view.workers]) for q, view in zip(kept, shown)])
    # Pools in rotation, so that every stretch of training sees many of them.
    return [r for group in itertools.zip_longest(*by_pool) for r in group if r is not None]


def grpo_run(cfg, settings: CopySettings, *, per_pool: int = 16, test_n: int = 1000) -> Path:
    """GRPO across the training pools from RUN/warmup (``copy_run``), paid by ``cfg.reward`` (accuracy alone in the
    shipped recipes; ``reward.token_weight`` prices tokens too); exports RUN/final."""
    from .trainer import build_trainer, check_same_prompt, export, load_model, load_weights

    from ..conductor.manifest import read_manifest

    warmup = read_manifest(cfg.output_dir / "warmup")
    if warmup.ranking != settings.ranking:
        raise ValueError(f"{cfg.output_dir / 'warmup'} was copied with the pools' profiles per {warmup.ranking}, and GRPO was asked for "
                         f"--ranking {settings.ranking}: pass --ranking {warmup.ranking}, or copy again")
    # A warm-up trained on another prompt (e.g. a shipped conductor started from without its `prompt.show`) is refused.
    check_same_prompt(cfg.output_dir / "warmup", cfg)
    pools = training_pools(settings, cfg.pool_path)
    union, indices = union_pool(pools)
    exclude = held_out_texts(test_n, cfg.data.eval_seed)
    rows = grpo_rows(cfg, pools, indices, per_pool, settings.question_seed + 1, exclude)
    model, tokenizer = load_model(cfg)
    load_weights(model, cfg.output_dir / "warmup")
    trainer, reward = build_trainer(cfg, model=model, tokenizer=tokenizer, pool_spec=union, warmup=False, rows=rows)
    started = time.monotonic()
    trainer.train()
    extra = {"stage": "GRPO across generated pools after search-and-copy", "grpo_rows": len(rows), "pools": len(pools),
             "copy": {"settings": {"ranking": settings.ranking}},  # how its pools are shown (ConductorManifest.ranking)
             "train_seconds": round(time.monotonic() - started, 1), "global_step": trainer.state.global_step}
    return export(trainer.model, trainer.processing_class, cfg.output_dir / "final", cfg, extra=extra)


def search_size(text: str) -> tuple[int, int]:
    """``SCREEN,RANK``: two whole numbers of at least 1 (an argparse type)."""
    import argparse

    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"takes SCREEN,RANK, two whole numbers of at least 1, e.g. 80,160 (got {text!r})")
    return int(parts[0]), int(parts[1])


def add_search_arguments(ap) -> None:
    """The options that decide the search's examples and targets (``CopySettings``): the command line of the search
    and of the copy-data check, which must name a file's settings as the search was given them."""
    ap.add_argument("--pools", type=int, default=CopySettings.pools)
    ap.add_argument("--per-pool", type=int, default=CopySettings.per_pool)
    ap.add_argument("--training-pool-examples", type=int, default=CopySettings.training_pool_examples)
    ap.add_argument("--targets", choices=TARGETS, default=CopySettings.targets,
                    help="the copy's targets: each pool's own searched plans; the rank lookup's plans made concrete on each pool; "
                         "or mixed: the training pool's own, the rank lookup's on generated pools")
    ap.add_argument("--token-weight", type=float, default=SearchSettings.token_weight,
                    help="the price, per 1,000 tokens, that the plan search and the rank lookup rank plans by (the copy's targets)")
    ap.add_argument("--training-pool-token-weight", type=float, default=None,
                    help="the price the training pool's own plans are searched at (default: --token-weight); the generated pools' "
                         "targets keep --token-weight")
    ap.add_argument("--training-pool-search", type=search_size, default=None, metavar="SCREEN,RANK",
                    help="the questions a bucket the training pool's own plans are searched on, e.g. 80,160 (the lookups' search, "
                         "sim_eval.LOOKUP_SEARCH); default: the search's own; the generated pools keep theirs")
    ap.add_argument("--rank-questions", type=int, default=CopySettings.rank_questions,
                    help="training-side questions per bucket and training pool the rank lookup (the copy's targets on generated pools) is found on")
    ap.add_argument("--ranking", choices=list(RANKINGS), default=None,
                    help="every training pool's profile and the rank lookup's places: per area (4 ranking lines) or per subtopic (16); "
                         "default area, and for --stage grpo as RUN/warmup was copied")


def search_settings(args) -> CopySettings:
    """``CopySettings`` from the options of ``add_search_arguments``."""
    return CopySettings(pools=args.pools, per_pool=args.per_pool, training_pool_examples=args.training_pool_examples, targets=args.targets,
                        rank_questions=args.rank_questions, ranking=args.ranking or CopySettings.ranking, search=SearchSettings(token_weight=args.token_weight),
                        training_pool_token_weight=args.training_pool_token_weight, training_pool_search=args.training_pool_search)


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    from .config import load_train_config

    ap = argparse.ArgumentParser(description="Search-and-copy a general conductor over generated SIMULATED pools (world v3).")
    ap.add_argument("config")
    add_search_arguments(ap)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-batches", type=int, default=None, help="stop the copy after this many batches (a time box)")
    ap.add_argument("--copy-max-minutes", type=float, default=None, help="stop the copy after this much time (a time box)")
    ap.add_argument("--output-dir", default=None)
    ap.add_argument("--stage", choices=["search", "copy", "grpo", "both"], default="copy",
                    help="search: the plan search alone, into RUN/copy_data.json.gz; copy: search (or --copy-data) then copy; "
                         "grpo: GRPO from RUN/warmup; both: copy then GRPO")
    ap.add_argument("--copy-data", default=None, help="the copy data a `--stage search` wrote: the copy loads it instead of searching")
    ap.add_argument("--init", default=None,
                    help="copy from this trained conductor (a directory or builtin:NAME, with this config's model and LoRA) instead of a fresh adapter")
    ap.add_argument("--grpo-per-pool", type=int, default=16)
    ap.add_argument("--set", action="append", default=[], help="override a config value, e.g. grpo.max_steps=20")
    args = ap.parse_args(argv)
    if args.max_batches is not None and args.max_batches < 1:
        ap.error(f"--max-batches must be at least 1 (got {args.max_batches}); leave it out to copy every epoch in full")
    if args.copy_max_minutes is not None and args.copy_max_minutes <= 0:
        ap.error(f"--copy-max-minutes must be above 0 (got {args.copy_max_minutes}); leave it out to copy every epoch in full")
    if args.copy_data and args.stage not in ("copy", "both"):
        ap.error(f"--copy-data is read by --stage copy or both (got --stage {args.stage})")
    if args.init and args.stage not in ("copy", "both"):
        ap.error(f"--init is read by --stage copy or both (got --stage {args.stage}); GRPO starts from RUN/warmup")
    if args.rank_questions < 1:
        ap.error(f"--rank-questions must be at least 1 (got {args.rank_questions})")
    if args.token_weight < 0:
        ap.error(f"--token-weight must be 0 or more (got {args.token_weight})")
    if args.token_weight != SearchSettings.token_weight and args.stage == "grpo":
        ap.error("--token-weight prices the copy's targets; GRPO's price is reward.token_weight (--set reward.token_weight=...)")
    if args.training_pool_token_weight is not None and args.training_pool_token_weight < 0:
        ap.error(f"--training-pool-token-weight must be 0 or more (got {args.training_pool_token_weight})")
    # Both shape only the training pool's own searched plans, which GRPO and a ranks-only copy never use.
    for flag, value, does, under_grpo in (
            ("--training-pool-token-weight", args.training_pool_token_weight, "prices",
             "the copy's targets; GRPO's price is reward.token_weight (--set reward.token_weight=...)"),
            ("--training-pool-search", args.training_pool_search, "sizes", "the copy's search; --stage grpo searches nothing")):
        if value is not None and args.stage == "grpo":
            ap.error(f"{flag} {does} {under_grpo}")
        if value is not None and args.targets == "ranks":
            ap.error(f"{flag} {does} the training pool's own searched plans: --targets ranks copies none (use mixed or search)")
    init = None
    if args.init:
        try:
            init = init_checkpoint(args.init, "--init").resolve()
        except TrainConfigError as exc:
            ap.error(str(exc))
    data_file = Path(args.copy_data).resolve() if args.copy_data else None
    if data_file is not None and not data_file.is_file():
        ap.error(f"--copy-data {args.copy_data}: no such file (write it with --stage search)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    overrides = {k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v for k, _, v in (x.partition("=") for x in args.set)}
    if args.output_dir:
        overrides["run.output_dir"] = str(Path(args.output_dir).resolve())  # from here, not from the config's folder
    cfg = load_train_config(args.config, overrides)
    settings = search_settings(args)
    if args.stage == "grpo" and args.ranking is None:  # GRPO shows the pools as its warm-up was copied on them
        from ..conductor.manifest import read_manifest

        settings = dataclasses.replace(settings, ranking=read_manifest(cfg.output_dir / "warmup").ranking)
    if args.stage == "search":
        print(search_run(cfg, settings))
    if args.stage in ("copy", "both"):
        print(copy_run(cfg, settings, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_batches=args.max_batches,
                       max_minutes=args.copy_max_minutes, data_file=data_file, init=init))
    if args.stage in ("grpo", "both"):
        try:
            print(grpo_run(cfg, settings, per_pool=args.grpo_per_pool))
        except TrainConfigError as exc:  # checked before the model loads: nothing is spent
            ap.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
