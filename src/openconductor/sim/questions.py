"""World v3's questions: per domain four subtopics and three difficulty levels, visible in the wording.

A question is composed from independent parts, each drawn from several phrasings: a difficulty cue
(three to five phrasings per level, before or after the body), a domain frame (the phrase v2's
``domain_of`` reads, in several sentence forms) and a subtopic body (three or four templates per
subtopic, with random numbers, names and entities). ``bucket_of`` recovers (domain, subtopic, level)
from the text alone, by keywords, so any rephrasing built from these parts keeps its bucket; the
world never sees the generator's labels. Every number measured on these questions is SIMULATED.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Optional

DOMAINS = ("math", "mmlu", "rlpr", "lcb")
LEVELS = ("easy", "medium", "hard")
SUBTOPICS: dict[str, tuple[str, ...]] = {
    "math": ("algebra", "number_theory", "geometry", "combinatorics"),
    "mmlu": ("history", "biology", "law", "economics"),
    "rlpr": ("finance", "physics", "ecology", "operations"),
    "lcb": ("arrays", "dp", "graphs", "strings"),
}
# How descriptions name a subtopic (sim/pools.py) and how docs print it.
SUBTOPIC_NAMES = {
    "algebra": "algebra", "number_theory": "number theory", "geometry": "geometry", "combinatorics": "combinatorics and probability",
    "history": "history", "biology": "biology", "law": "law", "economics": "economics",
    "finance": "financial modelling", "physics": "physics", "ecology": "ecology", "operations": "operations and logistics",
    "arrays": "array problems", "dp": "dynamic programming", "graphs": "graph algorithms", "strings": "string processing",
}
DOMAIN_NAMES = {"math": "competition math", "mmlu": "knowledge questions", "rlpr": "quantitative reasoning", "lcb": "coding"}


def buckets() -> list[tuple[str, str, str]]:
    """Every (domain, subtopic, level), in a fixed order."""
    return [(d, s, lvl) for d in DOMAINS for s in SUBTOPICS[d] for lvl in LEVELS]


# ------------------------------------------------------------------------------------------ difficulty

_CUES = {
    "easy": ["Quick warm-up:", "A routine exercise.", "This one is straightforward.", "Easy level:", "Basic practice item."],
    "medium": ["A typical exam question.", "Moderate difficulty:", "Standard level.", "Intermediate practice item:"],
    "hard": ["Challenge problem:", "This is a hard, multi-step problem.", "Olympiad-level difficulty.", "Advanced and tricky:"],
}
_LEVEL_WORDS = {
    "hard": re.compile(r"\b(challenge|hard|olympiad-level|advanced|tricky)\b", re.I),
    "easy": re.compile(r"\b(warm-up|routine|straightforward|easy|basic)\b", re.I),
    "medium": re.compile(r"\b(typical|moderate|standard|intermediate)\b", re.I),
}


def difficulty_of(text: str) -> str:
    """The level a question's wording announces (no cue reads as medium)."""
    for level, pattern in _LEVEL_WORDS.items():
        if pattern.search(text):
            return level
    return "medium"


# ------------------------------------------------------------------------------------------- subtopics

Body = Callable[[random.Random], str]


def _math_bodies() -> dict[str, list[Body]]:
    r = lambda g, a, b: g.randint(a, b)  # noqa: E731
    return {
        "algebra": [
            lambda g: f"Solve for x: {r(g, 2, 19)}x + {r(g, 2, 60)} = {r(g, 30, 400)}. Express x as a reduced fraction.",
            lambda g: f"Find the sum of the roots of the quadratic {r(g, 2, 9)}x^2 - {r(g, 3, 90)}x + {r(g, 1, 50)} = 0.",
            lambda g: f"The linear system {r(g, 2, 9)}x + y = {r(g, 3, 70)} and x - {r(g, 2, 9)}y = {r(g, 1, 20)} has one solution; give x + y.",
            lambda g: f"For which k does the polynomial x^3 + kx + {r(g, 2, 80)} have x = {r(g, 2, 9)} as a root?",
        ],
        "number_theory": [
            lambda g: f"What is the remainder when {r(g, 2, 19)}^{r(g, 10, 99)} is divided by {r(g, 7, 97)}?",
            lambda g: f"How many positive divisors does {r(g, 100, 99999)} have?",
            lambda g: f"Find the greatest common divisor of {r(g, 1000, 99999)} and {r(g, 1000, 99999)}.",
            lambda g: f"What is the sum of the digits of {r(g, 2, 9)}^{r(g, 20, 99)}?",
        ],
        "geometry": [
            lambda g: f"A triangle has sides {r(g, 3, 19)}, {r(g, 20, 40)} and {r(g, 41, 58)}. Find its area in radical form.",
            lambda g: f"Find the number of lattice points strictly inside the circle x^2 + y^2 = {r(g, 30, 900)}.",
            lambda g: f"A regular polygon has interior angles of {r(g, 120, 178)} degrees. How many sides does it have?",
            lambda g: f"A circle of radius {r(g, 2, 40)} is inscribed in a square; find the area between them to the nearest integer.",
        ],
        "combinatorics": [
            lambda g: f"In how many ways can a committee of {r(g, 3, 6)} be chosen from {r(g, 8, 30)} people if two of them refuse to serve together?",
            lambda g: f"What is the probability that {r(g, 2, 5)} fair dice show a total of {r(g, 6, 20)}? Give m + n for the reduced fraction m/n.",
            lambda g: f"How many arrangements of the letters of a {r(g, 6, 11)}-letter word with {r(g, 2, 4)} repeated letters are there?",
            lambda g: f"A bag holds {r(g, 3, 12)} red and {r(g, 3, 12)} blue marbles; in how many ways can {r(g, 3, 6)} be drawn with at least one of each colour?",
        ],
    }


