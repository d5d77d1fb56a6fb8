"""Code answers: take the program out of the reply, run it on the task's tests in the sandbox.

Three test styles (score = fraction of tests passed):

* HumanEval — ``{"test": "def check(candidate): ...", "entry_point": "fn", "prompt": optional}``.
  Each top-level statement of ``check`` that contains an ``assert`` is one test; the others are setup.
* stdin/stdout (LiveCodeBench) — ``{"tests": [{"input": "...", "output": "..."}, ...]}`` (or the list
  itself). Each test is its own sandboxed run.
* call-based (LiveCodeBench "functional", LeetCode) — ``{"fn_name": "twoSum", "tests": [{"input":
  "[2,7,11,15]\\n9", "output": "[0, 1]"}]}``: one JSON argument per input line, the output is the JSON
  return value; ``class Solution`` methods or plain functions.

The candidate's program never shares a process with anything that judges it (:mod:`._harness`): for
HumanEval the tests run in a second sandbox that calls the program through a pipe and gets its
return values back as plain data; call-based return values come back the same way and are compared
here; stdin/stdout output is compared here. So the program cannot reach the test source, the result
channel or the comparison, and a rigged ``__eq__`` never crosses the boundary.

Comparison follows LiveCodeBench: exact for integers and strings (stdin/stdout: line by line after
stripping, numbers by exact decimal value, so ``1.0`` = ``1`` but ``1_000_000_007`` is not a number);
the one tolerance is for floats: when the expected value is a float (a token with ``.`` or an
exponent), an absolute or relative error up to ``float_tol`` (default 1e-6) passes.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Optional, Union

from ..sandbox import PairResult, SandboxLimits, SandboxResult, SandboxSettings, run_python, run_python_pair
from ._gradeworker import off_loop
from ._harness import driver_program, worker_program
from ._wire import WireError, from_wire, to_wire
from .base import Grade, GraderError, in_grading_process, register_grader
from .extract import answer_block, strip_think

_PY_TAGS = {"python", "py", "python3", "py3"}
_FENCE_TAG = re.compile(r"[ \t]*+([\w+#.-]*+)")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(tag, body) of every ``` fenced block; an unclosed last fence runs to the end. One left-to-right
    scan with str.find (a lazy ``(.*?)`` pattern rescans the rest of the text from every fence)."""
    blocks, i = [], 0
    while (start := text.find("```", i)) >= 0:
        newline = text.find("\n", start + 3)
        if newline < 0:
            break
        tag = _FENCE_TAG.match(text, start + 3).group(1).lower()
        end = text.find("```", newline + 1)
        body = text[newline + 1 : end if end >= 0 else len(text)]
        first, sep, rest = body.partition("\n")
        if not tag and sep and first.strip().lower() in _PY_TAGS:
            # "```" then "python" on a line of its own: the tag written one line late (the 0.5B coder does this
            # when the question's own fence is untagged). As a statement the bare word would only raise NameError.
            tag, body = first.strip().lower(), rest
        blocks.append((tag, body))
        if end < 0:
            break
        i = end + 3
    return blocks


def extract_code(response: str, entry_point: Optional[str] = None) -> str:
    """The program in a reply: the last ```python block (or, for HumanEval, the last one that defines
    the entry point), else the last untagged fenced block, else the reply itself."""
    text = strip_think(response)
    tagged = answer_block(text)
    if tagged is not None and tagged.strip():
        text = tagged
    blocks = _fenced_blocks(text)
    python = [code for tag, code in blocks if tag in _PY_TAGS]
    plain = [code for tag, code in blocks if tag == ""]
    for group in (python, plain):
        if not group:
            continue
        if entry_point:
            defining = [c for c in group if _defines(c, entry_point)]
            if defining:
                return defining[-1].strip("\n")
        return group[-1].strip("\n")
    return text.strip("\n")


def _defines(code: str, name: str) -> bool:
    return re.search(rf"\bdef\s++{re.escape(name)}\s*+\(", code) is not None


# ------------------------------------------------------------------------------------- HumanEval


