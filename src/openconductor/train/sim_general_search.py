"""``sim_general``'s search stage and its cache (SIMULATED): the plan search over the training pools, the examples it makes (prompt and
target per question; ``sim_general.py`` runs the stages), and the one file that carries them, so the slow plan search
runs once (CPU) and the copy anywhere (a GPU box).

``python -m openconductor.train.sim_general CONFIG --stage search`` writes ``RUN/copy_data.json.gz``: the
settings it was searched with (``key``), and per training pool each example's question, its bucket's best
plan with its search scores, its prompt (chat messages) and its target as searched, plus the rows of
``copy_targets.jsonl``. ``load`` rebuilds the examples from the questions and plans with the code that
loads them (prompts and targets are cheap; only the search is slow), so a change of the prompt or target
wording since the search is used, not silently undone; it is logged. A file searched with other settings,
another training pool or another held-out set is refused (``CopyDataError``).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
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
from ..sim.plan_search import BUCKET, SEARCH_SEED, Scored, SearchSettings, search_pool
from ..sim.pools import DOMAIN_AREA, RANKINGS, generate_pool, pool_spec, renamed, with_profile
from ..sim.questions import SUBTOPIC_NAMES, Question
from ..sim.world_v3 import Profile, make_questions
from ..workflow import Workflow
from ..workflow.wordings import AGGREGATE, CHECK, IMPLEMENT, PLAN, SOLVE
from .config import TrainConfigError

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
    # per-bucket lookup it is held to is searched on ``evaluation.simulated.LOOKUP_SEARCH`` (80, 160), three times the copy's default.
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
    searched: list[Searched] = field(default_factory=list)  # what the examples were made from (saved in the copy-data file)


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
    ``settings.search``'s; at ``evaluation.simulated.LOOKUP_SEARCH``'s they are the lookups' own, ``lookup_search_questions``)."""
    return make_questions(48 * (search or settings.search).questions, settings.search_seed, exclude=exclude)


def own_search_questions(settings: CopySettings, exclude: frozenset[str]) -> list[Question]:
    """The questions the training pool's own plans are searched on where ``training_pool_search`` sizes that search
    apart; else none (it shares ``search_questions``)."""
    return search_questions(settings, exclude, own_search(settings)) if settings.training_pool_search else []


def rank_table_of(pools: list[PoolSpec], searched: list[Question], settings: CopySettings, ranking: str = "area") -> dict:
    """The rank lookup across ``pools``, on the first ``settings.rank_questions`` of each bucket of ``searched``
    (``ranking``: over the area's measured ranking, or the subtopic's, ``sim.pools.RANKINGS``)."""
    from ..evaluation.simulated import rank_table

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
    from ..evaluation.simulated import rank_lookup_plans

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
                         "evaluation.simulated.LOOKUP_SEARCH); default: the search's own; the generated pools keep theirs")
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


FORMAT = "openconductor-copy-data/1"
FILE_NAME = "copy_data.json.gz"


class CopyDataError(ValueError):
    """A copy-data file that is missing, unreadable, or searched for another run than this one."""


def data_key(settings: CopySettings, training_pool: Path, *, test_n: int, eval_seed: int) -> dict:
    """What the search's results depend on: its settings, the training pool file and the held-out questions it
    excluded (not the prompt's shape: prompts and targets are rebuilt when the data loads)."""
    copy = dataclasses.asdict(settings)
    if copy["targets"] == "search":  # the targets' source as data written before it could be chosen recorded it: absent
        del copy["targets"], copy["rank_questions"]
    if copy["ranking"] == "area":  # likewise the ranking, before it could be chosen
        del copy["ranking"]
    if copy["training_pool_token_weight"] is None:  # and the training pool's own price
        del copy["training_pool_token_weight"]
    if copy["training_pool_search"] is None:  # and its search's size
        del copy["training_pool_search"]
    else:
        copy["training_pool_search"] = list(copy["training_pool_search"])  # as JSON reads it back
    return {"copy": copy, "training_pool_sha256": hashlib.sha256(Path(training_pool).read_bytes()).hexdigest(),
            "test_n": test_n, "eval_seed": eval_seed}


def save(data: CopyData, path: Path, key: dict) -> Path:
    """Write ``data`` (built by ``sim_general.build``, so it holds what it was searched from) to ``path``."""
    if len(data.searched) != len(data.groups):
        raise ValueError("copy data without its search results (CopyData.searched) cannot be saved")
    pools = []
    for s, (prompts, targets) in zip(data.searched, data.groups):
        pools.append({"name": s.spec.name, "examples": [
            {"question": dataclasses.asdict(q), "plan": b.plan.to_dict(), "score": b.score, "accuracy": b.accuracy, "tokens": b.tokens,
             "questions": b.questions, "prompt": p, "target": t}
            for q, b, p, t in zip(s.questions, s.best, prompts, targets)]})
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"format": FORMAT, "key": key, "seconds": data.seconds, "pools": pools, "rows": data.rows}, fh)
    return path


