"""World v2: a simulated pool calibrated to the paper's constrained-setting table. Nothing here is a model.

Every number measured with it is SIMULATED. It exists so that conductors can be trained and compared on
CPU in minutes, against a stand-in whose baselines behave as the paper measured them (Table 7: single
workers, Mixture-of-Agents, self-reflection, an oracle router): see ``benchmarks/world_calibration.py``.

**Questions** come from per-domain templates (MATH500-, MMLU-, RLPR- and LiveCodeBench-flavoured). A
question shows its domain only through its wording; its gold answer and its hidden difficulty are
hashes of its text, so the world recovers everything from the text alone and the conductor must read
the question to route it.

**Workers.** A worker ``w`` has per-domain accuracies ``p`` (``options.skills``, the paper's table) and
aptitudes for roles (``options.aptitude``: ``plan``, ``check``, ``implement``, in probit units, default
0). On question ``q`` its *competence* is::

    m(q, w) = Phi^-1(p[w, domain]) - difficulty * z(q) - sqrt(1 - difficulty^2) * b(q, w)

with ``z(q)`` the question's shared difficulty (so workers' errors correlate) and ``b(q, w)`` the worker's
own blind spot on it (shared by all of that worker's calls, so asking the same worker again rarely
helps). Both are standard normal draws keyed by the question text (and worker name). Alone a worker
is right iff ``m > 0``: exactly its table accuracy, deterministically per question (workers at low
temperature).

**Roles.** What a step is asked to do is read from its subtask (``role_of``: keywords, so rephrasing
keeps the role): ``plan`` (outline/design an approach: gives a plan, not an answer), ``solve``
(answer/implement/compute), ``check`` (verify/review/refine/fix), ``aggregate`` (synthesise several
answers). Collaboration then works on competence:

* a step that builds on a plan gets ``+ plan_uplift + aptitude.implement`` if some plan it sees is good
  and ``- plan_mislead`` if all are bad; a plan is good iff ``m + plan_ease + aptitude.plan + noise > 0``;
* a step that sees earlier answers decides with ``m2 = m + plan shift + bonus - overload * (answers - 1)
  + noise``, where ``bonus = check_bonus + aptitude.check`` for check/aggregate and 0 for a solver:
  with a right answer in view it keeps it if ``m2 > 0``; without one it repairs iff ``m2 > fix_margin``;
  otherwise it goes with the plurality of what it saw (anchoring), unless ``m2 < -break_margin``: then it
  replaces them with its own (wrong) answer.

``noise`` is a per-call normal draw keyed by (question, worker, role, what the step sees), never by the
wording: the same plan written differently has the same expected outcome. The parameters live in
``WorldParams``/``DomainParams`` below and were fitted with ``benchmarks/world_calibration.py``.

What it does not model: partial credit, answer length effects on quality, context windows, latency
variation, the content of plans or code, tools, and anything about questions beyond four domains.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal, Mapping, Optional, Sequence

from .. import worker_message
from ..pool import WorkerSpec
from ..providers.simulated import register_responder
from .questions import Question

DOMAINS = ("math", "mmlu", "rlpr", "lcb")
WORLD = "paper-v2"

Role = Literal["plan", "solve", "check", "aggregate"]
_PHI_INV = NormalDist().inv_cdf

# ------------------------------------------------------------------------------------------- questions

_TOPICS = [
    "the causes of the French Revolution", "photosynthesis in C4 plants", "the doctrine of stare decisis",
    "the Keynesian multiplier", "mitochondrial DNA inheritance", "the Treaty of Westphalia",
    "plate tectonics at convergent boundaries", "operant conditioning", "the Krebs cycle",
    "the separation of powers", "comparative advantage in trade", "the structure of the atom",
    "the Doppler effect", "enzyme inhibition", "the Monroe Doctrine", "Bayesian updating",
    "the tragedy of the commons", "cognitive dissonance", "Le Chatelier's principle", "the Magna Carta",
]
_NAMES = ["count_pairs", "longest_run", "min_cost_path", "balanced_split", "max_window", "rotate_grid",
          "merge_ranges", "kth_distinct", "valid_brackets", "island_count", "coin_ways", "edit_steps",
          "shortest_cycle", "interval_cover", "max_xor_pair", "paint_fence", "jump_game", "tree_diameter"]
_THINGS = ["a cyclist", "a water tank", "a savings account", "a chemical reaction", "a delivery van",
           "a solar panel", "a bakery", "a population of bacteria", "a loan", "a cooling cup of tea",
           "a wind farm", "a city's bus fleet", "a vineyard", "a data center", "a glacier", "a coral reef",
           "a startup's user base", "a pension fund", "a forest after a fire", "a battery pack", "a river delta",
           "a fishing fleet", "a hospital ward", "a satellite's orbit", "a greenhouse", "a toll bridge"]


def _math(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 19), rng.randint(2, 60), rng.randint(30, 400)
    return rng.choice([
        f"Solve for x: {a}x + {b} = {c}. Express the answer as a reduced fraction.",
        f"What is the remainder when {a}^{b} is divided by {c}?",
        f"Compute the sum of all positive integers less than {c} that are divisible by {a} or {b % 9 + 2}.",
        f"A triangle has sides {a}, {b} and {a + b - 1}. Find its area in simplest radical form.",
        f"How many ordered pairs of positive integers (m, n) satisfy m * n = {c * a}?",
        f"Find the number of lattice points strictly inside the circle x^2 + y^2 = {c}.",
        f"The sequence a_1 = {a}, a_(n+1) = a_n + {b}n. Find a_{c % 50 + 5}.",
    ])


def _mmlu(rng: random.Random) -> str:
    topic, number = rng.choice(_TOPICS), rng.randint(100, 9999)
    return (
        f"(Exam item {number}) Which of the following statements about {topic} is correct?\n"
        "(A) The first option as stated in the textbook.\n(B) A second, subtly different option.\n"
        "(C) A common misconception.\n(D) None of the above.\nAnswer with the letter of the correct option."
    )


def _rlpr(rng: random.Random) -> str:
    thing, p, n, v = rng.choice(_THINGS), rng.randint(2, 35), rng.randint(3, 60), rng.randint(10, 9999)
    return (
        f"Consider {thing} whose relevant quantity starts at {v} and changes by {p}% per period over {n} periods, with the "
        "effects described in the accompanying scenario. Reason carefully about the assumptions and give "
        "the final quantity as a number rounded to three significant figures."
    )


def _lcb(rng: random.Random) -> str:
    name, n = rng.choice(_NAMES), rng.randint(10, 10**6)
    return (
        f"Write a Python function `{name}(nums)` that reads a list of up to {n} integers and returns the "
        "answer described in the problem statement. Your code will be run against hidden test cases; "
        "output only the complete code."
    )


_TEMPLATES = {"math": _math, "mmlu": _mmlu, "rlpr": _rlpr, "lcb": _lcb}
# How the world tells a question's domain from its text (the templates above are written to match).
_DOMAIN_PATTERNS = [
    ("lcb", re.compile(r"Write a Python function")),
    ("mmlu", re.compile(r"Which of the following statements")),
    ("rlpr", re.compile(r"Reason carefully about the assumptions")),
]


def domain_of(text: str) -> str:
    for domain, pattern in _DOMAIN_PATTERNS:
        if pattern.search(text):
            return domain
    return "math"


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest(), "big")


def _uniform(*parts: str) -> float:
    return (_digest(*parts) + 0.5) / 2.0**64


def _normal(*parts: str) -> float:
    return _PHI_INV(_uniform(*parts))


def gold_answer(text: str) -> str:
    """The hidden gold answer of a question, derived from its text alone."""
    domain, h = domain_of(text), _digest("gold", text.strip())
    if domain == "mmlu":
        return "ABCD"[h % 4]
    if domain == "lcb":
        return f"solution-{h % 10**6:06d}"
    if domain == "rlpr":
        return f"{(h % 9000 + 1000) / 10:.1f}"
    return str(h % 997 + 3)


def make_questions(
    n: int,
    seed: int,
    domains: Sequence[str] = DOMAINS,
    exclude: frozenset[str] = frozenset(),
    *,
    stratify: Optional[Sequence["Traits"]] = None,
) -> list[Question]:
    """``n`` distinct questions, domains in rotation, none of them in ``exclude`` (held-out sets).

    ``stratify``: the pool's workers. The set is then drawn stratified on the pattern of which of them
    solve each question alone (proportional allocation, largest deficit first), so per-domain single
    worker accuracies on the set match their expected values to within rounding instead of sampling
    noise. This is variance reduction only: within each pattern questions are drawn as usual, so the
    world's joint distribution is unchanged (see ``benchmarks/world_calibration.py``).
    """
    unknown = [d for d in domains if d not in _TEMPLATES]
    if unknown:
        raise ValueError(f"unknown simulated domain(s) {unknown}; choose from {list(DOMAINS)}")
    rng = random.Random(f"questions|{seed}")
    seen: set[str] = set(exclude)
    per_domain = [n // len(domains) + (1 if i < n % len(domains) else 0) for i in range(len(domains))]
    by_domain: dict[str, list[Question]] = {}
    for domain, count in zip(domains, per_domain):
        by_domain[domain] = (
            _stratified(domain, count, rng, seen, stratify) if stratify else _plain(domain, count, rng, seen)
        )
    out = []
    for i in range(max(per_domain, default=0)):  # domains in rotation, as before
        for domain in domains:
            if i < len(by_domain[domain]):
                out.append(by_domain[domain][i])
    return out


def _draw(domain: str, rng: random.Random, seen: set[str], tries: int = 2000) -> Question:
    for _ in range(tries):
        text = _TEMPLATES[domain](rng)
        if text not in seen:
            seen.add(text)
            return Question(text, domain, subtopic="", level="", reference=gold_answer(text))
    raise ValueError(f"could not write another distinct simulated {domain} question (the templates are exhausted)")


def _plain(domain: str, count: int, rng: random.Random, seen: set[str]) -> list[Question]:
    return [_draw(domain, rng, seen) for _ in range(count)]


def _stratified(domain: str, count: int, rng: random.Random, seen: set[str], workers: Sequence["Traits"]) -> list[Question]:
    """Draw ``count`` questions whose solo-outcome patterns follow their exact probabilities."""
    wanted = _allocate(pattern_probabilities(domain, workers), count, [float(w.skills.get(domain, 0.5)) for w in workers])
    found: dict[tuple[bool, ...], list[Question]] = {}
    out: list[Question] = []
    for pattern, k in wanted.items():
        while len(found.get(pattern, [])) < k:
            q = _draw(domain, rng, seen, tries=200_000)
            found.setdefault(tuple(solo_correct(q.text, w) for w in workers), []).append(q)
        out += found[pattern][:k]
    rng.shuffle(out)
    return out


def _allocate(probs: Mapping[tuple[bool, ...], float], count: int, marginals: Sequence[float], tries: int = 400) -> dict[tuple[bool, ...], int]:
    """Integer pattern counts with expectation ``count * p`` (systematic sampling over a random order of
    the patterns), keeping of ``tries`` random orders the one whose per-worker totals are nearest
    ``count * marginal`` (balanced sampling)."""
    rng = random.Random(f"allocate|{count}|{sorted(probs.items())}")
    keys = sorted(probs)
    best: tuple[float, dict[tuple[bool, ...], int]] = (math.inf, {})
    for _ in range(tries):
        rng.shuffle(keys)
        offset, total, counts = rng.random(), 0.0, {}
        for k in keys:
            low = math.floor(total + offset)
            total += count * probs[k]
            counts[k] = math.floor(total + offset) - low
        error = sum((sum(c for k, c in counts.items() if k[i]) - count * m) ** 2 for i, m in enumerate(marginals))
        if error < best[0]:
            best = (error, dict(counts))
    return {k: c for k, c in best[1].items() if c}


def pattern_probabilities(domain: str, workers: Sequence["Traits"], params: "WorldParams | None" = None) -> dict[tuple[bool, ...], float]:
    """P(which of ``workers`` solve a ``domain`` question alone), exactly: given the shared difficulty z the
    solo outcomes are independent, so integrate over z (Gauss-Hermite, 64 nodes)."""
    import numpy as np

    d = (params or PARAMS).difficulty
    nodes, weights = np.polynomial.hermite_e.hermegauss(64)
    weights = weights / weights.sum()
    s = math.sqrt(1 - d * d)
    p_solo = [np.array([NormalDist().cdf((_probit(float(w.skills.get(domain, 0.5))) - d * z) / s) for z in nodes]) for w in workers]
    out = {}
    for pattern in itertools.product((False, True), repeat=len(workers)):
        prob = weights.copy()
        for ok, p in zip(pattern, p_solo):
            prob = prob * (p if ok else 1 - p)
        out[pattern] = float(prob.sum())
    return out


# ------------------------------------------------------------------------------------------------ roles

_ROLE_WORDS: list[tuple[Role, re.Pattern]] = [
    ("aggregate", re.compile(r"\b(synthesi[sz]e|aggregat\w*|combine|merge|consolidat\w*|reconcile|majority|several (?:agents|answers|responses))\b", re.I)),
    ("check", re.compile(r"\b(verif\w*|check\w*|review\w*|critiqu\w*|validat\w*|double-check|audit|confirm\w*|proofread|debug\w*|test (?:the|it|them)|find (?:any )?(?:errors?|mistakes?|bugs?)|refine|revis\w*|improve|correct (?:it|the|any|them|errors?|mistakes?)|fix\w*)\b", re.I)),
    ("solve", re.compile(r"\b(solve|answer|implement\w*|write (?:the |a |working |python )*(?:code|program|function|solution)|compute|calculate|evaluate|derive|final answer|determine|find)\b", re.I)),
    ("plan", re.compile(r"\b(plan\w*|outline|design|strateg\w*|approach|decompos\w*|break (?:it |the \w+ )?down|sketch|analy[sz]\w*|identify|key (?:steps|ideas|facts)|think about)\b", re.I)),
]


_NEGATED = re.compile(r"\b(?:do not|don't|without|never|not yet)\s+\w+", re.I)


def role_of(subtask: str) -> Role:
    """What a step is asked to do, read from its wording by keyword (first matching role wins; what the
    step is told *not* to do, as in "outline a plan; do not solve it", does not count)."""
    text = _NEGATED.sub(" ", subtask or "")
    for role, pattern in _ROLE_WORDS:
        if pattern.search(text):
            return role
    return "solve"


# ------------------------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class DomainParams:
    plan_ease: float  # planning is this much easier than solving (probit units)
    plan_uplift: float  # a good plan lifts whoever builds on it
    plan_mislead: float  # a bad plan (all plans seen bad) drags them down
    check_bonus: float  # checking a given answer vs solving from scratch
    fix_margin: float  # repairing a wrong answer needs this much more competence than endorsing a right one


@dataclass(frozen=True)
class WorldParams:
    difficulty: float = 0.8  # loading of the shared per-question difficulty: how much workers' errors correlate
    call_noise: float = 0.55  # per-call noise of collaborative steps (a solo answer has none)
    break_margin: float = 1.3  # a step this far below competence overwrites what it saw with its own answer
    overload: float = 0.12  # competence lost per extra answer in view (long, conflicting contexts)
    self_bias: float = 0.4  # checking only its own earlier answers: a worker trusts itself (self-reflection is flat)
    # Fitted with benchmarks/world_calibration.py's baselines (coordinate descent on the squared gaps to the paper's
    # MoA and self-reflection rows, per domain, and to a best workflow family near the paper's trained Conductor).
    domains: Mapping[str, DomainParams] = field(default_factory=lambda: {
        "math": DomainParams(plan_ease=0.5, plan_uplift=0.35, plan_mislead=0.35, check_bonus=0.35, fix_margin=0.45),
        "mmlu": DomainParams(plan_ease=0.3, plan_uplift=0.1, plan_mislead=0.2, check_bonus=0.3, fix_margin=0.546),
        "rlpr": DomainParams(plan_ease=0.2, plan_uplift=0.15, plan_mislead=0.3, check_bonus=0.082, fix_margin=0.66),
        "lcb": DomainParams(plan_ease=0.4, plan_uplift=0.4, plan_mislead=0.45, check_bonus=0.05, fix_margin=0.5),
    })


PARAMS = WorldParams()


@dataclass(frozen=True)
class Traits:
    """What the world knows of one worker: its pool entry's name, skills and role aptitudes."""

    name: str
    skills: Mapping[str, float]
    plan: float = 0.0
    check: float = 0.0
    implement: float = 0.0
    words: int = 100

    @classmethod
    def from_spec(cls, spec: WorkerSpec) -> "Traits":
        o = spec.options
        apt = dict(o.get("aptitude", {}))
        unknown = set(apt) - {"plan", "check", "implement"}
        if unknown:
            raise ValueError(f"simulated worker {spec.name!r}: unknown aptitude(s) {sorted(unknown)}; use plan, check, implement")
        # options.identity: the name the world draws this worker's luck from, when a pool renames it
        # (training's union of pools): the same worker then answers as it does in its own pool.
        return cls(str(o.get("identity") or spec.name), dict(o.get("skills", {})), float(apt.get("plan", 0.0)), float(apt.get("check", 0.0)),
                   float(apt.get("implement", 0.0)), int(o.get("words", 100)))


