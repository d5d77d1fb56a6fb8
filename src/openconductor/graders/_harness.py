"""The two programs of a code grade, as source text run inside the sandbox.

* The **worker** holds the candidate's code and nothing else of the grade: it loads the program,
  says ``{"ready": true}`` (or ``{"load_error": ...}``), then answers calls ``{"id", "args",
  "kwargs"}`` read from its stdin with ``{"id", "value"}`` or ``{"id", "error"}`` on its stdout, each
  call under its own alarm. The program's own prints go to stderr and its ``input()`` reads nothing.
* The **driver** (HumanEval) holds the tests. It runs in a second sandbox joined to the worker only by
  the worker's stdin/stdout; ``candidate`` is a proxy that sends the arguments and returns the reply
  decoded as plain data (:mod:`._wire`), so every comparison runs on values the program cannot
  rig, in a process it cannot reach. Results go to the driver's stdout, which only the host reads.

Both are Python 3.8+ (the sandbox may run the system interpreter).
"""

from __future__ import annotations

import json
from pathlib import Path

_WIRE = Path(__file__).with_name("_wire.py").read_text()

# Shared by both: results/replies on a private copy of stdout, the program's prints on stderr.
_COMMON = r'''
import json, os, signal, sys
_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
def _say(obj):
    _out.write(json.dumps(obj) + "\n")
    _out.flush()
def _error(exc):
    text = str(exc)
    return (type(exc).__name__ + (": " + text if text else ""))[:300]
'''

_WORKER = _WIRE + _COMMON + r'''
_requests = os.fdopen(os.dup(0), "rb")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # input() in the program reads nothing, never a request
sys.stdin = open(os.devnull)
_CODE, _TARGET, _PER_CALL, _PRELUDE = json.loads(__OC_PAYLOAD__)
def _alarm(signum, frame):
    raise TimeoutError("call exceeded its time limit of %gs" % _PER_CALL)
signal.signal(signal.SIGALRM, _alarm)
_ns = {"__name__": "solution"}
signal.setitimer(signal.ITIMER_REAL, _PER_CALL)
try:
    exec(compile(_PRELUDE + _CODE, "solution.py", "exec"), _ns)
    _sol = _ns.get("Solution")
    _fn = getattr(_sol(), _TARGET) if isinstance(_sol, type) and hasattr(_sol, _TARGET) else _ns[_TARGET]
    signal.setitimer(signal.ITIMER_REAL, 0)
except BaseException as exc:
    signal.setitimer(signal.ITIMER_REAL, 0)
    _say({"load_error": _error(exc)})
    os._exit(0)
_say({"ready": True})
for _line in _requests:
    try:
        _req = json.loads(_line)
        _id, _args, _kwargs = _req["id"], from_wire(_req["args"]), from_wire(_req["kwargs"])
    except Exception as exc:
        _say({"id": None, "error": "bad request: " + _error(exc)})
        continue
    signal.setitimer(signal.ITIMER_REAL, _PER_CALL)
    try:
        _reply = {"id": _id, "value": to_wire(_fn(*_args, **_kwargs))}
    except BaseException as exc:
        _reply = {"id": _id, "error": _error(exc)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        _say(_reply)
    except Exception as exc:  # e.g. an int too large for JSON
        _say({"id": _id, "error": _error(exc)})
'''

