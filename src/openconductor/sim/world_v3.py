"""World v3: questions that carry evidence. Nothing here is a model; every number measured with it is SIMULATED.

v2 (``sim/world.py``) shows a conductor nothing but a question's domain: difficulty, blind spots and
call noise are hashes of the text, so the best policy there is one workflow per domain. v3 keeps v2's
mechanics (competence, roles read from the subtask, plans, checks, anchoring, overload, self-bias,
per-call noise: ``decide`` below calls v2's) and adds what a reader of the question can see:

**Observable** (``sim/questions.py``; recovered from the text by keywords, so rephrasing keeps it):

* the *subtopic* (four per domain, e.g. number theory vs geometry): a worker's competence gets its own
  offset per subtopic (``options.subtopics``, probit units), so the best worker differs per subtopic;
* the *difficulty* (easy / medium / hard, announced by a cue in varied wording): it shifts every
  worker's competence (``LevelEffect.shift``) and changes what collaboration is worth (per level, the
  plan uplift is scaled and the plan-mislead, check bonus and repair margin shifted): on easy
  questions one strong worker is right and extra steps only cost or second-guess, on hard ones
  plan -> implement -> check pays.

**Hidden noise** on top, as in v2: the shared difficulty ``z(q)`` and each worker's blind spot
``b(q, w)`` within a bucket, and per-call noise of collaborative steps, all keyed by the text.

**Calibrated** so that a worker's accuracy alone, averaged over a domain's subtopics and levels, is its
``skills`` value (the paper's Table 7 for ``examples/pools/simulated_paper_v3.toml``): the per-domain
base ``c`` solves ``mean_{s,l} Phi(c + offset_s + shift_l) = skill``. MoA, self-reflection and the oracle
router then land within tolerance of the paper, and the best per-bucket plan beats the best per-domain
plan (``benchmarks/world_calibration.py --world v3``; docs/simulation.md).

**Context limits** (``options.context``, words): a worker shown more than that (the question plus the
earlier responses it sees) returns no answer, so a small-context model cannot aggregate long drafts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Mapping, NamedTuple, Optional, Sequence

from .. import worker_message
from ..worker_message import PREAMBLE, SUBTASK_PREFIX
from ..pool import WorkerSpec
from ..providers.simulated import register_responder
from . import world as v2
from .world import PARAMS, DomainParams, Outcome, Role, Seen, Traits, WorldParams
from .questions import DOMAINS, LEVELS, SUBTOPICS, Question, buckets, difficulty_of, draw, subtopic_of

WORLD = "paper-v3"
_PHI = NormalDist().cdf


@dataclass(frozen=True)
class LevelEffect:
    """What a difficulty level does (probit units; the domain's v2 parameters are the medium level's)."""

    shift: float = 0.0  # added to every worker's competence
    uplift: float = 1.0  # multiplies the domain's plan_uplift (what a good plan is worth)
    mislead: float = 0.0  # added to plan_mislead (what a bad plan costs)
    check: float = 0.0  # added to check_bonus (checking or combining an answer seen)
    fix: float = 0.0  # added to fix_margin (repairing a wrong answer seen)
    brk: float = 0.0  # added to break_margin (how far below competence a step overwrites what it saw)


@dataclass(frozen=True, eq=False)  # hashed by identity: the caches below key on it
class V3Params:
    base: WorldParams = PARAMS
    # Fitted with benchmarks/world_calibration.py --world v3 (by hand, on the lookup margins and the Table 7
    # rows): on easy questions a plan over-complicates (negative uplift) and a peer rarely repairs what
    # the solver got wrong (fix), so one worker is best and extra steps only cost; on hard ones a good
    # plan is worth 2.5x the domain's uplift, so plan -> implement -> check pays.
    levels: Mapping[str, LevelEffect] = field(default_factory=lambda: {
        "easy": LevelEffect(shift=1.0, uplift=-2.0, mislead=0.3, fix=0.8),
        "medium": LevelEffect(uplift=0.6),
        "hard": LevelEffect(shift=-1.0, uplift=2.5, mislead=-0.2, check=0.2, fix=-0.3),
    })


PARAMS_V3 = V3Params()


@functools.lru_cache(maxsize=1 << 16)
def bucket_of(text: str) -> tuple[str, str, str]:
    """(domain, subtopic, level) as the question's wording shows them: all the world reads."""
    domain = v2.domain_of(text)
    return domain, subtopic_of(text, domain), difficulty_of(text)


