"""Generated function-writing problems (``codegen``): training and search questions for code that are not a benchmark's.

Each problem comes from a template (string, list and number manipulations) with random parameters: a signature and a
docstring that states the rule and gives three examples (``>>> f(x)`` then the value, as HumanEval writes them, so
``question_examples`` reads them), graded by hidden tests in the sandbox through the code grader. A template's reference
implementation only makes the examples and the tests; it never reaches a worker. The hidden tests use inputs the
docstring does not show. Deterministic by seed: ``load_task("codegen", limit=N, seed=S)``.

Never HumanEval or CHAMP: the function names carry their parameters (``rotate_right_by_3``), and a test checks that no
name or rule equals a HumanEval problem's (issue 67: "training and search questions for code come from tasks you build").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from .base import Question, Task, TaskError, register_task
from .humaneval import INSTRUCTION

N_EXAMPLES = 3  # in the docstring
N_TESTS = 8  # hidden, on inputs the docstring does not show
DEFAULT_SIZE = 200
WORDS = ("apple", "sky", "river", "stone", "moon", "tea", "code", "blue", "garden", "owl", "map", "zero", "quick", "lamp")


@dataclass(frozen=True)
class Problem:
    entry: str
    argument: str  # the one parameter, with its annotation: "xs: list"
    returns: str
    rule: str  # the docstring's sentence
    reference: Callable[[Any], Any]
    draw: Callable[[random.Random], Any]  # one input


def _ints(rng: random.Random, lo: int = -9, hi: int = 20, n_max: int = 8) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, n_max))]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _rotate(rng: random.Random) -> Problem:
    k, right = rng.randint(1, 4), rng.random() < 0.5
    side = "right" if right else "left"

    def ref(xs: list) -> list:
        if not xs:
            return []
        s = k % len(xs)
        return xs[-s:] + xs[:-s] if right and s else xs[s:] + xs[:s]

    return Problem(f"rotate_{side}_by_{k}", "xs: list", "list", f"Return the list xs rotated {side} by {k} positions, wrapping around "
                   "(an empty list stays empty).", ref, lambda r: _ints(r, 0, 9, 7))


def _count_letters(rng: random.Random) -> Problem:
    letters = "".join(sorted(rng.sample("abcdeilmnorstuy", rng.randint(1, 3))))
    return Problem(f"count_letters_{letters}", "s: str", "int", f"Return how many characters of s are one of the letters {', '.join(letters)}.",
                   lambda s: sum(ch in letters for ch in s), _text)


def _sum_multiples(rng: random.Random) -> Problem:
    m = rng.randint(2, 7)
    return Problem(f"sum_multiples_of_{m}", "xs: list", "int", f"Return the sum of the elements of xs that are divisible by {m} (0 if there are none).",
                   lambda xs: sum(x for x in xs if x % m == 0), _ints)


def _replace(rng: random.Random) -> Problem:
    a, b = rng.sample("aeiorstn", 2)
    return Problem(f"replace_{a}_with_{b}", "s: str", "str", f"Return s with every '{a}' replaced by '{b}'.", lambda s: s.replace(a, b), _text)


def _every_nth(rng: random.Random) -> Problem:
    n, start = rng.randint(2, 4), rng.randint(0, 2)
    return Problem(f"every_{n}th_from_{start}", "xs: list", "list", f"Return the elements of xs at positions {start}, {start + n}, {start + 2 * n}, "
                   f"... (every {n}th element, starting at index {start}).", lambda xs: xs[start::n], lambda r: _ints(r, 0, 9, 9))


def _clamp(rng: random.Random) -> Problem:
    lo = rng.randint(-3, 3)
    hi = lo + rng.randint(2, 8)
    return Problem(f"clamp_between_{lo}_and_{hi}".replace("-", "minus"), "xs: list", "list",
                   f"Return xs with every element below {lo} replaced by {lo} and every element above {hi} replaced by {hi}.",
                   lambda xs: [min(max(x, lo), hi) for x in xs], _ints)


def _digit_power(rng: random.Random) -> Problem:
    p = rng.randint(1, 3)
    return Problem(f"digit_power_sum_{p}", "n: int", "int", f"Return the sum of the decimal digits of the non-negative integer n, each raised to the power {p}.",
                   lambda n: sum(int(d) ** p for d in str(n)), lambda r: r.randint(0, 99999))


def _long_words(rng: random.Random) -> Problem:
    k = rng.randint(2, 5)
    return Problem(f"words_longer_than_{k}", "s: str", "list", f"Return the words of s (separated by single spaces) that have more than {k} letters, in order.",
                   lambda s: [w for w in s.split(" ") if len(w) > k], _text)


def _shift(rng: random.Random) -> Problem:
    k = rng.randint(1, 25)
    return Problem(f"shift_letters_by_{k}", "s: str", "str", f"Return s with every lowercase letter moved {k} places forward in the alphabet, "
                   "wrapping from z to a; other characters stay as they are.",
                   lambda s: "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in s), _text)


def _pairs(rng: random.Random) -> Problem:
    t = rng.randint(0, 12)
    return Problem(f"count_pairs_summing_to_{t}", "xs: list", "int", f"Return how many pairs of positions i < j have xs[i] + xs[j] == {t}.",
                   lambda xs: sum(xs[i] + xs[j] == t for i in range(len(xs)) for j in range(i + 1, len(xs))), lambda r: _ints(r, 0, 10, 7))


def _alternate(rng: random.Random) -> Problem:
    upper = rng.random() < 0.5
    first, then = ("upper", "lower") if upper else ("lower", "upper")
    return Problem(f"alternate_case_{first}_first", "s: str", "str", f"Return s with the characters at even indices in {first} case and those at odd "
                   f"indices in {then} case.", lambda s: "".join((c.upper() if (i % 2 == 0) == upper else c.lower()) for i, c in enumerate(s)), _text)


def _kth_largest(rng: random.Random) -> Problem:
    k = rng.randint(2, 3)
    return Problem(f"distinct_largest_number_{k}", "xs: list", "int | None", f"Return the {k}th largest distinct value in xs, or None if xs has fewer than {k} "
                   "distinct values.", lambda xs: sorted(set(xs), reverse=True)[k - 1] if len(set(xs)) >= k else None, lambda r: _ints(r, 0, 9, 7))


def _running(rng: random.Random) -> Problem:
    m = rng.randint(5, 13)
    return Problem(f"running_sum_mod_{m}", "xs: list", "list", f"Return the list whose i-th element is (xs[0] + ... + xs[i]) % {m}.",
                   lambda xs: [sum(xs[: i + 1]) % m for i in range(len(xs))], lambda r: _ints(r, 0, 20, 7))


TEMPLATES: dict[str, Callable[[random.Random], Problem]] = {
    "rotate": _rotate, "count_letters": _count_letters, "sum_multiples": _sum_multiples, "replace": _replace, "every_nth": _every_nth,
    "clamp": _clamp, "digit_power": _digit_power, "long_words": _long_words, "shift": _shift, "pairs": _pairs, "alternate": _alternate,
    "kth_largest": _kth_largest, "running": _running,
}


def _inputs(problem: Problem, rng: random.Random, n: int) -> list[Any]:
    """``n`` distinct inputs (by repr); fewer if the template cannot draw that many."""
    out: dict[str, Any] = {}
    for _ in range(50 * n):
        value = problem.draw(rng)
        out.setdefault(repr(value), value)
        if len(out) == n:
            break
    return list(out.values())


def prompt_of(problem: Problem, examples: list[Any]) -> str:
    """The function to write, as HumanEval asks: signature and docstring with examples."""
    lines = [f"def {problem.entry}({problem.argument}) -> {problem.returns}:", f'    """{problem.rule}']
    for value in examples:
        lines += [f"    >>> {problem.entry}({value!r})", f"    {problem.reference(value)!r}"]
    return "\n".join(lines + ['    """', ""])


