"""The ``python`` worker: runs the Python code of its step in the bubblewrap sandbox and returns the output.

Which code runs (the first rule that finds any):

1. the last fenced Python block in the step's own **subtask**;
2. else the **visible earlier responses**, most recent first: the last Python block of the latest
   response that has one;
3. else the last Python block in the **overall task**;
4. else the latest visible response itself, when it is bare code (it compiles and has a ``print(`` or
   ``def``).

A Python block is a fenced block tagged ``python``/``py``/``python3`` or untagged; one left open at
the end of a response (a model cut by its token limit) counts up to the end. Nothing found is a
non-retryable ProviderError that says so (the step fails with that message). ``detail["status"]`` is
``ok`` only for a program that exited cleanly and printed something: ``error`` and ``empty`` outputs are not
answers, and a plan that ends with one gets a model step that answers (``executor``).

The program runs like a notebook cell: when its last statement is an expression (not ``print(...)``),
its value is printed unless it is None. It runs in a child process inside the sandbox, so its CPU
time, exit status and output sizes are measured by a small runner there and land in the Run
(``Usage.cpu_s``, ``StepRecord.detail``). The output is the program's stdout; on an error, a timeout
or a limit it starts with a ``[python: ...]`` line and carries the tail of stderr. Both are cut to
``max_output_chars`` with a marker saying how much was dropped.
"""

from __future__ import annotations

import ast
import json
import re
import time
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import worker_message
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion, Usage
from .base import Provider, ProviderError, TokenCallback


class PythonToolOptions(BaseModel):
    """``options`` of a ``python`` worker in a pool file."""

    model_config = ConfigDict(extra="forbid")

    wall_s: float = Field(10.0, gt=0, le=600, description="wall-clock limit of one run")
    cpu_s: int = Field(5, ge=1, le=600, description="CPU seconds of the program")
    memory_mb: int = Field(512, ge=64, le=16384, description="address space of the program")
    processes: int = Field(16, ge=4, le=256, description="processes + threads inside the sandbox")
    max_output_chars: int = Field(2000, ge=100, le=200_000, description="stdout (and stderr tail) kept in the output")
    sandbox: Optional[str] = Field(None, description="a TOML file with [sandbox] settings (interpreter, bwrap path, ...)")
    auto_import: list[str] = Field(
        default_factory=list,
        description="standard-library modules a program may use without importing them (e.g. math): a small coder "
                    "often writes math.gcd and forgets the import; the program's own names still come first",
    )

    answer_lines: bool = Field(
        False,
        description="a program line `Final answer: <expression>` runs as a print of the expression: a coder asked to end its "
                    "response with that line sometimes ends its program with it instead (a SyntaxError); applied only to a "
                    "program that does not parse as written and does after the change",
    )

    @field_validator("auto_import")
    @classmethod
    def _standard_library_only(cls, names: list[str]) -> list[str]:
        import importlib.util
        import sys

        # `this` prints the Zen of Python on import and `antigravity` opens a browser: never an answer's help.
        unknown = [n for n in names if n not in sys.stdlib_module_names or n.startswith("_") or n in ("this", "antigravity")
                   or importlib.util.find_spec(n) is None]  # e.g. winreg on Linux
        if unknown:
            raise ValueError(f"auto_import names standard-library modules that exist here only (e.g. math, itertools); not {unknown}")
        return names


def modules_to_preload(code: str, auto_import: list[str]) -> list[str]:
    """The ``auto_import`` modules that ``code`` names but never imports (sorted; none for code that does not
    parse): a program that imports what it uses runs exactly as without the option."""
    if not auto_import:
        return []
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return sorted(m for m in set(auto_import) if m in named and m not in imported)


_ANSWER_LINE = re.compile(r"^(?P<indent>[ \t]*)Final answer:[ \t]*(?P<value>\S.*?)[ \t]*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{[^{}]+\}")