# ---------------------------------------------------------------------------------------------- workers


@dataclass(frozen=True)
class Profile:
    """A v3 worker: v2's traits plus per-subtopic offsets and a context limit."""

    name: str
    skills: Mapping[str, float]  # domain -> accuracy alone, averaged over the domain's subtopics and levels
    subtopics: Mapping[str, float] = field(default_factory=dict)  # "domain.subtopic" -> competence offset (probit)
    plan: float = 0.0
    check: float = 0.0
    implement: float = 0.0
    words: int = 100
    context: Optional[int] = None  # words it can read (question + responses in view); None: no limit
    _memo: dict = field(default_factory=dict, compare=False, repr=False)  # bucket -> Traits

    @classmethod
    def from_spec(cls, spec: WorkerSpec) -> "Profile":
        base = Traits.from_spec(spec)  # v2's checks (aptitude names)
        o = spec.options
        offsets = {str(k): float(v) for k, v in dict(o.get("subtopics", {})).items()}
        known = {f"{d}.{s}" for d in DOMAINS for s in SUBTOPICS[d]}
        unknown = sorted(set(offsets) - known)
        if unknown:
            raise ValueError(f"simulated worker {spec.name!r}: unknown subtopic(s) {unknown}; use domain.subtopic, one of {sorted(known)}")
        context = o.get("context")
        return cls(base.name, dict(base.skills), offsets, base.plan, base.check, base.implement, base.words,
                   None if context is None else int(context))

    def skill(self, domain: str, subtopic: str, level: str, params: V3Params = PARAMS_V3) -> float:
        """Its accuracy alone on questions of that bucket."""
        offsets = tuple(self.subtopics.get(f"{domain}.{s}", 0.0) for s in SUBTOPICS[domain])
        shifts = tuple(params.levels[lvl].shift for lvl in LEVELS)
        c = _base(float(self.skills.get(domain, 0.5)), offsets, shifts)
        return _PHI(c + self.subtopics.get(f"{domain}.{subtopic}", 0.0) + params.levels[level].shift)

    def traits(self, bucket: tuple[str, str, str], params: V3Params = PARAMS_V3) -> Traits:
        """v2's traits for a question of ``bucket``: its skill there as the domain's."""
        key = (bucket, id(params))
        if key not in self._memo:
            self._memo[key] = Traits(self.name, {bucket[0]: self.skill(*bucket, params)}, self.plan, self.check, self.implement, self.words)
        return self._memo[key]


@functools.lru_cache(maxsize=4096)
def _base(skill: float, offsets: tuple[float, ...], shifts: tuple[float, ...]) -> float:
    """c with mean over subtopics and levels of Phi(c + offset + shift) == skill (bisection)."""
    if skill <= 0.0 or skill >= 1.0:
        return -40.0 if skill <= 0.0 else 40.0  # certain outcomes (tests pin them with skill 0 or 1)
    lo, hi = -12.0, 12.0
    for _ in range(80):
        mid = (lo + hi) / 2
        mean = sum(_PHI(mid + o + s) for o in offsets for s in shifts) / (len(offsets) * len(shifts))
        lo, hi = (mid, hi) if mean < skill else (lo, mid)
    return (lo + hi) / 2


@functools.lru_cache(maxsize=64)
def level_params(domain: str, level: str, params: V3Params = PARAMS_V3) -> WorldParams:
    """v2's parameters with the domain's collaboration terms moved as ``level`` says."""
    e, base = params.levels[level], params.base
    d = base.domains[domain]
    moved = DomainParams(plan_ease=d.plan_ease, plan_uplift=d.plan_uplift * e.uplift, plan_mislead=max(0.0, d.plan_mislead + e.mislead),
                         check_bonus=d.check_bonus + e.check, fix_margin=max(0.0, d.fix_margin + e.fix))
    return dataclasses.replace(base, domains={**base.domains, domain: moved}, break_margin=max(0.1, base.break_margin + e.brk))


# -------------------------------------------------------------------------------------------- decisions


