"""Random SIMULATED pools for world v3, generated from a seed: pools as data.

``generate_pool(seed)`` draws 3-8 workers, each from a profile *family* (a generalist frontier model, a
math specialist, a coder, a knowledge recaller, a cheap small model, a planner; held out of training
entirely: a careful verifier and a quantitative reasoner). A family fixes ranges; the draw fixes the
worker's accuracy per domain, its strong and weak subtopics, its aptitudes for planning, checking and
implementing, its answer length, price, nominal latency and context limit. Its name and description
are then *written from that profile* (several phrasings per fact, in random order), so a conductor
that reads the pool file learns what a worker is from what is said about it, never from an id or a
name it memorised. ``pool_toml`` renders an ordinary pool file (``conductor sim-pool``) that
``conductor ask/eval --pool FILE`` runs. Same seed, same pool. Every number measured on one is SIMULATED.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from .questions import DOMAINS, SUBTOPIC_NAMES, SUBTOPICS

if TYPE_CHECKING:
    from ..pool import PoolSpec

HELD_OUT = frozenset({"verifier", "quant"})  # never in a training pool; every --held-out pool has one


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # how a description names it
    skills: dict[str, tuple[float, float]]  # domain -> accuracy range
    focus: tuple[str, ...] = ()  # domains whose subtopics it specialises in (strong and weak ones)
    plan: tuple[float, float] = (-0.1, 0.1)
    check: tuple[float, float] = (-0.1, 0.1)
    implement: tuple[float, float] = (-0.1, 0.1)
    words: tuple[int, int] = (400, 800)
    price_out: tuple[float, float] = (0.5, 2.0)  # $ per 1M output tokens
    latency: tuple[float, float] = (2.0, 8.0)  # nominal seconds per call (described; slept only with latency=True)
    context: Optional[tuple[int, int]] = None  # words it reads; None: no limit
    stems: tuple[str, ...] = ("model",)
    sizes: tuple[str, ...] = ("",)


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("frontier", "general-purpose frontier", {"math": (0.78, 0.9), "mmlu": (0.87, 0.93), "rlpr": (0.33, 0.42), "lcb": (0.38, 0.6)},
           plan=(0.05, 0.25), check=(0.0, 0.2), words=(500, 800), price_out=(8.0, 15.0), latency=(6.0, 15.0),
           stems=("atlas", "zenith", "orion", "summit", "meridian"), sizes=("-pro", "-ultra", "-max")),
    Family("math", "mathematics specialist", {"math": (0.8, 0.92), "mmlu": (0.7, 0.82), "rlpr": (0.26, 0.36), "lcb": (0.15, 0.32)},
           focus=("math",), plan=(0.0, 0.2), words=(700, 1000), price_out=(0.6, 2.0), latency=(4.0, 10.0), context=(6000, 20000),
           stems=("euclid", "gauss", "theorem", "lemma"), sizes=("-32b", "-70b", "-14b")),
    Family("coder", "coding", {"math": (0.6, 0.76), "mmlu": (0.74, 0.85), "rlpr": (0.24, 0.32), "lcb": (0.5, 0.66)},
           focus=("lcb",), implement=(0.1, 0.3), words=(400, 700), price_out=(1.0, 4.0), latency=(3.0, 8.0), context=(8000, 30000),
           stems=("codesmith", "bytewise", "compiler", "stacktrace"), sizes=("-33b", "-15b", "-coder")),
    Family("recall", "knowledge", {"math": (0.4, 0.62), "mmlu": (0.89, 0.95), "rlpr": (0.2, 0.3), "lcb": (0.1, 0.25)},
           focus=("mmlu",), words=(300, 500), price_out=(0.3, 1.5), latency=(1.5, 4.0), context=(4000, 12000),
           stems=("sage", "lexicon", "archive", "almanac"), sizes=("-8b", "-22b", "-base")),
    Family("small", "small, cheap", {"math": (0.3, 0.5), "mmlu": (0.55, 0.7), "rlpr": (0.08, 0.18), "lcb": (0.04, 0.15)},
           plan=(-0.3, -0.1), check=(-0.3, -0.1), words=(200, 400), price_out=(0.05, 0.3), latency=(0.3, 1.5), context=(1500, 4000),
           stems=("pico", "swift", "sprite", "ember"), sizes=("-1b", "-3b", "-mini")),
    Family("planner", "planning", {"math": (0.68, 0.8), "mmlu": (0.8, 0.88), "rlpr": (0.28, 0.36), "lcb": (0.28, 0.42)},
           plan=(0.35, 0.6), check=(0.0, 0.15), words=(500, 800), price_out=(2.0, 6.0), latency=(4.0, 9.0),
           stems=("architect", "strategos", "blueprint", "compass"), sizes=("-40b", "-72b", "-plus")),
    Family("verifier", "careful reviewing", {"math": (0.7, 0.82), "mmlu": (0.82, 0.9), "rlpr": (0.28, 0.36), "lcb": (0.3, 0.45)},
           check=(0.35, 0.6), plan=(-0.1, 0.05), words=(300, 600), price_out=(1.5, 5.0), latency=(3.0, 8.0),
           stems=("auditor", "sentinel", "warden", "referee"), sizes=("-34b", "-70b", "-check")),
    Family("quant", "quantitative reasoning", {"math": (0.76, 0.86), "mmlu": (0.78, 0.86), "rlpr": (0.38, 0.48), "lcb": (0.25, 0.4)},
           focus=("rlpr",), plan=(0.05, 0.2), words=(600, 900), price_out=(1.0, 4.0), latency=(4.0, 10.0), context=(10000, 30000),
           stems=("quanta", "vector", "ledger", "tensor"), sizes=("-30b", "-65b", "-r")),
]}


@dataclass
class SimWorker:
    """One generated worker: its profile, and the name and description written from it."""

    family: str
    name: str
    skills: dict[str, float]
    subtopics: dict[str, float]
    plan: float
    check: float
    implement: float
    words: int
    price_in: float
    price_out: float
    latency_s: float
    context: Optional[int]
    description: str = ""

    def options(self, *, latency: bool = False) -> dict:
        aptitude = {k: v for k, v in (("plan", self.plan), ("check", self.check), ("implement", self.implement)) if v}
        out = {"world": "paper-v3", "skills": self.skills, "subtopics": self.subtopics,
               "aptitude": aptitude, "words": self.words, "latency_s": self.latency_s if latency else 0.0}
        if self.context is not None:
            out["context"] = self.context
        return out


@dataclass
class SimPool:
    seed: int
    held_out: bool
    workers: list[SimWorker] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"sim-{'heldout' if self.held_out else 'train'}-{self.seed}"

    @property
    def families(self) -> list[str]:
        return [w.family for w in self.workers]


def training_families() -> list[str]:
    return [f for f in FAMILIES if f not in HELD_OUT]


def generate_pool(seed: int, *, held_out: bool = False, min_workers: int = 3, max_workers: int = 8) -> SimPool:
    """A random pool: ``held_out=False`` draws only training families; ``True`` draws from all of them with
    at least one held-out family. Deterministic per (seed, held_out)."""
    if not 1 <= min_workers <= max_workers:
        raise ValueError(f"need 1 <= min_workers <= max_workers, got {min_workers} and {max_workers}")
    g = random.Random(f"sim-pool|{seed}|{held_out}")
    k = g.randint(min_workers, max_workers)
    allowed = list(FAMILIES) if held_out else training_families()
    families = [g.choice(allowed) for _ in range(k)]
    if held_out and not HELD_OUT & set(families):
        families[g.randrange(k)] = g.choice(sorted(HELD_OUT))
    pool = SimPool(seed, held_out)
    names: set[str] = set()
    for fam in families:
        worker = _draw_worker(FAMILIES[fam], g, names)
        names.add(worker.name)
        worker.description = describe(worker, g)
        pool.workers.append(worker)
    return pool


def _draw_worker(f: Family, g: random.Random, taken: set[str]) -> SimWorker:
    skills = {d: round(g.uniform(*f.skills[d]), 3) for d in DOMAINS}
    subtopics: dict[str, float] = {}
    for d in DOMAINS:
        subs = list(SUBTOPICS[d])
        g.shuffle(subs)
        if d in f.focus:  # a specialist: one or two clear strengths and a weak spot in its own domain
            for s in subs[: g.randint(1, 2)]:
                subtopics[f"{d}.{s}"] = round(g.uniform(0.6, 1.1), 2)
            subtopics[f"{d}.{subs[-1]}"] = round(-g.uniform(0.6, 1.0), 2)
        elif g.random() < 0.35:  # elsewhere, now and then, one notable strength or weakness
            subtopics[f"{d}.{subs[0]}"] = round(g.choice((1, -1)) * g.uniform(0.6, 0.9), 2)
    price_out = round(g.uniform(*f.price_out), 2)
    name = ""
    while not name or name in taken:
        name = f"{g.choice(f.stems)}{g.choice(f.sizes)}" + (f"-{g.randint(2, 9)}" if name else "")
    return SimWorker(
        family=f.name, name=name, skills=skills, subtopics=subtopics,
        plan=round(g.uniform(*f.plan), 2), check=round(g.uniform(*f.check), 2), implement=round(g.uniform(*f.implement), 2),
        words=g.randrange(f.words[0], f.words[1] + 1, 50), price_in=round(price_out / g.choice((4, 5, 8)), 3), price_out=price_out,
        latency_s=round(g.uniform(*f.latency), 1), context=None if f.context is None else g.randrange(f.context[0], f.context[1] + 1, 500),
    )


# ------------------------------------------------------------------------------------------- fresh names

_ONSETS = "b c d f g h j k l m n p r s t v z br cr dr fl gr kl pr st tr".split()
_VOWELS = "a e i o u ai ea io".split()
_CODAS = ["", "", "", "n", "r", "s", "x", "l"]
_SUFFIXES = ["", "-1b", "-4b", "-7b", "-9b", "-12b", "-20b", "-40b", "-90b", "-mini", "-lite", "-pro", "-max", "-plus", "-xl",
             "-2", "-3", "-v2", "-chat", "-r1"]  # as short as the generator's own: a plan's line of names fits its bound


def fresh_names(count: int, g: random.Random, avoid: frozenset[str] = frozenset()) -> list[str]:
    """``count`` distinct random model names ("dravo-12b", "kelsin-mini") that say nothing about a worker: a
    conductor trained on pools renamed with them must learn who is who from the descriptions. No name is
    another's first part (a whole-word reading of one never finds the other) and none is in ``avoid``."""
    names: list[str] = []
    while len(names) < count:
        stem = "".join(g.choice(_ONSETS) + g.choice(_VOWELS) for _ in range(2)) + g.choice(_CODAS)
        name = stem + g.choice(_SUFFIXES)
        first = name.split("-")[0]
        if name in avoid or any(first == other.split("-")[0] for other in names):
            continue
        names.append(name)
    return names