# -------------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Seen:
    """One earlier step as a later step sees it."""

    role: Role
    producer: str
    plan: Optional[str] = None  # the plan's token, if it wrote a plan
    answer: Optional[str] = None  # its final answer, if it stated one


@dataclass(frozen=True)
class Outcome:
    kind: Literal["plan", "answer"]
    value: str
    correct: bool  # for a plan: whether it is a good plan


def _probit(p: float) -> float:
    return _PHI_INV(min(max(p, 1e-15), 1 - 1e-15))  # skill 1 (0) is certain: tests pin outcomes with it


def competence(text: str, traits: Traits, params: WorldParams = PARAMS) -> float:
    domain = domain_of(text)
    d = params.difficulty
    skill = float(traits.skills.get(domain, 0.5))
    return _probit(skill) - d * _normal("z", text) - math.sqrt(1 - d * d) * _normal("b", text, traits.name)


def solo_correct(text: str, traits: Traits, params: WorldParams = PARAMS) -> bool:
    return competence(text, traits, params) > 0


def good_plan_token(text: str) -> str:
    return f"P{_digest('plan', text) % 10**6:06d}"


def wrong_answer(text: str, worker: str, salt: str = "") -> str:
    """A worker's own plausible wrong answer (the same one every time it is wrong on this question)."""
    gold, domain = gold_answer(text), domain_of(text)
    h = _digest("wrong", text, worker, salt)
    if domain == "mmlu":
        return [c for c in "ABCD" if c != gold][h % 3]
    if domain == "lcb":
        return f"solution-{h % 10**6:06d}"
    if domain == "rlpr":
        return f"{float(gold) * (0.5, 0.9, 1.1, 2.0)[h % 4]:.1f}"
    return str(int(gold) + (-2, -1, 1, 2, 10)[h % 5])


