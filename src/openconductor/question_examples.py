"""The examples a code question gives in its own text, and whether a program reproduces them.

HumanEval docstrings write ``>>> f(x)`` with the expected value on the next line, or ``f(x) == y``,
``f(x) ➞ y``, ``f(x) => y``, ``f(x) ==> y``, ``f(x) -> y``, ``f(x) should return y``. These are read from
the question a worker is shown, never from a grader's reference: the hidden tests stay with the grader.

The program runs as the code grader runs a candidate (``graders._harness``): in one sandbox, called through a
pipe from a second sandbox that holds the examples, so what it returns crosses as plain data only.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import NamedTuple, Optional

from .verdicts import ExampleResult, ExamplesVerdict, clip

MAX_EXAMPLES = 10  # more is a table, not examples; it also bounds the sandbox time per step
MAX_EXAMPLE_CHARS = 400
PER_EXAMPLE_S = 5.0  # as the code grader allows each test
# "def name(" at a line start, found after a "\n" (the question gets one in front): a pattern that starts with a
# literal is searched at memory speed, where "^def" under re.M was tried at every position (19 ms for a 900 KB
# question, on the event loop; issue 70).
_DEF = re.compile(r"\ndef[ \t]+([A-Za-z_]\w*)[ \t]*\(")
# Longest first: "==>" must not be read as "==" followed by ">".
_SEPARATORS = ("==>", "=>", "➞", "->", "==", "should return", "returns")
# "f(12, 15) = 14" is an example only under an "Example" heading: above it "tri(1) = 3" defines the function.
_LOOSE = " = "


class Example(NamedTuple):
    call: str  # an expression that calls the entry point, as written
    expected: str  # a Python literal, as written


def entry_point(question: str) -> Optional[str]:
    """The function the question asks for: its last top-level ``def`` (HumanEval puts helpers first)."""
    names = _DEF.findall("\n" + question)
    return names[-1] if names else None


def _call_source(expr: str, entry: str) -> Optional[str]:
    """``expr`` as source without its comment, if it is an expression that calls ``entry`` on values alone (names
    other than ``entry`` and builtins, "is_happy(a)", are no example; nor is a comparison, "f(x) == 1 + 9")."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    nodes = list(ast.walk(tree))
    calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == entry for n in nodes)
    names = all(n.id == entry or n.id in _BUILTINS for n in nodes if isinstance(n, ast.Name))
    return ast.unparse(tree) if calls and names and not isinstance(tree.body, ast.Compare) else None