def renamed(spec, g: random.Random):
    """``spec`` (a PoolSpec) with every worker given a fresh name, its description saying the new one: a training
    example's prompt whose names carry no memory of other pools. For prompts only: the training code runs each
    plan on the pool's own workers, by id; run as it is, a renamed worker would answer differently (world v3
    keys a worker's blind spots by its name), and references to old names (fallbacks, workflows) are not mapped."""
    new = fresh_names(len(spec.workers), g, avoid=frozenset(w.name for w in spec.workers))
    workers = [w.model_copy(update={"name": n, "description": w.description.replace(w.name, n)})
               for w, n in zip(spec.workers, new)]
    strongest = dict(zip((w.name for w in spec.workers), new)).get(spec.strongest) if spec.strongest else None
    return spec.model_copy(update={"workers": workers, "strongest": strongest})


# ------------------------------------------------------------------------------------------ descriptions

# Per domain, an accuracy alone and the word a description uses for it (the thresholds follow the range
# of the paper's Table 7 per domain: 40 % on RLPR is as good as 90 % on MMLU).
_GRADES = {
    "math": [(0.86, "excellent"), (0.78, "strong"), (0.66, "decent"), (0.48, "weak"), (0.0, "poor")],
    "mmlu": [(0.91, "excellent"), (0.86, "strong"), (0.78, "decent"), (0.66, "weak"), (0.0, "poor")],
    "rlpr": [(0.41, "excellent"), (0.35, "strong"), (0.29, "decent"), (0.2, "weak"), (0.0, "poor")],
    "lcb": [(0.56, "excellent"), (0.45, "strong"), (0.33, "decent"), (0.18, "weak"), (0.0, "poor")],
}