def _check_statements(test: str) -> list[ast.stmt]:
    try:
        tree = ast.parse(test)
    except SyntaxError as exc:
        raise GraderError(f"HumanEval reference 'test' is not valid Python: {exc}") from exc
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            return node.body
    raise GraderError("HumanEval reference 'test' must define `def check(candidate): ...`")


def _is_test(stmt: ast.stmt) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(stmt))


def _messages(stdout: str) -> list[dict]:
    """The driver's result lines (it writes nothing else to its stdout)."""
    out = []
    for line in stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return out


def _ended(worker: SandboxResult) -> str:
    """Why the candidate's process ended, if it did not just finish or get stopped after the tests."""
    return "" if worker.status in ("ok", "stopped") else f"; the program's process ended: {worker.status}: {worker.reason}"


def _humaneval_program(response: str, ref: dict) -> tuple[str, str, str, str, int]:
    """(code, prompt, test, entry point, number of tests) or GraderError for a malformed reference."""
    test, entry = ref.get("test"), ref.get("entry_point")
    if not isinstance(test, str) or not isinstance(entry, str) or not entry.isidentifier():
        raise GraderError("HumanEval reference needs 'test' (str with def check(candidate)) and 'entry_point' (a function name)")
    total = sum(_is_test(s) for s in _check_statements(test))
    if total == 0:
        raise GraderError("HumanEval reference 'check' has no assert statements: nothing to grade")
    code = extract_code(response, entry)
    prompt = ref.get("prompt") if isinstance(ref.get("prompt"), str) else ""
    if code.strip() and prompt:
        if not _defines(code, entry):
            code = prompt + code  # a bare function body, HumanEval-completion style
        else:
            # A reply that restates the function runs after the prompt, as the original harness runs prompt +
            # completion: the prompt's imports and helpers (from typing import List; poly() for find_zero) are
            # defined, and the reply's own definitions, its function's included, replace the prompt's.
            code = prompt.rstrip("\n") + "\n\n\n" + code
    return code, prompt, test, entry, total


def _humaneval_verdict(pair: PairResult, code: str, total: int) -> Grade:
    msgs = _messages(pair.driver.stdout)
    load = next((m["load_error"] for m in msgs if "load_error" in m), None)
    if load:
        return Grade(0.0, code, f"the program failed to load: {load}{_ended(pair.worker)}")
    results = {m["test"]: m for m in msgs if isinstance(m.get("test"), int)}
    passed = sum(1 for m in results.values() if m.get("ok") is True)
    reason = f"{passed}/{total} tests passed"
    failed = [m for m in results.values() if m.get("ok") is not True]
    if failed:
        reason += f"; first failure: test {failed[0]['test']}: {failed[0].get('error') or 'assertion failed'}"
    setup = next((m["setup_error"] for m in msgs if "setup_error" in m), None)
    if setup:
        reason += f"; test setup failed: {setup}"
    if not any(m.get("done") for m in msgs) and not setup:
        reason += f"; tests stopped early ({pair.driver.status}: {pair.driver.reason})"
    return Grade(min(passed, total) / total, code, reason + _ended(pair.worker))


async def _grade_humaneval(response: str, ref: dict, limits: SandboxLimits, settings: Optional[SandboxSettings], per_test_s: float) -> Grade:
    code, prompt, test, entry, total = await in_grading_process(_humaneval_program, response, ref)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    pair = await run_python_pair(
        driver_program(prompt, test, entry, per_test_s), worker_program(code, entry, per_test_s), limits=limits, settings=settings
    )
    return await off_loop(_humaneval_verdict, pair, code, total)


# ------------------------------------------------------------------------------------ comparison

_NUMBER = re.compile(r"[+-]?+(?:\d++\.?+\d*+|\.\d++)(?:[eE][+-]?+\d++)?+", re.ASCII)


def _number(token: str) -> Optional[Decimal]:
    """A token's exact value if it is a plain decimal number (no ``_``, no NaN/Infinity, ASCII digits)."""
    if not _NUMBER.fullmatch(token):
        return None
    try:
        return Decimal(token)
    except InvalidOperation:
        return None


def _is_float_literal(token: str) -> bool:
    return any(c in token for c in ".eE")


