"""Code answers: take the program out of the reply, run it on the task's tests in the sandbox.

Three test styles (score = fraction of tests passed):

* HumanEval — ``{"test": "def check(candidate): ...", "entry_point": "fn", "prompt": optional}``.
  Each top-level statement of ``check`` that contains an ``assert`` is one test; the others are setup.
  All run in ONE sandboxed process (a harness executes them one by one, each under its own alarm).
* stdin/stdout (LiveCodeBench) — ``{"tests": [{"input": "...", "output": "..."}, ...]}`` (or the list
  itself). Each test is its own sandboxed run; output is compared token by token (whitespace-
  insensitive, numbers within 1e-6).
* call-based (LiveCodeBench "functional", LeetCode) — ``{"fn_name": "twoSum", "tests": [{"input":
  "[2,7,11,15]\\n9", "output": "[0, 1]"}]}``: one JSON argument per input line, the output is the JSON
  return value; ``class Solution`` methods or plain functions. One sandboxed run for all tests.

Limitation, documented: the HumanEval harness shares a process with the candidate; results travel
on stdout behind a random per-run token given on stdin, so a program cannot forge them by printing,
but a program written to inspect the interpreter's memory could, and ``check``'s own ``==`` runs on
the candidate's objects (a rigged ``__eq__`` passes). stdin/stdout tests compare output the program
cannot see in advance; call-based results are compared as JSON on the host.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import re
import secrets
from typing import Any, Optional, Union

from ..sandbox import SandboxLimits, SandboxResult, SandboxSettings, run_python
from .base import Grade, GraderError, register_grader
from .extract import answer_block as answer_tag, strip_think

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_PY_TAGS = {"python", "py", "python3", "py3"}


def extract_code(response: str, entry_point: Optional[str] = None) -> str:
    """The program in a reply: the last ```python block (or, for HumanEval, the last one that defines
    the entry point), else the last untagged fenced block, else the reply itself."""
    text = strip_think(response)
    tagged = answer_tag(text)
    if tagged is not None and tagged.strip():
        text = tagged
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    python = [code for tag, code in blocks if tag in _PY_TAGS]
    plain = [code for tag, code in blocks if tag == ""]
    for group in (python, plain):
        if not group:
            continue
        if entry_point:
            defining = [c for c in group if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", c)]
            if defining:
                return defining[-1].strip("\n")
        return group[-1].strip("\n")
    return text.strip("\n")


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


# The start of both harnesses, run inside the sandbox. The run token is read from stdin first, so
# printing cannot forge results; results are written to a duplicate of the original stdout.
_PRELUDE = r'''_token = sys.stdin.readline().strip()
sys.stdin = open(os.devnull)
_fd = os.dup(1)
def _say(obj):
    os.write(_fd, ("\n" + _token + " " + json.dumps(obj) + "\n").encode())
def _alarm(signum, frame):
    raise TimeoutError("test exceeded its time limit")
'''

# Runs inside the sandbox. Reads the run token from stdin first, so printing cannot forge results.
_HARNESS = r'''
import ast, json, os, signal, sys
''' + _PRELUDE + r'''_CANDIDATE, _TEST, _ENTRY, _PER_TEST = json.loads(__OC_PAYLOAD__)
ns = {"__name__": "solution"}
signal.signal(signal.SIGALRM, _alarm)
signal.setitimer(signal.ITIMER_REAL, _PER_TEST)
try:
    exec(compile(_CANDIDATE, "solution.py", "exec"), ns)
    exec(compile(_TEST, "test.py", "exec"), ns)
    fn = ns[_ENTRY]
except BaseException as exc:
    _say({"load_error": (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:500]})
    sys.exit(0)
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
body = next(n for n in ast.parse(_TEST).body if isinstance(n, ast.FunctionDef) and n.name == "check").body
env = dict(ns)  # check's locals live here; a copy, so `str = ...` in a test cannot shadow the solution's names
env["candidate"] = fn
index = 0
for stmt in body:
    is_test = any(isinstance(n, ast.Assert) for n in ast.walk(stmt))
    signal.setitimer(signal.ITIMER_REAL, _PER_TEST)
    try:
        exec(compile(ast.Module([stmt], []), "test.py", "exec"), env)
        error = None
    except BaseException as exc:
        error = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if is_test:
        _say({"test": index, "ok": error is None, "error": error})
        index += 1
    elif error is not None:
        _say({"setup_error": error})
        break
_say({"done": True})
'''


def _harness(candidate: str, test: str, entry_point: str, per_test_s: float) -> str:
    payload = json.dumps([candidate, test, entry_point, per_test_s])
    return _HARNESS.replace("__OC_PAYLOAD__", repr(payload))


def _messages(result: SandboxResult, token: str) -> list[dict]:
    out = []
    for line in result.stdout.splitlines():
        if line.startswith(token + " "):
            try:
                out.append(json.loads(line[len(token) + 1 :]))
            except json.JSONDecodeError:
                continue
    return out


async def _grade_humaneval(response: str, ref: dict, limits: SandboxLimits, settings: Optional[SandboxSettings], per_test_s: float) -> Grade:
    test, entry = ref.get("test"), ref.get("entry_point")
    if not isinstance(test, str) or not isinstance(entry, str) or not entry.isidentifier():
        raise GraderError("HumanEval reference needs 'test' (str with def check(candidate)) and 'entry_point' (a function name)")
    statements = _check_statements(test)
    total = sum(_is_test(s) for s in statements)
    if total == 0:
        raise GraderError("HumanEval reference 'check' has no assert statements: nothing to grade")
    code = extract_code(response, entry)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    prompt = ref.get("prompt")
    if isinstance(prompt, str) and not re.search(rf"\bdef\s+{re.escape(entry)}\s*\(", code):
        code = prompt + code  # a bare function body, HumanEval-completion style
    token = secrets.token_hex(16)
    result = await run_python(_harness(code, test, entry, per_test_s), stdin=token + "\n", limits=limits, settings=settings)
    msgs = _messages(result, token)
    load = next((m["load_error"] for m in msgs if "load_error" in m), None)
    if load:
        return Grade(0.0, code, f"the program failed to load: {load}")
    results = {m["test"]: m for m in msgs if "test" in m}
    passed = sum(1 for m in results.values() if m["ok"])
    done = any(m.get("done") for m in msgs)
    reason = f"{passed}/{total} tests passed"
    failed = [m for m in results.values() if not m["ok"]]
    if failed:
        reason += f"; first failure: test {failed[0]['test']}: {failed[0]['error'] or 'assertion failed'}"
    setup = next((m["setup_error"] for m in msgs if "setup_error" in m), None)
    if setup:
        reason += f"; test setup failed: {setup}"
    if not done and not setup:
        reason += f"; run stopped early ({result.status}: {result.reason})"
    return Grade(passed / total, code, reason)


# ------------------------------------------------------------------------------------ stdin/stdout


def _tokens_equal(got: str, want: str, tol: float = 1e-6) -> bool:
    a, b = got.split(), want.split()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not math.isclose(fx, fy, rel_tol=tol, abs_tol=tol):
            return False
    return True


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


async def _grade_stdio(response: str, ref: Union[dict, list], limits: SandboxLimits, settings: Optional[SandboxSettings]) -> Grade:
    tests = _stdio_tests(ref)
    code = extract_code(response)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    results = await asyncio.gather(*(run_python(code, stdin=inp, limits=limits, settings=settings) for inp, _ in tests))
    passed, first = 0, None
    for i, ((_, want), res) in enumerate(zip(tests, results)):
        if res.status == "ok" and _tokens_equal(res.stdout, want):
            passed += 1
        elif first is None:
            if res.status != "ok":
                first = f"test {i}: {res.status}: {res.reason}"
            else:
                first = f"test {i}: wrong answer (expected {want.strip()[:80]!r}, got {res.stdout.strip()[:80]!r})"
    reason = f"{passed}/{len(tests)} tests passed" + (f"; first failure: {first}" if first else "")
    return Grade(passed / len(tests), code, reason)


# ------------------------------------------------------------------------- call-based (LeetCode)

# LiveCodeBench's functional tests: each input line is one JSON argument, the output is the JSON
# return value. Return values are serialised to JSON inside and compared here, on the host, so an
# object with a rigged __eq__ cannot pass.
_CALL_HARNESS = r"""
import json, os, signal, sys
""" + _PRELUDE + r"""_CANDIDATE, _FN, _INPUTS, _PER_TEST = json.loads(__OC_PAYLOAD__)
_HEADER = "from typing import *\nfrom collections import *\nimport math, heapq, bisect, itertools, functools, string, re\n"
ns = {"__name__": "solution"}
signal.signal(signal.SIGALRM, _alarm)
signal.setitimer(signal.ITIMER_REAL, _PER_TEST)
try:
    exec(compile(_HEADER + _CANDIDATE, "solution.py", "exec"), ns)
    fn = getattr(ns["Solution"](), _FN) if "Solution" in ns else ns[_FN]
except BaseException as exc:
    _say({"load_error": (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:500]})
    sys.exit(0)
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
for index, text in enumerate(_INPUTS):
    signal.setitimer(signal.ITIMER_REAL, _PER_TEST)
    try:
        args = [json.loads(line) for line in text.split("\n") if line.strip()]
        value = json.dumps(fn(*args))
        _say({"test": index, "value": value})
    except BaseException as exc:
        _say({"test": index, "error": (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:300]})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
_say({"done": True})
"""


def _json_equal(a: Any, b: Any, tol: float = 1e-6) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k], tol) for k in a)
    return a == b


async def _grade_call(response: str, ref: dict, limits: SandboxLimits, settings: Optional[SandboxSettings], per_test_s: float) -> Grade:
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
    code = extract_code(response, fn_name)
    if not code.strip():
        return Grade(0.0, None, "no code found in the response")
    token = secrets.token_hex(16)
    payload = json.dumps([code, fn_name, [inp for inp, _ in tests], per_test_s])
    harness = _CALL_HARNESS.replace("__OC_PAYLOAD__", repr(payload))
    result = await run_python(harness, stdin=token + "\n", limits=limits, settings=settings)
    msgs = _messages(result, token)
    load = next((m["load_error"] for m in msgs if "load_error" in m), None)
    if load:
        return Grade(0.0, code, f"the program failed to load: {load}")
    passed, first = 0, None
    by_index = {m["test"]: m for m in msgs if "test" in m}
    for i, want in enumerate(expected):
        m = by_index.get(i)
        if m is None:
            first = first or f"test {i}: not run ({result.status}: {result.reason})"
        elif "error" in m:
            first = first or f"test {i}: {m['error']}"
        elif _json_equal(json.loads(m["value"]), want):
            passed += 1
        else:
            first = first or f"test {i}: wrong answer (expected {json.dumps(want)[:80]}, got {m['value'][:80]})"
    reason = f"{passed}/{len(tests)} tests passed" + (f"; first failure: {first}" if first else "")
    return Grade(passed / len(tests), code, reason)


# ------------------------------------------------------------------------------------------ grader


@register_grader("code")
async def grade_code(
    response: str,
    reference: Any,
    *,
    limits: Union[SandboxLimits, dict, None] = None,
    settings: Optional[SandboxSettings] = None,
    per_test_s: float = 5.0,
) -> Grade:
    """Pass rate of the reply's program on the reference tests (HumanEval check() or stdin/stdout)."""
    if isinstance(limits, dict):
        try:
            limits = SandboxLimits(**limits)
        except Exception as exc:
            raise GraderError(f"invalid sandbox limits {limits!r}: {exc}") from exc
    if isinstance(reference, dict) and "test" in reference:
        return await _grade_humaneval(response, reference, limits or SandboxLimits(wall_s=20.0, cpu_s=10), settings, per_test_s)
    if isinstance(reference, dict) and "fn_name" in reference:
        return await _grade_call(response, reference, limits or SandboxLimits(wall_s=20.0, cpu_s=10), settings, per_test_s)
    if isinstance(reference, (dict, list)):
        return await _grade_stdio(response, reference, limits or SandboxLimits(), settings)
    raise GraderError(
        "code reference must be a HumanEval dict {'test', 'entry_point'[, 'prompt']}, stdin/stdout tests "
        "{'tests': [...]} or call-based tests {'fn_name': ..., 'tests': [...]}"
        f"; got {type(reference).__name__}"
    )
