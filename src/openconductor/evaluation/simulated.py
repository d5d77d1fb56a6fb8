"""Evaluation tables on world-v3 pools (SIMULATED): a conductor against the baselines that keep it honest.

Every system answers the same held-out questions through the executor on the pool, and is graded by the
world's gold answers. Baselines: the best single worker and the oracle per-domain router (both by the
pool's declared accuracies), MoA (7 proposers and a random aggregator), and lookup tables found by the
plan search (``sim/plan_search.py``) on training-side questions: one plan per domain, per subtopic and
per bucket (subtopic x level; on an unseen pool: the per-pool search re-run). A conductor writes one plan
per question, greedily under the runtime grammar, with the pool shown as it was trained. Differences come
with paired-bootstrap 95 % intervals over the questions; a mean over pools resamples each pool's
questions (``summary.pooled_bootstrap``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator, Literal, Optional, Sequence

from ..executor import solve
from ..policies.base import PlanRequest, make_policy
from ..policies.baselines import GivenWorkflow
from ..conductor.prompt import conductor_messages
from ..conductor.ranking import binding
from ..pool import Pool, PoolSpec, PoolView
from ..sim.plan_search import BUCKET, GROUPINGS, SEARCH_SEED, Scored, SearchSettings, at_ranks, rank_search, search_pool
from ..sim.pools import RANKINGS, SimPool, generate_pool, pool_spec
from ..sim.questions import DOMAINS, Question
from ..sim.world import grade_simulated
from ..sim.world_v3 import Profile, make_questions
from ..workflow import Step, Workflow, WorkflowError, WorkflowFormat, parse_and_validate
from ..workflow.wordings import SOLVE
from .summary import paired_bootstrap


@dataclass
class Result:
    system: str
    correct: list[int]
    tokens: list[int]
    steps: list[int] = field(default_factory=list)
    parsed: float = 1.0

    @property
    def accuracy(self) -> float:
        return 100.0 * sum(self.correct) / max(1, len(self.correct))

    @property
    def mean_tokens(self) -> float:
        return sum(self.tokens) / max(1, len(self.tokens))


async def _execute(spec: PoolSpec, questions: Sequence[Question], plans: Sequence[Optional[Workflow]], concurrency: int = 64) -> list[tuple[int, int]]:
    gate = asyncio.Semaphore(concurrency)
    async with Pool(spec.for_execution()) as pool:

        async def one(q: Question, plan: Optional[Workflow]) -> tuple[int, int]:
            if plan is None:
                return 0, 0
            async with gate:
                run = await solve(q.text, GivenWorkflow(plan), pool, seed=0, stream_tokens=False)
            return int(grade_simulated(run.final_answer, q.reference)[1]), run.totals.usage.total_tokens

        return list(await asyncio.gather(*(one(q, p) for q, p in zip(questions, plans))))


def run_plans(name: str, spec: PoolSpec, questions: Sequence[Question], plans: Sequence[Optional[Workflow]], extra_tokens: Optional[list[int]] = None) -> Result:
    done = asyncio.run(_execute(spec, questions, plans))
    tokens = [t + (extra_tokens[i] if extra_tokens else 0) for i, (_, t) in enumerate(done)]
    return Result(name, [c for c, _ in done], tokens, [len(p.steps) for p in plans if p is not None],
                  sum(p is not None for p in plans) / max(1, len(plans)))


def declared(spec: PoolSpec) -> list[Profile]:
    return [Profile.from_spec(w) for w in spec.workers]


def single_plans(spec: PoolSpec, questions: Sequence[Question]) -> dict[str, list[Workflow]]:
    """The best single worker and the oracle per-domain router, by the pool's declared accuracies."""
    profiles = declared(spec)
    best = max(range(len(profiles)), key=lambda i: sum(profiles[i].skills.get(d, 0.0) for d in DOMAINS))
    router = {d: max(range(len(profiles)), key=lambda i: profiles[i].skills.get(d, 0.0)) for d in DOMAINS}
    one = lambda i: Workflow((Step(i, SOLVE, ()),))  # noqa: E731
    return {f"best single worker ({spec.workers[best].name})": [one(best)] * len(questions),
            "oracle per-domain router": [one(router[q.domain]) for q in questions]}


# The benchmarks' lookup tables are searched on more training-side questions a group (240) than the copy's and the
# per-pool search (80), so that a table's choice is not its search's noise.
LOOKUP_SEARCH = SearchSettings(screen=80, rank=160)