def grade(domain: str, skill: float) -> str:
    return next(word for floor, word in _GRADES[domain] if skill >= floor)


_OPENINGS = ["{a_kind} model.", "{kind_cap} model.", "{name} is {a_kind_low} model.", "Type: {kind} model.", "Profile: {a_kind_low} model."]
_DOMAIN_LINES = [
    lambda parts: "; ".join(f"{d}: {g}" for d, g in parts) + ".",
    lambda parts: "Rated " + ", ".join(f"{g} at {d}" for d, g in parts) + ".",
    lambda parts: "Skill by area: " + ", ".join(f"{d} {g}" for d, g in parts) + ".",
]
_STRONG = ["Especially good at {x}.", "Stands out on {x}.", "Best on {x}.", "A specialist in {x}."]
_WEAK = ["Weak spot: {x}.", "Struggles with {x}.", "Avoid it for {x}.", "Poor on {x}."]
_APT = {
    ("plan", 1): ["Plans an approach well.", "A good planner.", "Writes strong plans for others to follow."],
    ("plan", -1): ["Plans poorly.", "Not a planner."],
    ("check", 1): ["A careful checker of others' answers.", "Reviews and fixes others' work well.", "An excellent verifier."],
    ("check", -1): ["A poor reviewer.", "Do not use it to check answers."],
    ("implement", 1): ["Implements a given plan faithfully.", "Good at following a plan to an answer."],
}


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe(w: SimWorker, g: random.Random, kind: Optional[str] = None) -> str:
    """A description written from the worker's profile: what it is good and bad at, in varied wording
    (``kind``: what the opening calls it; default its family's word)."""
    kind = kind or FAMILIES[w.family].kind
    article = "an" if kind[0] in "aeiou" else "a"
    head = g.choice(_OPENINGS).format(kind=kind, kind_cap=kind[0].upper() + kind[1:], name=w.name, a_kind=f"{article.capitalize()} {kind}",
                                      a_kind_low=f"{article} {kind}")
    parts = [(DOMAIN_AREA[d], grade(d, w.skills[d])) for d in DOMAINS]
    g.shuffle(parts)
    sentences = [g.choice(_DOMAIN_LINES)(parts)]
    strong = [SUBTOPIC_NAMES[k.split(".")[1]] for k, v in w.subtopics.items() if v >= 0.5]
    weak = [SUBTOPIC_NAMES[k.split(".")[1]] for k, v in w.subtopics.items() if v <= -0.5]
    if strong:
        sentences.append(g.choice(_STRONG).format(x=_joined(strong)))
    if weak:
        sentences.append(g.choice(_WEAK).format(x=_joined(weak)))
    for key in ("plan", "check", "implement"):
        value = getattr(w, key)
        sign = 1 if value >= 0.15 else -1 if value <= -0.15 else 0
        if (key, sign) in _APT:
            sentences.append(g.choice(_APT[(key, sign)]))
    g.shuffle(sentences)
    tail = [f"${w.price_out:g}/M output tokens", f"~{w.latency_s:g} s a call"]
    if w.context is not None:
        tail.append(f"reads at most {w.context:,} words")
    return " ".join([head, *sentences, "(" + "; ".join(tail) + ")"])