def _tokens_match(got: str, want: str, float_tol: float) -> bool:
    if got == want:
        return True
    g, w = _number(got), _number(want)
    if g is None or w is None:
        return False
    if g == w:
        return True
    return _is_float_literal(want) and abs(g - w) <= Decimal(float_tol) * max(Decimal(1), abs(w))


def outputs_match(got: str, want: str, float_tol: float = 1e-6) -> bool:
    """LiveCodeBench's stdin/stdout rule: same number of lines (outer blank lines and each line's outer
    whitespace ignored); a line matches exactly, or token by token with numbers compared by exact
    value; a float expected token (``.``/exponent) also matches within ``float_tol`` (absolute or relative)."""
    got_lines = [line.strip() for line in got.strip().split("\n")]
    want_lines = [line.strip() for line in want.strip().split("\n")]
    if len(got_lines) != len(want_lines):
        return False
    for g, w in zip(got_lines, want_lines):
        if g == w:
            continue
        gt, wt = g.split(), w.split()
        if len(gt) != len(wt) or not all(_tokens_match(a, b, float_tol) for a, b in zip(gt, wt)):
            return False
    return True


def values_match(got: Any, want: Any, float_tol: float = 1e-6) -> bool:
    """LiveCodeBench's call-based rule (``prediction == expected``, a returned tuple read as a list),
    made exact for booleans (``True`` is not ``1``) and with ``float_tol`` for expected floats only."""
    if isinstance(got, tuple):
        got = list(got)
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and got is want
    if isinstance(want, float) and isinstance(got, (int, float)):
        return got == want or math.isclose(got, want, rel_tol=float_tol, abs_tol=float_tol)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(values_match(a, b, float_tol) for a, b in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(values_match(got[k], want[k], float_tol) for k in want)
    if isinstance(want, int) and isinstance(got, (int, float)):
        return got == want  # exact: 1000000000 is not 1000000007
    return type(got) is type(want) and got == want


# ------------------------------------------------------------------------------------ stdin/stdout


def _stdio_tests(ref: Union[dict, list]) -> list[tuple[str, str]]:
    tests = ref.get("tests") if isinstance(ref, dict) else ref
    if not isinstance(tests, list) or not tests:
        raise GraderError("stdin/stdout reference needs 'tests': a non-empty list of {'input': str, 'output': str}")
    out = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise GraderError(f"stdin/stdout test {i} must be {{'input': str, 'output': str}}, got {t!r:.120}")
        out.append((t["input"], t["output"]))
    return out


def _stdio_verdict(tests: list[tuple[str, str]], results: list[SandboxResult], code: str, float_tol: float) -> Grade:
    passed, first = 0, None
    for i, ((_, want), res) in enumerate(zip(tests, results)):
        if res.status == "ok" and not res.truncated and outputs_match(res.stdout, want, float_tol):
            passed += 1
        elif first is None:
            if res.status != "ok":
                first = f"test {i}: {res.status}: {res.reason}"
            else:
                first = f"test {i}: wrong answer (expected {want.strip()[:80]!r}, got {res.stdout.strip()[:80]!r})"
    reason = f"{passed}/{len(tests)} tests passed" + (f"; first failure: {first}" if first else "")
    return Grade(passed / len(tests), code, reason)


async def _grade_stdio(response: str, ref: Union[dict, list], limits: SandboxLimits, settings: Optional[SandboxSettings], float_tol: float) -> Grade:
    tests = _stdio_tests(ref)
    code = await in_grading_process(extract_code, response)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    results = await asyncio.gather(*(run_python(code, stdin=inp, limits=limits, settings=settings) for inp, _ in tests))
    return await off_loop(_stdio_verdict, tests, list(results), code, float_tol)


# ------------------------------------------------------------------------- call-based (LeetCode)

# What LiveCodeBench puts before a functional solution.
_CALL_PRELUDE = (
    "from typing import *\nfrom collections import *\n"
    "import math, heapq, bisect, itertools, functools, string, re, collections, operator\n"
)


def _call_args(text: str, i: int) -> list:
    try:
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    except json.JSONDecodeError as exc:
        raise GraderError(f"call-based test {i}: 'input' must be one JSON value per line, got {text!r:.80}") from exc


def _call_program(response: str, ref: dict) -> tuple[str, str, list[Any], str]:
    """(code, function name, expected values, request lines) or GraderError for a malformed reference."""
    fn_name = ref.get("fn_name")
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise GraderError("call-based reference needs 'fn_name': the method/function name (LiveCodeBench metadata func_name)")
    tests = _stdio_tests(ref)
    expected = []
    for i, (_, out) in enumerate(tests):
        try:
            expected.append(json.loads(out))
        except json.JSONDecodeError as exc:
            raise GraderError(f"call-based test {i}: 'output' must be JSON (the return value), got {out!r:.80}") from exc
    requests = "".join(
        json.dumps({"id": i, "args": to_wire(_call_args(inp, i)), "kwargs": to_wire({})}) + "\n" for i, (inp, _) in enumerate(tests)
    )
    return extract_code(response, fn_name), fn_name, expected, requests


def _call_verdict(result: SandboxResult, code: str, expected: list[Any], float_tol: float) -> Grade:
    replies = _messages(result.stdout)
    if not replies or not replies[0].get("ready"):
        why = replies[0].get("load_error") if replies else f"{result.status}: {result.reason}"
        return Grade(0.0, code, f"the program failed to load: {why}")
    by_id: dict[int, dict] = {}
    for msg in replies[1:]:
        if isinstance(msg.get("id"), int):
            by_id.setdefault(msg["id"], msg)  # the program may write look-alike lines: they are just answers
    passed, first = 0, None
    for i, want in enumerate(expected):
        msg = by_id.get(i)
        try:
            got = None if msg is None or "error" in msg else from_wire(msg.get("value"))
        except WireError as exc:
            msg = {"error": str(exc)}
        if msg is None:
            first = first or f"test {i}: not run ({result.status}: {result.reason})"
        elif "error" in msg:
            first = first or f"test {i}: {str(msg['error'])[:300]}"
        elif values_match(got, want, float_tol):
            passed += 1
        else:
            first = first or f"test {i}: wrong answer (expected {json.dumps(want)[:80]}, got {_show(got)[:80]})"
    reason = f"{passed}/{len(expected)} tests passed" + (f"; first failure: {first}" if first else "")
    return Grade(passed / len(expected), code, reason)


async def _grade_call(response: str, ref: dict, limits: SandboxLimits, settings: Optional[SandboxSettings], per_test_s: float, float_tol: float) -> Grade:
    code, fn_name, expected, requests = await in_grading_process(_call_program, response, ref)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    result = await run_python(worker_program(code, fn_name, per_test_s, _CALL_PRELUDE), stdin=requests, limits=limits, settings=settings)
    return await off_loop(_call_verdict, result, code, expected, float_tol)


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


# ------------------------------------------------------------------------------------------ grader


@register_grader("code")
async def grade_code(
    response: str,
    reference: Any,
    *,
    limits: Union[SandboxLimits, dict, None] = None,
    settings: Optional[SandboxSettings] = None,
    per_test_s: float = 5.0,
    float_tol: float = 1e-6,
) -> Grade:
    """Pass rate of the reply's program on the reference tests (HumanEval, stdin/stdout or call-based)."""
    if isinstance(limits, dict):
        try:
            limits = SandboxLimits(**limits)
        except Exception as exc:
            raise GraderError(f"invalid sandbox limits {limits!r}: {exc}") from exc
    if not 0 <= float_tol < 1:
        raise GraderError(f"float_tol must be in [0, 1), got {float_tol!r}")
    if isinstance(reference, dict) and "test" in reference:
        return await _grade_humaneval(response, reference, limits or SandboxLimits(wall_s=20.0, cpu_s=10), settings, per_test_s)
    if isinstance(reference, dict) and "fn_name" in reference:
        return await _grade_call(response, reference, limits or SandboxLimits(wall_s=20.0, cpu_s=10), settings, per_test_s, float_tol)
    if isinstance(reference, (dict, list)):
        return await _grade_stdio(response, reference, limits or SandboxLimits(), settings, float_tol)
    raise GraderError(
        "code reference must be a HumanEval dict {'test', 'entry_point'[, 'prompt']}, stdin/stdout tests "
        "{'tests': [...]} or call-based tests {'fn_name': ..., 'tests': [...]}"
        f"; got {type(reference).__name__}"
    )
