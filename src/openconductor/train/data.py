"""Training rows: the runtime's conductor prompt per question, with randomized pools and recursion rows.

Each row carries the prompt (``conductor_messages``, exactly as the runtime builds it), the hidden
reference for the reward, the pool indices the conductor was shown (randomized pools: a k-subset,
renumbered in the order shown) and, for recursive (round-2) rows, the previous answer it must
accept or revise. A round-2 row is its own prompt, so GRPO's per-group normalisation is a per-round
normalisation. Its previous answer comes from one single-worker run on the pool at build time (an
off-policy draft, right or wrong with that worker's skill); on-policy round-2 samples are drawn
inside the reward when ``recursion.blend_fraction`` > 0 (see ``WorkflowReward``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import pickle
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional, Sequence

from ..executor import review_previous, solve
from ..policies.base import Previous
from ..policies.baselines import GivenWorkflow
from ..conductor.prompt import conductor_messages
from ..pool import Pool, PoolSpec
from ..workflow import Step, Workflow
from ..workflow.wordings import SOLVE
from .config import TrainConfig, TrainConfigError


@dataclass(frozen=True)
class Item:
    question: str
    reference: Any  # a string, or whatever the grader compares against (a reasoning-gym entry, tests)
    task: str  # "simulated" or a grader kind
    domain: str = ""
    grader_options: dict[str, Any] = field(default_factory=dict)
    bare: str = ""  # the question without its task's answer-format instruction; "" where it has none

    def grading(self) -> str:
        """The row's grading column: the reference and grader options exactly as the grader takes them
        (empty for simulated items). Pickled, not JSON: graders compare tuples, int-keyed dicts and sets
        that JSON would turn into lists and string keys (an ARC grid scored 0.05 for the right answer).
        The column is written and read by the same training process, never loaded from outside."""
        if self.task == "simulated":
            return ""
        return base64.b64encode(pickle.dumps({"reference": self.reference, "options": self.grader_options})).decode("ascii")


@dataclass(frozen=True)
class TrainRow:
    """One row of the training dataset: a conductor prompt and what the reward needs to grade a completion
    of it. TRL hands every field to the reward as a column of that name (``WorkflowReward``)."""

    prompt: list[dict]  # the runtime's conductor messages (conductor_messages), for the pool shown
    question: str
    # For reading only: the reward grades from ``grading`` when a row has one.
    reference: str = ""
    grading: str = ""  # the reference and grader options as the grader takes them (Item.grading); "" for simulated rows
    task: str = "simulated"  # "simulated" or a grader kind
    domain: str = ""
    workers: list[int] = field(default_factory=list)  # pool indices shown, in the order shown (randomized pools)
    names: list[str] = field(default_factory=list)  # the shown workers' names as the prompt writes them, if not the pool's own
    round: int = 1  # 2: a recursive round that sees ``previous`` and may accept it
    previous: str = ""
    blend: bool = False  # round 1 followed by an on-policy recursive round whose reward is blended in

    def columns(self) -> dict[str, Any]:
        """The row as the dataset stores it (every field a column)."""
        return asdict(self)


def shown_names(names: Optional[Sequence[str]], workers: Optional[Sequence[int]], spec: PoolSpec) -> tuple[str, ...]:
    """The workers' names as a row's prompt writes them: its own ``names``, else the pool's, for the indices shown."""
    if names:
        return tuple(names)
    return tuple(spec.workers[i].name for i in (workers if workers is not None else range(len(spec.workers))))

def shown_aliases(prompt, workers: Optional[Sequence[int]], spec: PoolSpec) -> tuple[tuple[str, int], ...]:
    """The ranking's words that name workers (``conductor.ranking.rank_aliases``) in a row's view of the pool, when the
    prompt binds them (``PromptSettings.rank_aliases``); a renamed view ranks the same workers."""
    if not (prompt.ids_follow_names and prompt.rank_aliases):
        return ()
    from ..conductor.ranking import rank_aliases

    return rank_aliases(spec.subset(list(workers)) if workers is not None else spec)


COLUMNS = tuple(TrainRow.__dataclass_fields__)


def decode_grading(column: str) -> tuple[Any, dict]:
    """(reference, grader options) from a row's grading column (``Item.grading``)."""
    decoded = pickle.loads(base64.b64decode(column))
    return decoded["reference"], dict(decoded["options"])