_MMLU_TOPICS = {
    "history": ["the Treaty of Westphalia", "the Magna Carta", "the causes of the French Revolution", "the Monroe Doctrine",
                "the fall of the Western Roman Empire", "the Meiji Restoration", "the Congress of Vienna"],
    "biology": ["photosynthesis in C4 plants", "mitochondrial DNA inheritance", "the Krebs cycle", "enzyme inhibition",
                "meiosis and crossing over", "the immune response to a vaccine", "protein folding chaperones"],
    "law": ["the doctrine of stare decisis", "the separation of powers", "hearsay evidence", "adverse possession",
            "strict liability in torts", "the commerce clause", "consideration in contract formation"],
    "economics": ["the Keynesian multiplier", "comparative advantage in trade", "the tragedy of the commons",
                  "price elasticity of demand", "monetary policy transmission", "deadweight loss from a tariff", "the Phillips curve"],
}
_MMLU_FRAMES = [
    "(Exam item {n}) Which of the following statements about {topic} is correct?",
    "Which of the following statements concerning {topic} is accurate? (item {n})",
    "Item {n}, on {topic}. Which of the following statements about it holds?",
]
_RLPR_THINGS = {
    "finance": ["a savings account", "a mortgage loan", "a pension fund", "a corporate bond portfolio", "a credit card balance", "an annuity"],
    "physics": ["a cyclist on a slope", "a satellite's orbit", "a cooling cup of tea", "a battery pack under load", "a swinging pendulum", "a projectile"],
    "ecology": ["a population of bacteria", "a forest after a fire", "a coral reef", "a retreating glacier", "a river delta", "a wolf pack's territory"],
    "operations": ["a delivery van route", "a city's bus fleet", "a data center's job queue", "a hospital ward's bed count", "a toll bridge",
                   "a warehouse's stock"],
}
_RLPR_FRAMES = [
    "Consider {thing} whose relevant quantity starts at {v} and changes by {p}% per period over {k} periods, with the effects described in the "
    "accompanying scenario. Reason carefully about the assumptions and give the final quantity as a number rounded to three significant figures.",
    "Model {thing}: it begins at {v}, and each of {k} periods moves it by {p}% as the scenario describes. Reason carefully about the "
    "assumptions, then report the final quantity to three significant figures.",
    "Take {thing} at an initial level of {v}. Over {k} periods it shifts by {p}% per period under the stated conditions. Reason carefully "
    "about the assumptions and state the end value, three significant figures.",
]
_LCB_TASKS = {
    "arrays": [("max_window", "returns the largest sum of any contiguous subarray of length k"),
               ("merge_ranges", "merges overlapping intervals in the sorted list and returns how many remain"),
               ("count_pairs", "counts the pairs of elements of the array whose sum is divisible by k"),
               ("longest_run", "returns the length of the longest run of equal adjacent array elements")],
    "dp": [("coin_ways", "returns the number of ways to make the target amount from the coin values, modulo 10^9+7"),
           ("edit_steps", "returns the minimum number of insert, delete and replace operations between two sequences"),
           ("paint_fence", "returns the number of ways to paint the posts so that no three adjacent posts share a colour"),
           ("min_cost_path", "returns the minimum cost of a path from the top-left to the bottom-right cell, memoizing subproblems")],
    "graphs": [("island_count", "returns the number of connected components (islands) in the grid graph"),
               ("shortest_cycle", "returns the length of the shortest cycle in the undirected graph given by its edges"),
               ("tree_diameter", "returns the diameter of the tree given by its edge list"),
               ("route_count", "returns how many nodes are reachable from node 0 along directed edges")],
    "strings": [("valid_brackets", "decides whether the bracket string is balanced"),
                ("longest_palindrome", "returns the length of the longest palindromic substring of the string"),
                ("anagram_groups", "returns the number of groups of words that are anagrams of each other"),
                ("run_length", "returns the run-length encoding of the string of characters")],
}
_LCB_FRAMES = [
    "Write a Python function `{name}(data)` that {task}. The input has up to {n} items. Your code will be run against hidden test cases; "
    "output only the complete code.",
    "Write a Python function `{name}` which {task}; inputs hold at most {n} items. Hidden tests will check it, so reply with the complete code only.",
    "Coding task. Write a Python function `{name}(data)`; it {task}. Expect up to {n} items per input; print nothing, return the result, and "
    "output the full code.",
]
# Body -> subtopic, by keywords of the bodies above (checked over thousands of draws by the tests).
_SUBTOPIC_WORDS: dict[str, list[tuple[str, re.Pattern]]] = {
    "math": [
        ("number_theory", re.compile(r"\b(remainder|divisors?|greatest common divisor|digits)\b", re.I)),
        ("geometry", re.compile(r"\b(triangle|lattice points|polygon|circle)\b", re.I)),
        ("combinatorics", re.compile(r"\b(committee|probability|arrangements|marbles)\b", re.I)),
        ("algebra", re.compile(r"\b(solve for|quadratic|linear system|polynomial)\b", re.I)),
    ],
    "mmlu": [(s, re.compile("|".join(re.escape(t) for t in topics), re.I)) for s, topics in _MMLU_TOPICS.items()],
    "rlpr": [(s, re.compile("|".join(re.escape(t) for t in things), re.I)) for s, things in _RLPR_THINGS.items()],
    "lcb": [(s, re.compile("|".join(rf"`{re.escape(name)}\b" for name, _ in tasks))) for s, tasks in _LCB_TASKS.items()],
}