_DRIVER = _WIRE + _COMMON + r'''
import ast, itertools
_from_worker = os.fdopen(int(sys.argv[1]), "rb")
_to_worker = os.fdopen(int(sys.argv[2]), "wb")
_PROMPT, _TEST, _ENTRY, _PER_TEST, _MAX_REPLY = json.loads(__OC_PAYLOAD__)

class CandidateError(Exception):
    """The candidate raised, timed out, returned something that is not plain data, or is gone."""

_gone = []
def _read():
    """The worker's next message (None for a line that is not one), or CandidateError once it is gone."""
    line = _from_worker.readline(_MAX_REPLY + 1)
    if not line:
        _gone.append("the program's process ended")
        raise CandidateError(_gone[0])
    if len(line) > _MAX_REPLY:
        raise CandidateError("reply over %d bytes" % _MAX_REPLY)  # its rest reads as lines that are skipped
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if type(msg) is dict else None

_ids = itertools.count(1)
def candidate(*args, **kwargs):
    if _gone:
        raise CandidateError(_gone[0])
    call_id = next(_ids)
    try:
        line = json.dumps({"id": call_id, "args": to_wire(list(args)), "kwargs": to_wire(kwargs)}) + "\n"
    except (WireError, ValueError) as exc:
        raise CandidateError("the test's arguments are not plain data: " + _error(exc))
    try:
        _to_worker.write(line.encode())
        _to_worker.flush()
    except (BrokenPipeError, OSError):
        _gone.append("the program's process ended")
        raise CandidateError(_gone[0])
    while True:
        msg = _read()
        if msg is not None and msg.get("id") == call_id:  # replies to calls that already timed out are skipped
            break
    if "error" in msg:
        raise CandidateError(str(msg["error"])[:300])
    try:
        return from_wire(msg.get("value"))
    except WireError as exc:
        raise CandidateError(str(exc))
candidate.__name__ = candidate.__qualname__ = _ENTRY

def _alarm(signum, frame):
    raise TimeoutError("test exceeded its time limit")
signal.signal(signal.SIGALRM, _alarm)
signal.setitimer(signal.ITIMER_REAL, _PER_TEST + 5.0)  # the worker's sandbox starts alongside this one
try:
    _hello = _read() or {}
except BaseException as exc:
    _hello = {"load_error": _error(exc)}
signal.setitimer(signal.ITIMER_REAL, 0)
if not _hello.get("ready"):
    _say({"load_error": str(_hello.get("load_error") or "the program did not start")[:500]})
    sys.exit(0)

_ns = {"__name__": "tests"}
try:  # the prompt's helpers (e.g. poly() for find_zero); a prompt that is not a module alone is skipped
    exec(compile(_PROMPT, "prompt.py", "exec"), _ns)
except BaseException:
    pass
try:
    exec(compile(_TEST, "test.py", "exec"), _ns)
except BaseException as exc:
    _say({"setup_error": "the reference test module failed: " + _error(exc)})
    sys.exit(0)
_ns[_ENTRY] = candidate
_body = next(n for n in ast.parse(_TEST).body if isinstance(n, ast.FunctionDef) and n.name == "check").body
_env = dict(_ns)  # check's locals live here
_env["candidate"] = candidate
_index = 0
for _stmt in _body:
    _is_test = any(isinstance(n, ast.Assert) for n in ast.walk(_stmt))
    signal.setitimer(signal.ITIMER_REAL, _PER_TEST)
    try:
        exec(compile(ast.Module([_stmt], []), "test.py", "exec"), _env)
        _failure = None
    except BaseException as exc:
        _failure = _error(exc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if _is_test:
        _say({"test": _index, "ok": _failure is None, "error": _failure})
        _index += 1
    elif _failure is not None:
        _say({"setup_error": _failure})
        break
_say({"done": True})
'''

# The largest reply the driver reads from the worker (a bigger return value fails its test).
MAX_REPLY_BYTES = 8 << 20


def _with_payload(program: str, payload: list) -> str:
    return program.replace("__OC_PAYLOAD__", repr(json.dumps(payload)))


def worker_program(code: str, target: str, per_call_s: float, prelude: str = "") -> str:
    """The candidate's sandbox: ``code`` (after ``prelude``), serving calls to ``target``."""
    return _with_payload(_WORKER, [code, target, per_call_s, prelude])


def driver_program(prompt: str, test: str, entry_point: str, per_test_s: float) -> str:
    """The tests' sandbox: HumanEval ``check`` statement by statement against the worker."""
    return _with_payload(_DRIVER, [prompt, test, entry_point, per_test_s, MAX_REPLY_BYTES])