def decide(text: str, profile: Profile, role: Role, seen: Sequence[Seen] = (), params: V3Params = PARAMS_V3) -> Outcome:
    """v2's decision with the question's bucket applied to the worker and to the collaboration terms."""
    bucket = bucket_of(text)
    return v2.decide(text, profile.traits(bucket, params), role, seen, level_params(bucket[0], bucket[2], params))


def solo_correct(text: str, profile: Profile, params: V3Params = PARAMS_V3) -> bool:
    bucket = bucket_of(text)
    return v2.solo_correct(text, profile.traits(bucket, params), level_params(bucket[0], bucket[2], params))


def words_in_view(question: str, responses: Sequence[str]) -> int:
    """What a context limit counts: the question's words and those of every response the step sees."""
    return len(question.split()) + sum(len(r.split()) for r in responses)


def overflow(profile: Profile) -> str:
    """The reply of a worker shown more than its context: no final answer."""
    return f"({profile.name}, simulated) the input exceeds my context window of {profile.context} words; no answer."


def reply(profile: Profile, question: str, role: Role, seen: Sequence[Seen], responses: Sequence[str], params: V3Params = PARAMS_V3) -> str:
    """The text a worker writes for one step (``responses``: the raw texts of the steps it sees)."""
    if profile.context is not None and words_in_view(question, responses) > profile.context:
        return overflow(profile)
    return v2.render(profile.traits(bucket_of(question), params), role, decide(question, profile, role, seen, params))


role_of = functools.lru_cache(maxsize=1 << 14)(v2.role_of)  # the same subtasks recur across many runs


class PlanResult(NamedTuple):
    well_formed: bool
    correct: bool
    tokens: int  # every call's input and output words, as the simulated provider counts them


def run_plan(question: str, steps: Sequence[tuple[int, str, object]], profiles: Sequence[Profile], params: V3Params = PARAMS_V3) -> PlanResult:
    """A plan's outcome on one question, decided here without the executor: ``steps`` are (worker index,
    subtask, access: "all", () or earlier indices). The same decisions and token counts as the executor
    and ``paper_v3`` for that plan, step for step (a test compares them), without writing and re-reading
    the messages; searches over thousands of plans use it."""
    answers, tokens = step_answers(question, steps, profiles, params)
    return PlanResult(answers[-1] is not None, answers[-1] == v2.gold_answer(question), tokens)


def step_answers(question: str, steps: Sequence[tuple[int, str, object]], profiles: Sequence[Profile],
                 params: V3Params = PARAMS_V3) -> tuple[list[Optional[str]], int]:
    """``run_plan``'s run, with the final answer each step stated (None: none, e.g. a plan or an overflow), as a
    later round that reads those steps sees them; and the run's tokens."""
    bucket = bucket_of(question)
    wp = level_params(bucket[0], bucket[2], params)
    done: list[tuple[Seen, int, int]] = []  # each step as later steps see it, its response's words, its subtask's
    tokens, asked = 0, _words(question) + _FRAME_WORDS
    for i, (worker, subtask, access) in enumerate(steps):
        visible = [done[j] for j in (range(i) if access == "all" else access)]  # type: ignore[arg-type]
        profile, role = profiles[worker], role_of(subtask)
        tokens += asked + _words(subtask) + sum(w + s + _EARLIER_WORDS for _, w, s in visible)
        if profile.context is not None and _words(question) + sum(w for _, w, _ in visible) > profile.context:
            text = overflow(profile)
            done.append((Seen(role, profile.name), len(text.split()), _words(subtask)))
            tokens += len(text.split(" "))
        else:
            traits = profile.traits(bucket, params)
            out = v2.decide(question, traits, role, [s for s, _, _ in visible], wp)
            seen = Seen(role, profile.name, out.value if out.kind == "plan" else None, out.value if out.kind == "answer" else None)
            words, usage = _reply_words(traits.name, traits.words, role, out.kind)
            done.append((seen, words, _words(subtask)))
            tokens += usage
    return [seen.answer for seen, _, _ in done], tokens


# The worker message around the question, each earlier step and the subtask (worker_message.render).
_FRAME_WORDS = len(f"{PREAMBLE}\n\n<Overall task>\n\n</Overall task>\n\n{SUBTASK_PREFIX}".split())
_EARLIER_WORDS = len("<Subtask assigned to Agent 0>\n\n</Subtask assigned to Agent 0>\n<Agent 0 response>\n\n</Agent 0 response>".split())