DOMAIN_AREA = {  # the area a profile and a description name each domain by
    "math": "math", "mmlu": "knowledge", "rlpr": "quantitative reasoning", "lcb": "coding"}


# -------------------------------------------------------------------------------------- measured profiles

PROFILE_QUESTIONS = 960  # 240 a domain (about +-3 points), every bucket in its share: a measurement, as a user would run on their pool
PROFILE_SEED = 7_000


def profile_size(questions: int) -> int:
    """``questions`` if a profile can be measured on that many (every bucket at least once), else a ValueError."""
    from .world_v3 import buckets

    if isinstance(questions, bool) or not isinstance(questions, int) or questions < len(buckets()):
        raise ValueError(f"a profile needs at least {len(buckets())} questions (one in each of the world's buckets), got {questions!r}")
    return questions


def profile_size_arg(text: str) -> int:
    """``profile_size`` as a command line's ``type=``: a usage error that says what size is needed."""
    import argparse

    try:
        questions = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    try:
        return profile_size(questions)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def measured_profile(worker, questions: int = PROFILE_QUESTIONS) -> dict[str, float]:
    """A simulated worker's accuracy alone per area, measured on ``questions`` world-v3 questions (what
    ``show = "profile"`` ranks the workers by; areas named as the descriptions name them)."""
    return dict(_measured(json.dumps(worker.options, sort_keys=True), worker.name, profile_size(questions)))