def _tree(code: str) -> Optional[ast.Module]:
    """The program's syntax tree, or None where it does not parse."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _number(text: str) -> bool:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _computed_name(code: str, line: re.Match) -> Optional[str]:
    """The name the program's statement just before a top-level answer line assigns, if that is what it does: a coder
    that computes ``lcm_value = lcm(49, 42)`` and then writes ``Final answer: 147`` states a number it did not compute
    (of the 1.5B coder's programs that end with a bare number, 8 in 35 had it right), while the program holds the one it did."""
    head = None if line["indent"] else _tree(code[: line.start()])
    last = head.body[-1] if head is not None and head.body else None
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name):
        return last.targets[0].id
    if isinstance(last, (ast.AnnAssign, ast.AugAssign)) and isinstance(last.target, ast.Name):
        return last.target.id
    return None


def with_answer_lines_printed(code: str) -> Optional[str]:
    """``code`` with each line ``Final answer: <value>`` made a print of it (``answer_lines``); None when the code parses
    as written, has no such line, or does not parse after the change either. A value with ``{placeholders}`` is printed
    as an f-string ("Final answer: {lcm}"), any other as an expression ("Final answer: lcm", "Final answer: 42"); a bare
    number as the last such line, right after the statement that assigns the program's result, prints that result
    instead (``_computed_name``; only the last line is looked at, so a program of many such lines costs one parse)."""
    lines = list(_ANSWER_LINE.finditer(code))
    if not lines or _tree(code) is not None:  # the cheap test first: most programs have no such line
        return None
    last = lines[-1]
    computed = _computed_name(code, last) if _number(last["value"]) else None

    def printed(m: re.Match) -> str:
        value = m["value"]
        if _PLACEHOLDER.search(value):
            return f"{m['indent']}print(f{('Final answer: ' + value)!r})"
        if computed is not None and m.start() == last.start():
            return f"print('Final answer:', {computed})"
        return f"{m['indent']}print('Final answer:', {value})"

    fixed = _ANSWER_LINE.sub(printed, code)
    return fixed if _tree(fixed) is not None else None


# ------------------------------------------------------------------------------------ finding the code

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3"}


def python_blocks(text: str) -> list[str]:
    """The Python code blocks of a text, in order (untagged blocks count; other languages do not)."""
    return [m.group(2) for m in _FENCE.finditer(text or "") if m.group(1).lower() in _PYTHON_TAGS and m.group(2).strip()]