@functools.lru_cache(maxsize=1 << 14)
def _words(text: str) -> int:
    return len(text.split())


@functools.lru_cache(maxsize=4096)
def _reply_words(name: str, words: int, role: Role, kind: str) -> tuple[int, int]:
    """(words a later step reads, tokens the provider bills) of v2's rendered reply (the simulated provider
    bills space-separated pieces); neither depends on the answer's value."""
    outcome = Outcome(kind, "P000000" if kind == "plan" else "0", True)  # type: ignore[arg-type]
    text = v2.render(Traits(name, {}, words=words), role, outcome)
    return len(text.split()), len(text.split(" "))


@register_responder(WORLD)
def paper_v3(spec: WorkerSpec, messages: list[dict], rng: random.Random) -> str:
    content = str(messages[-1].get("content", "")) if messages else ""
    question, role, seen = v2.read_context(content)
    context = worker_message.read(content)
    responses = [response for _, _, response in context.earlier] if context else []
    return reply(Profile.from_spec(spec), question, role, seen, responses)


# ------------------------------------------------------------------------------------------- questions


def bucket_counts(n: int, domains: Sequence[str] = DOMAINS) -> dict[tuple[str, str, str], int]:
    """``n`` split evenly over domains, then over each domain's subtopics x levels (largest remainder,
    in the fixed bucket order), so every bucket gets its share."""
    chosen = [b for b in buckets() if b[0] in domains]
    per = {b: n / len(chosen) for b in chosen}
    counts = {b: int(math.floor(v)) for b, v in per.items()}
    left = n - sum(counts.values())
    for b in sorted(chosen, key=lambda b: (-(per[b] - counts[b]), chosen.index(b)))[:left]:
        counts[b] += 1
    return counts


def make_questions(n: int, seed: int, domains: Sequence[str] = DOMAINS, exclude: frozenset[str] = frozenset(), *,
                   stratify: Optional[Sequence[Profile]] = None, params: V3Params = PARAMS_V3) -> list[Question]:
    """``n`` distinct questions, every bucket in its share, domains in rotation, none in ``exclude``.

    ``stratify``: the pool's workers; within each bucket the set is then drawn stratified on which of them
    solve a question alone (v2's allocation), so single workers score their expected accuracy on it to
    within rounding. Variance reduction only: the world's distribution is unchanged."""
    unknown = [d for d in domains if d not in SUBTOPICS]
    if unknown:
        raise ValueError(f"unknown simulated domain(s) {unknown}; choose from {list(DOMAINS)}")
    g = random.Random(f"questions-v3|{seed}")
    seen: set[str] = set(exclude)
    by_domain: dict[str, list[Question]] = {d: [] for d in domains}
    for bucket, count in bucket_counts(n, domains).items():
        drawn = _stratified(bucket, count, g, seen, stratify, params) if stratify else [_draw(bucket, g, seen) for _ in range(count)]
        by_domain[bucket[0]] += drawn
    for d in domains:
        g.shuffle(by_domain[d])
    out = []
    for i in range(max(len(v) for v in by_domain.values())):
        out += [by_domain[d][i] for d in domains if i < len(by_domain[d])]
    return out


def _draw(bucket: tuple[str, str, str], g: random.Random, seen: set[str], tries: int = 2000) -> Question:
    q = draw(bucket, g, seen, v2.gold_answer, tries)
    if q is None:
        raise ValueError(f"could not write another distinct simulated question of {bucket} (the templates are exhausted)")
    return q


def _stratified(bucket, count: int, g: random.Random, seen: set[str], workers: Sequence[Profile], params: V3Params) -> list[Question]:
    traits = [w.traits(bucket, params) for w in workers]
    wp = level_params(bucket[0], bucket[2], params)
    probs = v2.pattern_probabilities(bucket[0], traits, wp)
    wanted = v2._allocate(probs, count, [float(t.skills[bucket[0]]) for t in traits])
    found: dict[tuple[bool, ...], list[Question]] = {}
    out: list[Question] = []
    for pattern, k in sorted(wanted.items()):
        while len(found.get(pattern, [])) < k:
            q = _draw(bucket, g, seen, tries=200_000)
            found.setdefault(tuple(v2.solo_correct(q.text, t, wp) for t in traits), []).append(q)
        out += found[pattern][:k]
    return out