def lookup_search_questions(held_out: frozenset[str], settings: SearchSettings = LOOKUP_SEARCH) -> list[Question]:
    """The training-side questions a lookup is searched on (every bucket's, ``SEARCH_SEED``; ``held_out``: test texts excluded)."""
    return make_questions(48 * settings.questions, SEARCH_SEED, exclude=held_out)


def lookup_plans(spec: PoolSpec, questions: Sequence[Question], search_questions: Sequence[Question], labels: Sequence[str],
                 settings: SearchSettings) -> dict[str, list[Workflow]]:
    """Per grouping label, the search's lookup table applied to ``questions``."""
    out = {}
    for label in labels:
        key: Callable[[Question], Hashable] = GROUPINGS[label]
        tables = search_pool(declared(spec), search_questions, key, settings)
        out[f"best lookup: one plan per {label}"] = [tables[key(q)][0].plan for q in questions]
    return out


def rank_table(specs: Sequence[PoolSpec], questions: Sequence[Question], label: str,
               token_weight: float = SearchSettings.token_weight, ranking: str = "area") -> dict[Hashable, Scored]:
    """One plan over ranks per group (``GROUPINGS[label]``), found across ``specs`` (the training pools) on
    training-side ``questions``: a lookup that names no worker, for pools it never saw. ``ranking``: whose
    places the ranks are (``sim.pools.RANKINGS``: the area's measured ranking, or the subtopic's)."""
    rank_of, place = RANKINGS[ranking]
    return rank_search([(declared(s), rank_of(s)) for s in specs], questions, GROUPINGS[label], token_weight, ranked_by=place)


def rank_lookup_plans(spec: PoolSpec, questions: Sequence[Question], table: dict[Hashable, Scored], label: str,
                      ranking: str = "area") -> list[Workflow]:
    """``rank_table``'s plans on one pool: each rank replaced by the worker of that rank in the question's area
    (or subtopic: the ``ranking`` the table was found with)."""
    rank_of, place = RANKINGS[ranking]
    order, key = rank_of(spec), GROUPINGS[label]
    return [at_ranks(table[key(q)].plan, order[place(q)]) for q in questions]


@dataclass
class UnseenPool:
    """One generated pool that no conductor trained on, with the baselines every unseen-pool table shows."""
    seed: int
    held_out: bool  # drawn with a family held out of training
    pool: SimPool
    spec: PoolSpec
    best_single: Result
    router: Result
    search: Result  # the per-pool search re-run: one plan per bucket, found on this pool's training-side questions
    moa: Result


def held_out_flags(count: int, held_out: Literal["alternate", "all", "none"] = "alternate") -> list[bool]:
    """For ``count`` pool seeds in order, whether each pool draws from the held-out families (``"alternate"``: every
    other one, starting with the second)."""
    return [held_out == "all" or (held_out == "alternate" and i % 2 == 1) for i in range(count)]


def unseen_pool(seed: int, held: bool, questions: Sequence[Question], searched_on: Sequence[Question],
                settings: SearchSettings = SearchSettings()) -> UnseenPool:
    """The generated pool of ``seed`` (``held``: drawn from the held-out families) and its baselines on ``questions``;
    the search re-run finds its tables on ``searched_on`` (``lookup_search_questions``, never ``questions``)."""
    pool = generate_pool(seed, held_out=held)
    spec = pool_spec(pool)
    best, router = [run_plans(k, spec, questions, v) for k, v in single_plans(spec, questions).items()]
    by_bucket = lookup_plans(spec, questions, searched_on, [BUCKET], settings)[f"best lookup: one plan per {BUCKET}"]
    return UnseenPool(seed, held, pool, spec, best, router, run_plans("search", spec, questions, by_bucket),
                      run_plans("MoA", spec, questions, moa_plans(spec, questions)))


def unseen_pools(seeds: Sequence[int], questions: Sequence[Question], *, held_out: Literal["alternate", "all", "none"] = "alternate",
                 settings: SearchSettings = SearchSettings()) -> Iterator[UnseenPool]:
    """Per seed, ``unseen_pool`` (which pools draw from the held-out families: ``held_out_flags``), one pool at a time
    so a table can print as it goes. The search re-run finds its tables on training-side questions, never on ``questions``."""
    searched_on = lookup_search_questions(frozenset(q.text for q in questions), settings)
    for seed, held in zip(seeds, held_out_flags(len(seeds), held_out)):
        yield unseen_pool(seed, held, questions, searched_on, settings)


