"""A simulated world for training conductors on CPU: domain-flavoured questions with hidden answers.

Every number measured with it is SIMULATED. Nothing here is a model.

Questions. ``make_questions`` writes question texts from per-domain templates (MATH500-, MMLU-, RLPR-
and LiveCodeBench-flavoured). A question reveals its domain only through its wording, and its gold
answer is a hash of its text (``gold_answer``), so the conductor has to read the question to route
it, and the world needs no side channel: it recovers domain and gold from the text alone.

Workers (the "paper-constrained" responder). A simulated worker with per-domain accuracy ``p``
(``options.skills`` in the pool file) answers:

* seeing no earlier answer: correctly with probability ``p``;
* seeing at least one correct earlier answer (a plan, a draft, a solution): correctly with
  probability ``p + (1 - p) * uplift`` — good earlier work raises the success of whoever builds on it;
* seeing only wrong earlier answers: correctly with probability ``p * (1 - mislead)`` — a wrong draft
  anchors the worker, but a strong verifier still catches it with its own skill.

``uplift`` (default 0.6) and ``mislead`` (default 0.25) can be set per worker in ``options``; so can
``words`` (answer length, hence tokens and cost). A wrong answer is a plausible distractor, so two
wrong workers sometimes agree. Every answer ends with ``Final answer: X``.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from ..pool import WorkerSpec
from ..providers.simulated import register_responder

DOMAINS = ("math", "mmlu", "rlpr", "lcb")
WORLD = "paper-constrained"

_TOPICS = [
    "the causes of the French Revolution", "photosynthesis in C4 plants", "the doctrine of stare decisis",
    "the Keynesian multiplier", "mitochondrial DNA inheritance", "the Treaty of Westphalia",
    "plate tectonics at convergent boundaries", "operant conditioning", "the Krebs cycle",
    "the separation of powers", "comparative advantage in trade", "the structure of the atom",
]
_NAMES = ["count_pairs", "longest_run", "min_cost_path", "balanced_split", "max_window", "rotate_grid",
          "merge_ranges", "kth_distinct", "valid_brackets", "island_count", "coin_ways", "edit_steps"]
_THINGS = ["a cyclist", "a water tank", "a savings account", "a chemical reaction", "a delivery van",
           "a solar panel", "a bakery", "a population of bacteria", "a loan", "a cooling cup of tea"]


def _math(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 19), rng.randint(2, 60), rng.randint(30, 400)
    return rng.choice([
        f"Solve for x: {a}x + {b} = {c}. Express the answer as a reduced fraction.",
        f"What is the remainder when {a}^{b} is divided by {c}?",
        f"Compute the sum of all positive integers less than {c} that are divisible by {a} or {b % 9 + 2}.",
        f"A triangle has sides {a}, {b} and {a + b - 1}. Find its area in simplest radical form.",
        f"How many ordered pairs of positive integers (m, n) satisfy m * n = {c * a}?",
    ])


def _mmlu(rng: random.Random) -> str:
    topic, number = rng.choice(_TOPICS), rng.randint(100, 999)
    return (
        f"(Exam item {number}) Which of the following statements about {topic} is correct?\n"
        "(A) The first option as stated in the textbook.\n(B) A second, subtly different option.\n"
        "(C) A common misconception.\n(D) None of the above.\nAnswer with the letter of the correct option."
    )


def _rlpr(rng: random.Random) -> str:
    thing, p, n = rng.choice(_THINGS), rng.randint(2, 35), rng.randint(3, 40)
    return (
        f"Consider {thing} whose relevant quantity changes by {p}% per period over {n} periods, with the "
        "effects described in the accompanying scenario. Reason carefully about the assumptions and give "
        "the final quantity as a number rounded to three significant figures."
    )


def _lcb(rng: random.Random) -> str:
    name, n = rng.choice(_NAMES), rng.randint(10, 10**5)
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


@dataclass(frozen=True)
class Question:
    text: str
    domain: str
    reference: str  # the gold answer (hidden from the conductor: it only sees ``text``)


def domain_of(text: str) -> str:
    for domain, pattern in _DOMAIN_PATTERNS:
        if pattern.search(text):
            return domain
    return "math"


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.strip().encode()).digest()[:8], "big")


def gold_answer(text: str) -> str:
    """The hidden gold answer of a question, derived from its text alone."""
    domain, h = domain_of(text), _digest(text)
    if domain == "mmlu":
        return "ABCD"[h % 4]
    if domain == "lcb":
        return f"solution-{h % 10**6:06d}"
    if domain == "rlpr":
        return f"{(h % 9000 + 1000) / 10:.1f}"
    return str(h % 997 + 3)


def make_questions(n: int, seed: int, domains: tuple[str, ...] | list[str] = DOMAINS, exclude: frozenset[str] = frozenset()) -> list[Question]:
    """``n`` distinct questions, domains in rotation, none of them in ``exclude`` (held-out sets)."""
    rng = random.Random(f"questions|{seed}")
    out: list[Question] = []
    seen: set[str] = set(exclude)
    unknown = [d for d in domains if d not in _TEMPLATES]
    if unknown:
        raise ValueError(f"unknown simulated domain(s) {unknown}; choose from {list(DOMAINS)}")
    for _ in range(50 * n + 100):
        if len(out) >= n:
            break
        domain = domains[len(out) % len(domains)]
        text = _TEMPLATES[domain](rng)
        if text in seen:
            continue
        seen.add(text)
        out.append(Question(text, domain, gold_answer(text)))
    if len(out) < n:
        raise ValueError(f"could only write {len(out)} distinct simulated questions of the {n} asked for")
    return out


_FINAL = re.compile(r"Final answer:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_TASK = re.compile(r"<Overall task>\n(.*?)\n</Overall task>", re.DOTALL)
_RESPONSES = re.compile(r"<Agent \d+ response>\n(.*?)\n</Agent \d+ response>", re.DOTALL)


def extract_final(text: str) -> str | None:
    found = _FINAL.findall(text or "")
    return found[-1].strip() if found else None


def grade_simulated(response: str, reference: str) -> tuple[bool, bool]:
    """(well_formed, correct): well formed if the response states a final answer."""
    answer = extract_final(response)
    return answer is not None, answer is not None and answer == reference


def _distractor(gold: str, domain: str, rng: random.Random) -> str:
    if domain == "mmlu":
        return rng.choice([c for c in "ABCD" if c != gold])
    if domain == "lcb":
        return f"solution-{rng.randrange(10**6):06d}"
    if domain == "rlpr":
        return f"{float(gold) * rng.choice([0.5, 0.9, 1.1, 2.0]):.1f}"
    return str(int(gold) + rng.choice([-2, -1, 1, 2, 10]))


def correct_probability(skill: float, earlier: list[bool], uplift: float, mislead: float) -> float:
    """The collaboration model (see the module docstring)."""
    if not earlier:
        return skill
    if any(earlier):
        return skill + (1.0 - skill) * uplift
    return skill * (1.0 - mislead)


@register_responder(WORLD)
def paper_constrained(spec: WorkerSpec, messages: list[dict], rng: random.Random) -> str:
    content = str(messages[-1].get("content", "")) if messages else ""
    match = _TASK.search(content)
    task = match.group(1) if match else content
    domain, gold = domain_of(task), gold_answer(task)
    options = spec.options
    skill = float(options.get("skills", {}).get(domain, 0.5))
    earlier = [extract_final(r) for r in _RESPONSES.findall(content)]
    earlier_ok = [a == gold for a in earlier if a is not None]
    p = correct_probability(skill, earlier_ok, float(options.get("uplift", 0.6)), float(options.get("mislead", 0.25)))
    answer = gold if rng.random() < p else _distractor(gold, domain, rng)
    filler = " ".join(["reasoning"] * max(0, int(options.get("words", 80)) - 4))
    return f"({spec.name}, simulated) {filler}\nFinal answer: {answer}"