def _plurality(answers: list[str]) -> str:
    counts: dict[str, int] = {}
    for a in answers:
        counts[a] = counts.get(a, 0) + 1
    best = max(counts.values())
    return [a for a in answers if counts[a] == best][-1]  # ties: the latest one in view


def decide(text: str, traits: Traits, role: Role, seen: Sequence[Seen] = (), params: WorldParams = PARAMS) -> Outcome:
    """What worker ``traits`` produces for a step of role ``role`` on question ``text``, seeing ``seen``."""
    domain, gold = domain_of(text), gold_answer(text)
    dp = params.domains[domain]
    m = competence(text, traits, params)
    plans = [s.plan for s in seen if s.plan is not None]
    answers = [s.answer for s in seen if s.answer is not None]
    signature = "|".join(sorted(f"{s.role}:{s.producer}:{s.plan}:{s.answer}" for s in seen))
    # A step that sees nothing answers as it would alone (deterministic); only what it is shown re-draws it.
    noise = params.call_noise * _normal("e", text, traits.name, role, signature) if seen or role == "plan" else 0.0
    shift = 0.0
    if plans:
        shift = dp.plan_uplift + traits.implement if good_plan_token(text) in plans else -dp.plan_mislead
    if role == "plan":
        good = m + dp.plan_ease + traits.plan + 0.5 * shift + noise > 0
        token = good_plan_token(text) if good else f"P{_digest('badplan', text, traits.name, signature) % 10**6:06d}"
        return Outcome("plan", token, good)
    if not answers:
        ok = m + shift + noise > 0
        return Outcome("answer", gold if ok else wrong_answer(text, traits.name), ok)
    bonus = dp.check_bonus + traits.check if role in ("check", "aggregate") else 0.0
    if all(s.producer == traits.name for s in seen if s.answer is not None):
        bonus -= params.self_bias
    m2 = m + shift + bonus - params.overload * (len(answers) - 1) + noise
    if m2 < -params.break_margin:
        value = wrong_answer(text, traits.name)
    elif gold in answers:
        value = gold if m2 > 0 else _plurality(answers)
    else:
        value = gold if m2 > dp.fix_margin else _plurality(answers)
    return Outcome("answer", value, value == gold)