def load(path: Path, key: dict, training_pool: Path, prompt: PromptShape) -> CopyData:
    """The copy data in ``path``, checked against this run's ``key`` and rebuilt with this code's prompts
    and targets (the pools are regenerated from their seeds: the file names them, it does not hold them)."""
    raw = _read(path)
    found = {k: (raw.get("key") or {}).get(k) for k in key}  # fields this code does not check are ignored
    if found != key:
        raise CopyDataError(f"{path} was searched for another run: {_differences(found, key)}; "
                            "run `--stage search` again with this run's settings, or pass the settings it was searched with")
    settings = _settings(key["copy"])
    specs = training_pools(settings, training_pool)
    names = [p["name"] for p in raw["pools"]]
    if names != [s.name for s in specs]:
        raise CopyDataError(f"{path}: its pools {names[:3]}... are not this code's training pools {[s.name for s in specs][:3]}...: "
                            "the pool generator changed since the search; run `--stage search` again")
    searched = [Searched(spec, [Question(**e["question"]) for e in p["examples"]],
                         [Scored(Workflow.from_dict(e["plan"]), e["score"], e["accuracy"], e["tokens"], e["questions"]) for e in p["examples"]])
                for spec, p in zip(specs, raw["pools"])]
    data = examples(searched, prompt, raw["seconds"])
    stale = sum(p != e["prompt"] or t != e["target"]
                for (prompts, targets), pool in zip(data.groups, raw["pools"]) for p, t, e in zip(prompts, targets, pool["examples"]))
    if stale:
        log.warning("%s: %d of %d examples' prompts or targets differ from this code's; training on this code's", path, stale, len(data.rows))
    return data


def training_questions(path: Path) -> frozenset[str]:
    """The texts of every question a copy-data file's conductor was trained or searched on: its examples' (stored) and
    its search's (drawn again from its key), so that a held-out set drawn with another seed than the one the search
    excluded can be checked against them."""
    raw = _read(path)
    key = raw["key"]
    settings = _settings(key["copy"])
    exclude = held_out_texts(key["test_n"], key["eval_seed"])
    texts = {e["question"]["text"] for p in raw["pools"] for e in p["examples"]}
    texts |= {q.text for q in search_questions(settings, exclude) + own_search_questions(settings, exclude)}
    return frozenset(texts)


def _read(path: Path) -> dict:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError as exc:
        raise CopyDataError(f"copy data not found: {path} (write it with `--stage search`)") from exc
    except (OSError, EOFError, ValueError) as exc:
        raise CopyDataError(f"{path} is not a copy-data file ({FILE_NAME}, gzip JSON): {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CopyDataError(f"{path}: format {raw.get('format') if isinstance(raw, dict) else None!r}, expected {FORMAT!r}")
    return raw


def _settings(copy: dict) -> CopySettings:
    return CopySettings(**{**copy, "search": SearchSettings(**copy["search"])})


def _differences(found: dict, wanted: dict, prefix: str = "") -> str:
    """The settings that differ, as ``name: file's value != this run's`` (a setting a key leaves out is at its default:
    keys omit defaults that older files never recorded)."""
    out = []
    for k in sorted(set(found) | set(wanted)):
        a, b = found.get(k), wanted.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = _differences(a, b, f"{prefix}{k}.")
            out += [inner] if inner else []
        elif a != b:
            shown = [repr(v) if k in side else "its default" for v, side in ((a, found), (b, wanted))]
            out.append(f"{prefix}{k}: {shown[0]} in the file != {shown[1]} in this run")
    return "; ".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    """Check a copy-data file against a training config at the issue's scale (the defaults of
    ``sim_general``), as ``--stage copy --copy-data FILE`` would load it."""
    import argparse

    from .config import load_train_config

    ap = argparse.ArgumentParser(description="Check that a copy-data file loads for a config (before carrying it to another machine).")
    ap.add_argument("config")
    ap.add_argument("file")
    ap.add_argument("--test-n", type=int, default=1000)
    add_search_arguments(ap)  # as the search was given them
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = load_train_config(args.config)
    shape = PromptShape.of(cfg)
    try:
        data = load(Path(args.file), data_key(search_settings(args), cfg.pool_path, test_n=args.test_n, eval_seed=cfg.data.eval_seed), cfg.pool_path, shape)
    except CopyDataError as exc:
        ap.error(str(exc))
    print(f"{args.file}: {len(data.rows)} examples over {len(data.groups)} pools (searched in {data.seconds:.0f} s): loads for {args.config}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