def _body(domain: str, subtopic: str, g: random.Random) -> str:
    if domain == "math":
        return g.choice(_math_bodies()[subtopic])(g)
    if domain == "mmlu":
        head = g.choice(_MMLU_FRAMES).format(n=g.randint(100, 9999), topic=g.choice(_MMLU_TOPICS[subtopic]))
        return (head + "\n(A) The first option as stated in the textbook.\n(B) A second, subtly different option.\n"
                "(C) A common misconception.\n(D) None of the above.\nAnswer with the letter of the correct option.")
    if domain == "rlpr":
        return g.choice(_RLPR_FRAMES).format(thing=g.choice(_RLPR_THINGS[subtopic]), v=g.randint(10, 9999), p=g.randint(2, 35), k=g.randint(3, 60))
    name, task = g.choice(_LCB_TASKS[subtopic])
    return g.choice(_LCB_FRAMES).format(name=name, task=task, n=g.randint(10, 10**6))


def compose(domain: str, subtopic: str, level: str, g: random.Random) -> str:
    """One question of that bucket: a body and a difficulty cue, each in a randomly drawn phrasing."""
    body, cue = _body(domain, subtopic, g), g.choice(_CUES[level])
    return f"{cue} {body}" if g.random() < 0.6 else f"{body}\n({cue.rstrip(':.')}.)"


def subtopic_of(text: str, domain: str) -> str:
    """The subtopic a question's wording shows, within its domain (the domain's first when none matches)."""
    for subtopic, pattern in _SUBTOPIC_WORDS[domain]:
        if pattern.search(text):
            return subtopic
    return SUBTOPICS[domain][0]


@dataclass(frozen=True)
class Question:
    """A simulated world's question (both worlds: ``world`` leaves ``subtopic`` and ``level`` empty)."""

    text: str
    domain: str
    subtopic: str
    level: str
    reference: str  # the gold answer (hidden from the conductor: it only sees ``text``)

    @property
    def bucket(self) -> tuple[str, str, str]:
        return (self.domain, self.subtopic, self.level)


def draw(bucket: tuple[str, str, str], g: random.Random, seen: set[str], gold: Callable[[str], str], tries: int = 2000) -> Optional[Question]:
    """A question of ``bucket`` not in ``seen`` (added to it), or None when the templates are exhausted."""
    domain, subtopic, level = bucket
    for _ in range(tries):
        text = compose(domain, subtopic, level, g)
        if text not in seen:
            seen.add(text)
            return Question(text, domain, subtopic, level, gold(text))
    return None