def moa_plans(spec: PoolSpec, questions: Sequence[Question], seed: int = 0) -> list[Workflow]:
    async def plans() -> list[Workflow]:
        policy = make_policy("moa", proposers=7, aggregator="random")
        async with Pool(spec.for_execution()) as pool:
            return [(await policy.plan(PlanRequest(q.text, pool, seed=seed))).workflow for q in questions]

    return asyncio.run(plans())


def trained_ranking(checkpoint: str) -> str:
    """The ranking a conductor's copy showed every training pool by (``CopySettings.ranking``, recorded in its
    manifest): "subtopic" when its pools' profiles were measured per subtopic, else "area". Score it on pools shown
    the same way (``sim.pools.with_profile``); its rank words name places in that ranking."""
    from ..conductor.checkpoint import checkpoint_path
    from ..conductor.manifest import read_manifest

    return read_manifest(checkpoint_path(checkpoint)).ranking


def conductor_plans(checkpoint: str, spec: PoolSpec, questions: Sequence[Question], *, batch_size: int = 32,
                    model=None, temperature: float = 0.0, seed: int = 0, show: Optional[PoolView] = None) -> tuple[list[Optional[Workflow]], list[int]]:
    """(plan or None when it does not parse, the conductor's own tokens) per question, greedy (or sampled at
    ``temperature``, as GRPO's rollouts are) under the runtime grammar, prompted as the checkpoint's manifest
    says (``model``: (model, tokenizer) loaded already; ``show``: another view of the pool than the one it was
    trained with, a probe of what it reads)."""
    from ..decoding import generate_batch
    from ..conductor.checkpoint import checkpoint_path, load_checkpoint
    from ..conductor.manifest import read_manifest

    prompt = read_manifest(checkpoint_path(checkpoint)).prompt
    model, tokenizer = model or load_checkpoint(checkpoint_path(checkpoint))
    steps, fine = prompt.max_steps or 3, bool(prompt.fine_grained)
    messages = [conductor_messages(q.text, spec, max_steps=steps, show=show or prompt.show or "descriptions", fine_grained=fine,
                                   examples=bool(prompt.examples), style=prompt.style or "compact") for q in questions]
    names, aliases = binding(prompt, spec)
    fmt = WorkflowFormat(len(spec.workers), steps, fine_grained=fine, reason_chars=80, subtask_chars=96, names=names,
                         name_slots=bool(prompt.name_slots), aliases=aliases)
    texts = generate_batch(model, tokenizer, messages, max_new_tokens=192, temperature=temperature, seed=seed, batch_size=batch_size,
                           formats=[fmt] * len(messages))
    plans: list[Optional[Workflow]] = []
    for text in texts:
        try:
            plans.append(parse_and_validate(text, len(spec.workers), max_steps=steps, names=names, aliases=aliases))
        except WorkflowError:
            plans.append(None)
    own = [len(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]) + len(tokenizer(t)["input_ids"])
           for m, t in zip(messages, texts)]
    return plans, own


def table(results: Sequence[Result], against: Sequence[str]) -> str:
    """Markdown: accuracy, intervals against the named systems, steps, tokens and tokens relative to MoA."""
    by = {r.system: r for r in results}
    moa = next((r for r in results if r.system.startswith("MoA")), None)
    head = "| system | accuracy | " + " | ".join(f"vs {a} (points, 95% CI)" for a in against) + " | steps | tokens/q | vs MoA tokens |"
    lines = [head, "|---" * (5 + len(against)) + "|"]
    for r in results:
        cells = []
        for a in against:
            base = by.get(a)
            if base is None or base is r:
                cells.append("—")
            else:
                m, lo, hi = paired_bootstrap(r.correct, base.correct)
                cells.append(f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        steps = sum(r.steps) / len(r.steps) if r.steps else 0.0
        ratio = f"{r.mean_tokens / moa.mean_tokens:.3f}x" if moa and moa.mean_tokens else "—"
        lines.append(f"| {r.system} | {r.accuracy:.1f} | " + " | ".join(cells) + f" | {steps:.2f} | {r.mean_tokens:,.0f} | {ratio} |")
    return "\n".join(lines)