def _positional_call(entry: str, arguments: str) -> Optional[str]:
    """``entry(arguments)`` with ``name = value`` arguments passed by position in the order written ("Input: arr = [1],
    k = 3"): a program that names its parameters otherwise still gets the example."""
    if not arguments.strip():
        return None  # "Input:" with the values on the next lines: not read
    try:
        tree = ast.parse(f"{entry}({arguments.strip().rstrip(',')})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or any(k.arg is None for k in call.keywords):
        return None
    return _call_source(ast.unparse(ast.Call(func=call.func, args=call.args + [k.value for k in call.keywords], keywords=[])), entry)


_BUILTINS = frozenset(dir(builtins))
_WORDS = {"true": "True", "false": "False", "none": "None"}


def _literal(text: str) -> Optional[str]:
    """``text`` as a Python literal's source, or None; a trailing comment or full stop is dropped if that makes one."""
    text = text.strip()
    cuts = [text] + [text[:i] for i, ch in enumerate(text) if ch == "#"]
    for cut in cuts:
        cut = cut.strip()
        for candidate in dict.fromkeys((cut.rstrip(".").strip(), cut, _WORDS.get(cut.rstrip(".").strip(), ""))):
            if not candidate or len(candidate) > MAX_EXAMPLE_CHARS:
                continue
            try:
                value = ast.literal_eval(candidate)
            except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
                continue
            return repr(value)  # canonical: a comment the parser skipped ("24 # 21 + 3") is not carried into the check
    return None


def _doctest_examples(lines: list[str], entry: str) -> list[Example]:
    """``>>> call`` followed by the expected value's lines (up to a blank line, the next ``>>>`` or the docstring's
    end), or ``>>> call == expected`` on one line."""
    found = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith(">>>"):
            continue
        expected = []
        for nxt in lines[i + 1 :]:
            value = nxt.strip()
            if not value or value.startswith(">>>") or value.startswith(('"""', "'''")):
                break
            expected.append(value)
        # The value's first line alone, else all its lines (a long list wrapped); a line after it may be prose.
        want = (_literal(expected[0]) or _literal(" ".join(expected))) if expected else None
        call = _call_source(text[3:], entry)
        if call is not None and want is not None:
            found.append(Example(call, want))
        elif not expected and (inline := _inline_example(text[3:], entry)) is not None:
            found.append(inline)
    return found


def _inline_example(line: str, entry: str, loose: bool = False) -> Optional[Example]:
    """``call SEP expected`` on one line, split at the first separator where both sides read as they should; text
    before the call ("for", a bullet) is dropped when the whole left side is not a call."""
    text = line.strip().rstrip(",;")
    if f"{entry}(" not in text or text.startswith(">>>") or len(text) > 2 * MAX_EXAMPLE_CHARS:
        return None
    for sep in _SEPARATORS + ((_LOOSE,) if loose else ()):
        start = 0
        while (at := text.find(sep, start)) >= 0:
            left, want = text[:at].strip(), _literal(text[at + len(sep) :])
            call = _call_source(left, entry) or _call_source(left[left.find(f"{entry}(") :], entry)
            if want is not None and call is not None:
                return Example(call, want)
            start = at + 1
    return None


_FOR = re.compile(r"^\W*for\s+(?P<args>.+?),?\s+the\s+(?:output|result|answer)\s+should\s+be\s*:?\s*(?P<want>.+)$", re.I)


def _stated_examples(lines: list[str], entry: str) -> list[Example]:
    """"Input: ARGS" with "Output: VALUE" on one of the next lines, and "For ARGS the output should be VALUE"."""
    found = []
    for i, line in enumerate(lines):
        text = line.strip()
        if (m := _FOR.match(text)) is not None:
            pairs = [(m["args"], m["want"])]
        elif text.lower().startswith("input:"):
            outputs = [n.strip() for n in lines[i + 1 : i + 4] if n.strip().lower().startswith("output:")]
            pairs = [(text[6:], outputs[0][7:])] if outputs else []
        else:
            continue
        for args, want in pairs:
            call, value = _positional_call(entry, args), _literal(want)
            if call is not None and value is not None:
                found.append(Example(call, value))
    return found


def parse_examples(question: str, entry: Optional[str] = None) -> list[Example]:
    """The question's own examples of ``entry`` (default: ``entry_point(question)``), in order, without repeats."""
    entry = entry or entry_point(question)
    if entry is None:
        return []
    lines = question.splitlines()
    heading = next((i for i, line in enumerate(lines) if "example" in line.lower()), len(lines))
    inline = [e for e in (_inline_example(line, entry, i > heading) for i, line in enumerate(lines)) if e is not None]
    found = _doctest_examples(lines, entry) + inline + _stated_examples(lines, entry)
    return list(dict.fromkeys(found))[:MAX_EXAMPLES]


# ------------------------------------------------------------------------------------------- running

# Exact where the question is exact; a float expected (or returned) within 1e-6, as the code grader allows.
# A list is not a tuple: the hidden tests compare with ==, which tells them apart.
_CHECKS = '''
import math
def _oc_same(got, want):
    if isinstance(got, bool) or isinstance(want, bool):
        return got == want
    if isinstance(got, float) or isinstance(want, float):
        return isinstance(got, (int, float)) and isinstance(want, (int, float)) and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
    if isinstance(want, (list, tuple)):
        return type(got) is type(want) and len(got) == len(want) and all(_oc_same(a, b) for a, b in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_oc_same(got[k], want[k]) for k in want)
    return got == want
def _oc_check(got, want):
    if not _oc_same(got, want):
        raise AssertionError("returned " + repr(got)[:200])
'''


def check_program(examples: list[Example]) -> str:
    """The examples as a HumanEval ``check`` module: one assert statement per example (``_harness`` counts them)."""
    body = "".join(f"    assert _oc_check(({e.call}), {e.expected}) is None\n" for e in examples)
    return _CHECKS + "def check(candidate):\n" + body


def _result(example: Example, message: Optional[dict]) -> ExampleResult:
    if message is None:
        return ExampleResult(call=example.call, expected=example.expected, passed=False, error="not run (the run stopped before it)")
    if message.get("ok") is True:
        return ExampleResult(call=example.call, expected=example.expected, passed=True, got=example.expected)
    error = str(message.get("error") or "assertion failed")
    if error.startswith("AssertionError: returned "):
        return ExampleResult(call=example.call, expected=example.expected, passed=False, got=clip(error.removeprefix("AssertionError: returned "), 200))
    return ExampleResult(call=example.call, expected=example.expected, passed=False, error=clip(error.removeprefix("CandidateError: "), 200))


def examples_verdict(entry: str, examples: list[Example], messages: list[dict]) -> ExamplesVerdict:
    """The verdict from the check driver's messages (``_harness``: load_error, one per test, done)."""
    load = next((m["load_error"] for m in messages if "load_error" in m), None)
    if load:
        return ExamplesVerdict(entry_point=entry, total=len(examples), load_error=clip(str(load), 300))
    by_test = {m["test"]: m for m in messages if isinstance(m.get("test"), int)}
    results = [_result(e, by_test.get(i)) for i, e in enumerate(examples)]
    return ExamplesVerdict(entry_point=entry, total=len(examples), passed=sum(r.passed for r in results), results=results)


async def run_examples(code: str, entry: str, examples: list[Example]) -> ExamplesVerdict:
    """Run ``code``'s ``entry`` on ``examples`` in the sandbox. A sandbox that cannot run here is said, not raised."""
    from .graders._harness import driver_program, worker_program
    from .graders.code_grade import _messages
    from .sandbox import SandboxError, SandboxLimits, run_python_pair

    try:
        pair = await run_python_pair(driver_program("", check_program(examples), entry, PER_EXAMPLE_S),
                                     worker_program(code, entry, PER_EXAMPLE_S), limits=SandboxLimits(wall_s=20.0, cpu_s=10))
    except SandboxError as exc:
        return ExamplesVerdict(entry_point=entry, total=len(examples), unavailable=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return examples_verdict(entry, examples, _messages(pair.driver.stdout))