# ------------------------------------------------------------------------- reading and writing messages

_FINAL = re.compile(r"Final answer:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_PLAN = re.compile(r"^Plan id:\s*(P\d{6})\s*$", re.MULTILINE)
_PRODUCER = re.compile(r"^\(([^,()]+), simulated\)")


def extract_final(text: str) -> str | None:
    found = _FINAL.findall(text or "")
    return found[-1].strip() if found else None


def grade_simulated(response: str, reference: str) -> tuple[bool, bool]:
    """(well_formed, correct): well formed if the response states a final answer."""
    answer = extract_final(response)
    return answer is not None, answer is not None and answer == reference


def read_context(content: str) -> tuple[str, Role, list[Seen]]:
    """(question, this step's role, the earlier steps it sees) from a worker's message; a message the
    executor did not write is all question."""
    context = worker_message.read(content) or worker_message.WorkerContext(question="")
    seen = []
    for _, subtask, response in context.earlier:
        producer = _PRODUCER.match(response)
        plan = _PLAN.search(response)
        seen.append(Seen(role_of(subtask), producer.group(1) if producer else "?", plan.group(1) if plan else None, extract_final(response)))
    return context.question or content, role_of(context.subtask), seen


def render(traits: Traits, role: Role, outcome: Outcome) -> str:
    if outcome.kind == "plan":
        filler = " ".join(["step"] * max(0, traits.words // 2 - 6))
        return f"({traits.name}, simulated) plan: {filler}\nPlan id: {outcome.value}"
    filler = " ".join(["reasoning"] * max(0, traits.words - 4))
    return f"({traits.name}, simulated) {role}: {filler}\nFinal answer: {outcome.value}"


@register_responder(WORLD)
def paper_v2(spec: WorkerSpec, messages: list[dict], rng: random.Random) -> str:
    content = str(messages[-1].get("content", "")) if messages else ""
    question, role, seen = read_context(content)
    traits = Traits.from_spec(spec)
    return render(traits, role, decide(question, traits, role, seen))