def _bare_code(text: str) -> Optional[str]:
    if "print(" not in text and "def " not in text:
        return None
    try:
        compile(text, "<response>", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return text


def find_code(question: str, earlier: list[str], subtask: str) -> tuple[Optional[str], str]:
    """(code, where it came from) by the rules in the module docstring; (None, "") if there is none."""
    blocks = python_blocks(subtask)
    if blocks:
        return blocks[-1], "subtask"
    for back, response in enumerate(reversed(earlier)):
        blocks = python_blocks(response)
        if blocks:
            return blocks[-1], f"response of visible step -{back + 1}"
    blocks = python_blocks(question)
    if blocks:
        return blocks[-1], "overall task"
    if earlier and (code := _bare_code(earlier[-1])):
        return code, "response of visible step -1 (bare code)"
    return None, ""


# --------------------------------------------------------------------------------------------- running

# Runs inside the sandbox: the program as a child process (so its CPU time and exit status are
# measured even when a limit kills it), its output in files on the sandbox's tmpfs, one JSON report.
RUNNER = r"""
import ast, json, os, signal, subprocess, sys, time
# auto_import: the modules are put among the builtins, so they resolve only where the program binds no such name
# itself; the program then runs in the real __main__ (pickle, multiprocessing, unittest and inspect find its
# definitions there), keeps its own line numbers, and a traceback gains one "<string>" frame.
BOOT = '''
def _boot():
    import builtins, importlib, json, sys
    for m in json.loads(sys.argv[1]):
        try:
            setattr(builtins, m, importlib.import_module(m))
        except ImportError:
            pass
    path = sys.argv[0] = "/sandbox/program.py"
    del sys.argv[1:]
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __loader__=None, __spec__=None, __file__=path,
                __cached__=None, __builtins__=builtins)
    return code, main
exec(*_boot())
'''
source = sys.stdin.read()
cap, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
try:
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    is_print = isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and getattr(last.value.func, "id", "") == "print"
    if isinstance(last, ast.Expr) and not is_print and last.col_offset == 0:
        lines = source.splitlines()
        head, expr = "\n".join(lines[: last.lineno - 1]), ast.get_source_segment(source, last)
        tail = "\n".join(lines[last.end_lineno:])
        source = head + "\n__value = (" + expr + ")\nif __value is not None: print(__value)\n" + tail
except (SyntaxError, ValueError, MemoryError, RecursionError):
    pass  # the interpreter reports it, with the original line numbers
with open("/sandbox/program.py", "w") as f:
    f.write(source)
preload = json.loads(sys.argv[3])  # modules_to_preload(), chosen on the host
program = ["/sandbox/program.py"] if not preload else ["-c", BOOT, json.dumps(preload)]
out, err = open("/sandbox/.stdout", "wb"), open("/sandbox/.stderr", "wb")
proc = subprocess.Popen([sys.executable, "-I", "-B", "-X", "utf8", *program], stdin=subprocess.DEVNULL,
                        stdout=out, stderr=err, cwd="/sandbox", start_new_session=True)
timed_out = False
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid:
        break
    if time.monotonic() > deadline:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        pid, status, usage = os.wait4(proc.pid, 0)
        break
    time.sleep(0.005)
def read(path, tail):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if tail and size > cap:
            f.seek(size - cap)
        return f.read(cap).decode("utf-8", "replace"), size
stdout, out_bytes = read("/sandbox/.stdout", False)
stderr, err_bytes = read("/sandbox/.stderr", True)
print(json.dumps({"exit_code": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
    "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss, "stdout": stdout, "stderr": stderr,
    "stdout_bytes": out_bytes, "stderr_bytes": err_bytes}))
"""

# Seconds the runner keeps for itself: it stops the program before the sandbox's wall limit stops both.
_RUNNER_MARGIN_S = 1.0


def _limit_reason(report: dict, options: PythonToolOptions) -> str:
    """Why the program ended badly, in words ('' when it exited 0)."""
    import signal

    code = report["exit_code"]
    if report["timed_out"]:
        return f"timed out after {options.wall_s:g} s and was killed"
    if code == 0:
        return ""
    if code < 0:
        sig = -code
        if sig in (signal.SIGXCPU, signal.SIGKILL) and report["cpu_s"] >= options.cpu_s - 0.5:
            return f"exceeded its CPU-time limit of {options.cpu_s} s"
        if sig == signal.SIGXFSZ:
            return "exceeded the output-size limit and was killed"
        return f"was killed by {signal.Signals(sig).name}" if sig in signal.valid_signals() else f"was killed by signal {sig}"
    if "MemoryError" in report["stderr"]:
        return f"ran out of memory (limit {options.memory_mb} MiB)"
    if "File too large" in report["stderr"]:  # Python ignores SIGXFSZ: the write fails with EFBIG instead
        return "exceeded the output-size limit"
    return f"exited with code {code}"


def _cut(text: str, total_bytes: int, limit: int, *, tail: bool = False) -> str:
    """``text`` (the kept part of a stream of ``total_bytes``) cut to ``limit`` characters, marked if shortened."""
    kept = text[-limit:] if tail else text[:limit]
    dropped = max(0, total_bytes - len(kept.encode("utf-8", "replace")))
    kept = kept.strip("\n") if tail else kept.rstrip()
    if not dropped:
        return kept
    marker = f"[... {dropped} more bytes of output dropped]"
    return f"{marker}\n{kept}" if tail else f"{kept}\n{marker}"


def format_output(report: dict, options: PythonToolOptions) -> str:
    """The worker's text: stdout on success; a ``[python: ...]`` header, stdout and stderr's tail otherwise."""
    limit = options.max_output_chars
    stdout = _cut(report["stdout"], report["stdout_bytes"], limit)
    reason = _limit_reason(report, options)
    if not reason:
        return stdout if stdout.strip() else "[python: the program ran without error but printed nothing]"
    parts = [f"[python: the program {reason}]"]
    if stdout.strip():
        parts.append(f"[stdout]\n{stdout}")
    if report["stderr"].strip():
        parts.append(f"[stderr]\n{_cut(report['stderr'], report['stderr_bytes'], limit, tail=True)}")
    return "\n".join(parts)


class PythonToolProvider(Provider):
    """A pool member that runs code instead of generating text (see the module docstring)."""

    Options = PythonToolOptions

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        from ..sandbox import SandboxError, SandboxLimits, SandboxSettings, load_sandbox_settings

        try:
            self.settings = load_sandbox_settings(self.options.sandbox) if self.options.sandbox else SandboxSettings()
        except SandboxError as exc:
            raise PoolConfigError(f"worker {spec.name!r}: {exc}") from None
        o = self.options
        # The runner's report is small and bounded by max_output_chars; the sandbox's own caps are a backstop.
        self.limits = SandboxLimits(
            wall_s=o.wall_s + _RUNNER_MARGIN_S + 1.0, cpu_s=o.cpu_s, memory_mb=o.memory_mb, processes=o.processes,
            max_output_bytes=max(1 << 16, 64 * o.max_output_chars),  # JSON escapes a byte into at most 6
        )

    def unavailable(self) -> Optional[str]:
        """The sandbox's reason and fix when generated code cannot be sandboxed here (probed once per settings)."""
        from ..sandbox import SandboxUnavailable, check_sandbox

        try:
            check_sandbox(self.settings)
        except SandboxUnavailable as exc:
            return str(exc)
        return None

    def code(self, messages: list[dict]) -> tuple[Optional[str], str]:
        """The program to run (after ``answer_lines``' change, where it applies) and where it was found."""
        context = worker_message.parse(messages)
        code, origin = find_code(context.question, [response for _, _, response in context.earlier], context.subtask)
        if code is not None and self.options.answer_lines and (fixed := with_answer_lines_printed(code)) is not None:
            return fixed, origin + " (answer lines printed)"
        return code, origin

    def replay_key(self, messages: list[dict]) -> Optional[dict]:
        """The replay store's key: the program decides the output (sampling settings do not), and so do the
        modules preloaded for it (left out when there are none: it runs as it would without the option)."""
        code, _ = self.code(messages)
        if code is None:
            return None
        preload = modules_to_preload(code, self.options.auto_import)
        return {"code": code, "auto_import": preload} if preload else {"code": code}

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer=None) -> Completion:  # a tool has no answer format: its output is what it ran or found
        from ..sandbox import SandboxError, run_python

        code, origin = self.code(messages)
        if code is None:
            raise ProviderError(
                f"worker {self.spec.name!r} found no Python code to run: put a ```python block in its subtask, or give "
                "it access to a step whose response has one"
            )
        started = time.perf_counter()
        try:
            result = await run_python(
                RUNNER, stdin=code, limits=self.limits, settings=self.settings,
                args=[str(self.options.max_output_chars * 4), str(self.options.wall_s), json.dumps(modules_to_preload(code, self.options.auto_import))],
            )  # fmt: skip
        except SandboxError as exc:  # includes SandboxUnavailable: not retryable, the message says what to install
            raise ProviderError(f"worker {self.spec.name!r}: {exc}") from None
        latency = time.perf_counter() - started
        try:
            report = json.loads(result.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            # The runner itself was stopped (the sandbox's wall limit, or the program killed its parent).
            report = None
        if report is None:
            text = f"[python: the run ended without a report: {result.status} ({result.reason})]"
            detail = {"status": result.status, "reason": result.reason, "code_from": origin, "sandbox_wall_s": result.wall_s}
            return Completion(text=text, latency_s=latency, model="python", detail=detail)
        text = format_output(report, self.options)
        if on_token is not None:
            on_token(text)
        failed = report["exit_code"] != 0 or report["timed_out"]
        detail = {  # status: "ok" only for a result that can stand as an answer (the executor reads it)
            "status": "error" if failed else "ok" if report["stdout"].strip() else "empty",
            "exit_code": report["exit_code"], "timed_out": report["timed_out"], "cpu_s": round(report["cpu_s"], 4),
            "max_rss_kb": report["max_rss_kb"], "stdout_bytes": report["stdout_bytes"], "stderr_bytes": report["stderr_bytes"],
            "code_from": origin, "code_chars": len(code), "sandboxed": result.sandboxed,
        }  # fmt: skip
        return Completion(text=text, usage=Usage(cpu_s=report["cpu_s"]), latency_s=latency, model="python", detail=detail)