def subtopic_profile(worker, questions: int = PROFILE_QUESTIONS) -> dict[str, float]:
    """A simulated worker's accuracy alone per *subtopic*, on the same questions (``questions / 16`` a subtopic: 60 by
    default), keyed by the subtopic's name as descriptions and questions word it ("algebra", "graph algorithms"): a
    pool file with this profile is ranked per subtopic (16 lines), and its rank words name places there ("graph#1")."""
    measured = dict(_measured_subtopics(json.dumps(worker.options, sort_keys=True), worker.name, profile_size(questions)))
    return {SUBTOPIC_NAMES[s]: measured[(d, s)] for d in DOMAINS for s in SUBTOPICS[d]}


PROFILES = {"area": measured_profile, "subtopic": subtopic_profile}  # what a generated pool file's ``profile`` measures


PROFILE_KEYS = {"area": frozenset(DOMAIN_AREA.values()), "subtopic": frozenset(SUBTOPIC_NAMES.values())}


def with_profile(spec, profile: str = "area", questions: Optional[int] = None):
    """``spec`` (a PoolSpec) with every simulated worker's ``profile`` per area or per subtopic (``PROFILES``): what its
    ranking lines, and a profile-reading conductor's rank words, are over. A worker whose file already holds that
    profile's keys keeps its numbers (the file is what its prompt shows); the others are measured on
    ``PROFILE_QUESTIONS``. ``questions``: measure every simulated worker on that many instead, replacing the file's
    numbers (a larger profile is a finer measurement of the same skills). Other providers' workers are kept as they are."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    measure, keys = PROFILES[profile], PROFILE_KEYS[profile]
    size = PROFILE_QUESTIONS if questions is None else profile_size(questions)  # refused even where no worker is simulated
    return spec.model_copy(update={"workers": [w.model_copy(update={"profile": measure(w, size)})
                                               if w.provider == "simulated" and (questions is not None or not keys <= set(w.profile))
                                               else w for w in spec.workers]})


def subtopic_ranking(spec) -> dict[tuple[str, str], list[int]]:
    """Per (domain, subtopic), the pool's worker ids best first by measured accuracy alone on that subtopic's share
    of the profile's questions (60 each, rounded as the profile is; ties: pool order), or by the pool file's own profile
    where it is per subtopic (``subtopic_profile``: the numbers its ranking lines show). Finer than ``area_ranking``:
    a worker strong in one subtopic of an area it is middling in (``options.subtopics``) comes first there. Ranked by
    the rule the prompt's lines and rank words follow (``conductor.ranking.ranked_by_area``), so a pool's other workers with
    a per-subtopic profile take their places as the prompt shows them."""
    from ..conductor.ranking import ranked_by_area

    ranked = ranked_by_area(with_profile(spec, "subtopic"), top=None)
    if not any(SUBTOPIC_NAMES[s] in ranked for d in DOMAINS for s in SUBTOPICS[d]):
        return {}
    return {(d, s): [i for _, i in ranked.get(SUBTOPIC_NAMES[s], [])] for d in DOMAINS for s in SUBTOPICS[d]}


def area_ranking(spec) -> dict[str, list[int]]:
    """Per domain, the pool's worker ids best first by measured accuracy alone in that area (ties: pool order):
    the ranking a ``show = "profile"`` conductor is shown (``conductor.ranking.ranking``), as ids."""
    from ..conductor.ranking import ranked_by_area  # the same rule as the ranking the prompt shows

    ranked = ranked_by_area(with_profile(spec, "area"), top=None)  # a file profiled per subtopic: measured per area
    return {d: [i for _, i in ranked.get(area, [])] for d, area in DOMAIN_AREA.items()}


@functools.lru_cache(maxsize=4096)
def _measured(options: str, name: str, questions: int) -> tuple[tuple[str, float], ...]:
    solo = _solo_on_profile(options, name, questions)
    return tuple((DOMAIN_AREA[d], _share([ok for domain, _, ok in solo if domain == d])) for d in DOMAINS)


@functools.lru_cache(maxsize=4096)
def _measured_subtopics(options: str, name: str, questions: int) -> tuple[tuple[tuple[str, str], float], ...]:
    by_subtopic: dict[tuple[str, str], list[bool]] = {}
    for domain, subtopic, ok in _solo_on_profile(options, name, questions):
        by_subtopic.setdefault((domain, subtopic), []).append(ok)
    return tuple((key, _share(v)) for key, v in sorted(by_subtopic.items()))


def _share(right: list[bool]) -> float:
    return round(sum(right) / len(right), 2)  # a profile's precision


@functools.lru_cache(maxsize=4096)
def _solo_on_profile(options: str, name: str, questions: int) -> tuple[tuple[str, str, bool], ...]:
    """(domain, subtopic, right alone) of a simulated worker on each profile question: measured once, read by the
    area profile and the subtopic ranking."""
    from ..pool import WorkerSpec
    from .world_v3 import Profile, solo_correct

    profile = Profile.from_spec(WorkerSpec(name=name, provider="simulated", options=json.loads(options)))
    return tuple((q.domain, q.subtopic, solo_correct(q.text, profile)) for q in _profile_questions(questions))


@functools.lru_cache(maxsize=4)
def _profile_questions(questions: int = PROFILE_QUESTIONS):
    from .world_v3 import make_questions

    return make_questions(questions, PROFILE_SEED)


# ------------------------------------------------------------------------------------------- pool files


def _toml_value(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k) if not k.isidentifier() else k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


def _profile_of(w: SimWorker, latency: bool, profile: str, questions: int) -> dict:
    from ..pool import WorkerSpec

    return PROFILES[profile](WorkerSpec(name=w.name, provider="simulated", options=w.options(latency=latency)), questions)


def pool_spec(pool: SimPool, *, latency: bool = False, checkpoint: Optional[str] = None, profile: str = "area",
              profile_questions: int = PROFILE_QUESTIONS) -> PoolSpec:
    """The pool as loaded from its file (``pool_toml``), without writing one."""
    import tomllib

    from ..pool import PoolSpec

    return PoolSpec.model_validate(tomllib.loads(pool_toml(pool, latency=latency, checkpoint=checkpoint, profile=profile,
                                                           profile_questions=profile_questions)))


def pool_toml(pool: SimPool, *, latency: bool = False, checkpoint: Optional[str] = None, profile: str = "area",
              profile_questions: int = PROFILE_QUESTIONS) -> str:
    """The pool as an ordinary pool file (TOML). ``checkpoint``: the trained conductor it names; ``profile``: each
    worker's measured accuracy per area (4 ranking lines) or per subtopic (16; ``PROFILES``), on
    ``profile_questions`` questions."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    profile_size(profile_questions)
    lines = [
        f"# A SIMULATED pool generated by `conductor sim-pool --seed {pool.seed}{' --held-out' if pool.held_out else ''}` (openconductor.sim.pools).",
        "# Every worker is answered by world v3 (openconductor/sim/world_v3.py); nothing calls a model and every number",
        f"# measured on it is SIMULATED. Families: {', '.join(pool.families)}.",
        f"# Each worker's profile: its accuracy alone per {profile}, measured on {profile_questions} questions.",
        f"name = {json.dumps(pool.name)}",
        # The fallback and the single-worker default: the best accuracy alone, averaged over the domains.
        f"strongest = {json.dumps(max(pool.workers, key=lambda w: sum(w.skills.values())).name)}",
        "",
    ]
    for w in pool.workers:
        lines += [
            "[[workers]]",
            f"name = {json.dumps(w.name)}",
            'provider = "simulated"',
            f"description = {json.dumps(w.description)}",
            f"price_input_per_m = {w.price_in!r}",
            f"price_output_per_m = {w.price_out!r}",
            "concurrency = 64",
            f"options = {_toml_value(w.options(latency=latency))}",
            f"profile = {_toml_value(_profile_of(w, latency, profile, profile_questions))}",
            "",
        ]
    lines += ["[conductor]", 'show = "descriptions"', "max_steps = 3", "fine_grained_access = false"]
    if checkpoint:
        lines.append(f"checkpoint = {json.dumps(checkpoint)}")
    lines += [
        'backend = { name = "conductor-smollm2", provider = "local_gguf", model = "smollm2-135m-instruct", max_tokens = 512, concurrency = 2, timeout_s = 300 }',
        "",
        "[limits]",
        "max_calls = 8",
        "max_depth = 1",
        "",
    ]
    return "\n".join(lines)


RANKINGS = {  # name -> (the pool's ranking, the key of a question's place in it): what the rank lookup can read
    "area": (area_ranking, lambda q: q.domain),
    "subtopic": (subtopic_ranking, lambda q: (q.domain, q.subtopic)),
}