def tests_of(problem: Problem, inputs: list[Any]) -> str:
    """The hidden tests: ``check(candidate)`` in HumanEval's form."""
    body = [f"    assert candidate({value!r}) == {problem.reference(value)!r}" for value in inputs]
    return "def check(candidate):\n" + "\n".join(body) + "\n"


def problem_of(template: str, seed: int, i: int) -> tuple[Problem, list[Any], list[Any]]:
    """Problem ``i`` of ``seed`` from ``template``: (the problem, the docstring's inputs, the hidden tests' inputs)."""
    rng = random.Random(f"codegen|{seed}|{i}")
    problem = TEMPLATES[template](rng)
    inputs = _inputs(problem, rng, N_EXAMPLES + N_TESTS)
    return problem, inputs[:N_EXAMPLES], inputs[N_EXAMPLES:]


def question(template: str, seed: int, i: int) -> Question:
    problem, examples, hidden = problem_of(template, seed, i)
    prompt = prompt_of(problem, examples)
    return Question(id=f"codegen/{seed}/{i}/{problem.entry}", prompt=prompt, grader="code",
                    reference={"test": tests_of(problem, hidden), "entry_point": problem.entry, "prompt": prompt},
                    metadata={"domain": "code", "template": template, "index": i})


@register_task("codegen", description="generated function-writing problems with hidden tests (offline; training and search, never a benchmark)",
               how_to_get="built in: no data needed", offline=True, aliases=("generated-functions",))
def build(*, limit=None, data=None, seed=0, templates: str = "") -> Task:
    """``templates``: a comma-separated subset of ``TEMPLATES`` (default all), drawn in turn."""
    if data is not None:
        raise TaskError("codegen generates its problems; it takes no --data file")
    names = [t.strip() for t in str(templates).split(",") if t.strip()] or list(TEMPLATES)
    unknown = [t for t in names if t not in TEMPLATES]
    if unknown:
        raise TaskError(f"codegen: unknown template(s) {unknown}; known: {', '.join(TEMPLATES)}")
    size = DEFAULT_SIZE if limit is None else int(limit)
    seen: set[str] = set()
    questions: list[Question] = []
    i = 0
    while len(questions) < size and i < 20 * size:  # the same template and parameters twice is one problem
        q = question(names[i % len(names)], int(seed), i)
        i += 1
        if q.reference["entry_point"] not in seen:
            seen.add(q.reference["entry_point"])
            questions.append(q)
    return Task("codegen", questions, INSTRUCTION, domain="code", source=f"generated (seed {seed})")