def load_items(cfg: TrainConfig, *, held_out: bool = False) -> list[Item]:
    d = cfg.data
    if d.kind == "simulated":
        from ..sim.world import make_questions

        from ..pool import load_pool
        from ..sim.world import Traits, solo_correct

        spec = load_pool(cfg.pool_path)
        traits = [Traits.from_spec(w) for w in spec.workers if w.provider == "simulated" and w.options.get("skills")]
        train = make_questions(d.n_train, d.seed, d.domains)
        if not held_out:
            if d.skip_solved_by_all and traits:
                train = [q for q in train if not all(solo_correct(q.text, t) for t in traits)]
            return [Item(q.text, q.reference, "simulated", q.domain) for q in train]
        # Held-out questions never repeat a training question (filtered or not); they are drawn stratified
        # on which workers solve them alone (variance reduction: single workers score their expected accuracy).
        held = make_questions(d.n_eval, d.eval_seed, d.domains, exclude=frozenset(q.text for q in train), stratify=traits or None)
        return [Item(q.text, q.reference, "simulated", q.domain) for q in held]
    if d.kind == "tasks":
        return _task_items(cfg, held_out=held_out)
    path = cfg.path(d.path or "")
    if not path.exists():
        raise TrainConfigError(f"data.path not found: {path}")
    items = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrainConfigError(f"{where}: not valid JSON ({exc})") from exc
        if not isinstance(row, dict) or not {"question", "reference", "task"} <= set(row):
            raise TrainConfigError(f"{where}: need a JSON object with question, reference, task")
        options = row.get("grader_options", {})
        if not isinstance(options, dict):
            raise TrainConfigError(f"{where}: grader_options must be a JSON object, got {type(options).__name__}")
        # Scalars become strings (what the string graders compare); objects and lists stay as they are.
        reference = row["reference"] if isinstance(row["reference"], (dict, list)) else str(row["reference"])
        items.append(Item(str(row["question"]), reference, str(row["task"]), str(row.get("domain", "")), options))
    split = max(1, len(items) // 10)
    return items[:split] if held_out else items[split:]


def _task_items(cfg: TrainConfig, *, held_out: bool) -> list[Item]:
    """Questions of registered tasks (``data.tasks``), each with its task's grader; the domain is the task's
    name, so the training metrics break down per task. Held-out questions never repeat a training one."""
    from ..tasks import TaskError, load_task

    d = cfg.data
    names = list(d.tasks)

    def split(total: int) -> list[int]:
        return [total // len(names) + (1 if i < total % len(names) else 0) for i in range(len(names))]

    def load(name: str, count: int, seed: int, offset: int = 0):
        # A task's own offset skips questions that training never reads (kept for evaluation).
        options = dict(d.task_options.get(name, {}))
        offset += options.pop("offset", 0)
        try:
            return load_task(name, limit=count, seed=seed, offset=offset, **options)
        except TaskError as exc:
            raise TrainConfigError(f"data.tasks: {exc}") from exc

    loaded = []  # (name as configured, task built from the training seed, n_train, n_eval) per task
    for name, n_train, n_eval in zip(names, split(d.n_train), split(d.n_eval)):
        train = load(name, n_train, d.seed)
        if len(train.questions) < n_train:
            raise TrainConfigError(f"data.tasks: {train.name!r} has {len(train.questions)} questions, fewer than the {n_train} "
                                   f"training ones asked of it (data.n_train split over {len(names)} tasks); lower data.n_train")
        if any(train.name == other.name for _, other, _, _ in loaded):
            raise TrainConfigError(f"data.tasks names {train.name!r} twice ({name!r}); list each task once")
        loaded.append((name, train, n_train, n_eval))
    # One exclusion set over every task: no held-out question repeats any training question.
    seen = {train.text(q) for _, train, n_train, _ in loaded for q in train.questions[:n_train]}
    per_task: list[list[Item]] = []
    for name, train, n_train, n_eval in loaded:
        if not held_out:
            chosen, task = train.questions[:n_train], train
        elif n_eval == 0:
            continue
        else:
            # Procedural tasks draw held-out questions from eval_seed; a fixed dataset returns the same
            # questions whatever the seed, so its held-out ones come after the training ones.
            task = load(name, n_eval + n_train, d.eval_seed)
            fresh = _unseen(task, seen)
            if len(fresh) < n_eval:
                task = load(name, n_eval, d.seed, offset=n_train)
                fresh = _unseen(task, seen)
            if len(fresh) < n_eval:
                raise TrainConfigError(f"data.tasks: {train.name!r} has {len(fresh)} held-out questions that are not training ones, "
                                       f"{n_eval} asked (data.n_eval split over {len(names)} tasks); lower data.n_eval or data.n_train")
            chosen = fresh[:n_eval]
            seen.update(task.text(q) for q in chosen)
        per_task.append([Item(task.text(q), q.reference, q.grader, task.name, dict(q.grader_options), bare=q.prompt if task.instruction else "")
                         for q in chosen])
    # Tasks in rotation, so every stretch of training sees all of them.
    return [item for group in itertools.zip_longest(*per_task) for item in group if item is not None]


def _unseen(task, seen: set[str]) -> list:
    """The task's questions whose text is not in ``seen``, each text once."""
    out, texts = [], set(seen)
    for q in task.questions:
        text = task.text(q)
        if text not in texts:
            texts.add(text)
            out.append(q)
    return out


def sample_subset(n_workers: int, k_min: int, k_max: int, rng: random.Random) -> list[int]:
    """A random k-subset of worker indices in random order (that order is the new numbering)."""
    k = rng.randint(min(k_min, n_workers), min(k_max, n_workers))
    return rng.sample(range(n_workers), k)


def prompt_for(item: Item, spec: PoolSpec, cfg: TrainConfig, previous: Optional[str | Previous] = None) -> list[dict]:
    """The conductor's messages for ``item``; ``previous``: a recursive round's (``executor.review_previous``: the round's
    steps and verdicts, as the runtime shows them), or its answer alone."""
    p = cfg.prompt
    return conductor_messages(
        item.question, spec, max_steps=p.max_steps, show=p.show, fine_grained=p.fine_grained, examples=p.examples, style=p.style,
        previous=Previous(answer=previous) if isinstance(previous, str) else previous,
    )


async def _draft_answers(spec: PoolSpec, items: list[Item], indices: list[list[int]], seed: int) -> list[Previous]:
    """One single-worker round per item: what a recursive row is shown (its answer and its steps' verdicts)."""
    rng = random.Random(f"drafts|{seed}")
    async with Pool(spec.for_execution()) as pool:

        async def one(item: Item, shown: list[int]) -> Previous:
            view = pool.view(shown)
            worker = rng.randrange(len(shown))
            wf = Workflow((Step(worker, SOLVE, ()),))
            run = await solve(item.question, GivenWorkflow(wf, name="draft"), view, seed=seed)
            return replace(review_previous(run.steps), answer=run.final_answer)

        return list(await asyncio.gather(*(one(i, s) for i, s in zip(items, indices))))


def build_rows(cfg: TrainConfig, spec: PoolSpec, items: list[Item]) -> list[TrainRow]:
    rng = random.Random(f"rows|{cfg.data.seed}")
    n = len(spec.workers)
    rows = []
    shown_all: list[list[int]] = []
    for item in items:
        shown = sample_subset(n, cfg.randomize.k_min, cfg.randomize.k_max, rng) if cfg.randomize.enabled else list(range(n))
        shown_all.append(shown)
        rows.append(_row(item, shown, spec, cfg, round_=1, blend=rng.random() < cfg.recursion.blend_fraction))
    n_rec = int(round(cfg.recursion.fraction * len(items)))
    if n_rec:
        chosen = rng.sample(range(len(items)), n_rec)
        drafts = asyncio.run(_draft_answers(spec, [items[i] for i in chosen], [shown_all[i] for i in chosen], cfg.data.seed))
        rec_rows = [_row(items[i], shown_all[i], spec, cfg, round_=2, previous=d) for i, d in zip(chosen, drafts)]
        # Interleave so that every part of training sees both rounds.
        step = max(1, len(rows) // max(1, len(rec_rows)))
        for j, row in enumerate(rec_rows):
            rows.insert(min(len(rows), (j + 1) * step + j), row)
    return rows


def with_bare_questions(cfg: TrainConfig, spec: PoolSpec, shown: list[TrainRow], items: list[Item], share: float) -> list[TrainRow]:
    """The warm-up's rows with ``share`` of each domain's prompts asking the bare question (no answer-format
    instruction), the targets unchanged. A prompt's consecutive targets keep one form: they share its
    forward pass. Rows whose question has no bare form stay as they are."""
    bare = {item.question: item for item in items if item.bare}
    # Indices of consecutive rows with the same prompt.
    runs = [list(run) for _, run in itertools.groupby(range(len(shown)), key=lambda i: shown[i].prompt)]
    by_domain: dict[str, list[list[int]]] = {}
    for run in runs:
        if shown[run[0]].question in bare:
            by_domain.setdefault(shown[run[0]].domain, []).append(run)
    rng = random.Random(f"bare|{cfg.data.seed}")
    out = list(shown)
    for domain in sorted(by_domain):
        candidates = by_domain[domain]
        for run in rng.sample(candidates, int(share * len(candidates) + 0.5)):  # half up: 1 of 1 at 0.5, not 0
            row = shown[run[0]]
            source = bare[row.question]
            item = replace(source, question=source.bare)
            # A recursive row keeps the round it was shown (its steps' verdicts): only the question's text changes.
            prompt = ([{**m, "content": m["content"].replace(row.question, item.question, 1)} for m in row.prompt] if row.round > 1
                      else prompt_for(item, spec.subset(row.workers), cfg))
            stripped = replace(row, question=item.question, prompt=prompt)
            for i in run:
                out[i] = stripped
    return out


def _row(item: Item, shown: list[int], spec: PoolSpec, cfg: TrainConfig, *, round_: int, previous: Optional[Previous] = None, blend: bool = False) -> TrainRow:
    return TrainRow(
        prompt=prompt_for(item, spec.subset(shown), cfg, previous),
        question=item.question,
        reference=item.reference if isinstance(item.reference, str) else json.dumps(item.reference, sort_keys=True, default=repr),
        grading=item.grading(),
        task=item.task,
        domain=item.domain,
        workers=shown,
        round=round_,
        previous=previous.answer if previous is not None else "",
        blend=blend,
    )
