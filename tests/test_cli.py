"""The `conductor` command as a new user meets it: input, errors, help, traces, pools, Ctrl-C, the README.

Runs use SIMULATED workers (tests/data/sim_pool.toml and pools written here), except the README
example's real-model test, which is marked slow.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openconductor.cli import EXAMPLES, SAMPLE_QUESTION, app, command_name
from openconductor.records import Run
from openconductor.traces import TraceStore

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

SIM = """
name = "sim"
[[workers]]
name = "fast"
provider = "simulated"
[[workers]]
name = "slow"
provider = "simulated"
options = { latency_s = %s }
"""


def sim_pool(tmp_path, slow_latency: float = 0.0) -> Path:
    path = tmp_path / "sim.toml"
    path.write_text(SIM % slow_latency)
    return path


def cli(*args, tmp_path, stdin=subprocess.DEVNULL, input=None, env=None, timeout=120):
    """`python -m openconductor ARGS` in a subprocess (real stdin, real signals, 80 columns)."""
    full_env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "traces.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path),
                    COLUMNS="80", **(env or {}))
    streams = {"input": input} if input is not None else {"stdin": stdin}  # input: a pipe, as `echo q |` gives
    return subprocess.run([sys.executable, "-m", "openconductor", *args], **streams, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def words(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------------------------- input


@pytest.mark.parametrize("question", ["", "   \n "])
def test_an_empty_question_is_an_error(tmp_path, question):
    done = cli("ask", question, "--pool", str(sim_pool(tmp_path)), tmp_path=tmp_path)
    assert done.returncode == 2 and "the question is empty" in done.stderr
    assert not (tmp_path / "traces.sqlite3").exists() or TraceStore(tmp_path / "traces.sqlite3").list() == []


def test_a_piped_question_is_read_from_stdin(tmp_path):
    done = cli("ask", "--pool", str(sim_pool(tmp_path)), "--policy", "single", "--json", input="What is 2+2?\n", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["question"] == "What is 2+2?"
    empty = cli("ask", "--pool", str(sim_pool(tmp_path)), "--json", input="  \n", tmp_path=tmp_path)
    assert empty.returncode == 2 and "stdin held no question" in empty.stderr


def test_no_question_and_no_piped_input_asks_the_sample_question(tmp_path):
    done = cli("ask", "--pool", str(sim_pool(tmp_path)), "--policy", "single", "--json", tmp_path=tmp_path)  # stdin: /dev/null
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["question"] == SAMPLE_QUESTION


@pytest.mark.parametrize("flag, value", [("--max-calls", "0"), ("--max-calls", "-1"), ("--max-tokens", "0"), ("--max-cost", "-0.5")])
def test_zero_or_negative_limits_are_rejected_naming_the_flag(tmp_path, flag, value):
    done = cli("ask", "q", "--pool", str(sim_pool(tmp_path)), flag, value, tmp_path=tmp_path)
    assert done.returncode == 2, done.stdout
    assert f"{flag} {value}: should be greater than" in words(done.stderr) and "leave it out" in words(done.stderr)


def test_a_limit_flag_lowers_the_pool_limit(tmp_path):
    done = cli("ask", "q", "--pool", str(sim_pool(tmp_path)), "--policy", "moa", "--max-calls", "1", "--json", tmp_path=tmp_path)
    run = json.loads(done.stdout)
    assert run["totals"]["calls"] == 1 and run["limits_hit"] == ["max_calls"]


def test_a_pool_with_missing_keys_fails_at_once_naming_them(tmp_path):
    env = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = cli("ask", "q", "--pool", str(ROOT / "examples" / "pools" / "mixed.toml"), tmp_path=tmp_path, env=env)
    said = words(done.stderr)
    assert done.returncode == 2 and "pool 'mixed' cannot run here: API key variable(s) not set: OPENAI_API_KEY (worker 'gpt-4o-mini')" in said
    assert "ANTHROPIC_API_KEY (worker 'sonnet')" in said and "GEMINI_API_KEY or GOOGLE_API_KEY (worker 'gemini-flash')" in said
    assert done.stdout == ""  # nothing ran, nothing was planned
    assert TraceStore(tmp_path / "traces.sqlite3").list() == []


# ----------------------------------------------------------------------------------- version, help


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and re.fullmatch(r"openconductor \d+\.\d+\.\S+\n", result.output)


def test_every_command_help_ends_with_an_example():
    names = [command_name(info) for info in app.registered_commands]
    assert sorted(names) == sorted(EXAMPLES)
    for name in names:
        result = CliRunner().invoke(app, [name, "--help"], terminal_width=100)
        assert result.exit_code == 0, (name, result.output)
        tail = result.output[result.output.index("Example"):]
        assert f"conductor {name}" in tail, (name, result.output)


# ------------------------------------------------------------------------------------------ traces


def _saved_run(store: TraceStore, run_id: str, question: str, status: str = "ok", created_at: float = 0.0) -> None:
    store.save(Run(id=run_id, question=question, policy="conductor", status=status, created_at=created_at or time.time()))


def test_traces_says_something_when_empty(tmp_path):
    done = cli("traces", tmp_path=tmp_path)
    assert done.returncode == 0 and "no runs yet in" in done.stdout and "conductor ask" in done.stdout


def test_traces_fits_80_columns_with_id_status_and_question(tmp_path):
    store = TraceStore(tmp_path / "traces.sqlite3")
    long = "A train travels 60 km in 45 minutes. What is its average speed in km/h? Explain step by step, please."
    _saved_run(store, "3f2a9c0d11112222", long, status="cancelled")
    _saved_run(store, "77aa00bb33334444", "short one", status="plan_failed")
    done = cli("traces", tmp_path=tmp_path)
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    row = next(line for line in lines if line.startswith("3f2a9c0d"))
    assert "cancelled" in row and "A train travels 60 km" in row and row.rstrip().endswith("…")
    assert any(line.startswith("77aa00bb") and "plan_failed" in line for line in lines)


def test_an_ambiguous_trace_prefix_lists_the_candidates(tmp_path):
    store = TraceStore(tmp_path / "traces.sqlite3")
    _saved_run(store, "abc1000000000000", "first question", created_at=1.0)
    _saved_run(store, "abc2000000000000", "second question", created_at=2.0)
    _saved_run(store, "ffff000000000000", "other")
    done = cli("trace", "abc", tmp_path=tmp_path)
    assert done.returncode == 2 and "'abc' starts 2 trace ids; give more of the id" in done.stderr
    assert done.stderr.index("abc2000000000000") < done.stderr.index("abc1000000000000")  # newest first
    assert "second question" in done.stderr
    assert "ffff" not in done.stderr
    one = cli("trace", "abc2", "--json", tmp_path=tmp_path)
    assert one.returncode == 0 and json.loads(one.stdout)["id"] == "abc2000000000000"
    assert "no trace with id 'zzz'" in cli("trace", "zzz", tmp_path=tmp_path).stderr
    assert "no trace" in cli("trace", "a_c", tmp_path=tmp_path).stderr  # LIKE wildcards are literal


def test_a_trace_stored_before_the_workflow_was_typed_still_loads(tmp_path):
    old = (DATA / "trace_v0_local_pool.json").read_text()  # a row saved by the earlier code (plan.workflow a plain dict)
    run = Run.model_validate_json(old)
    assert run.plan.workflow.steps[2].access == "all" and run.plan.workflow.steps[1].access == [0]
    assert run.plan.workflow.reasoning == json.loads(old)["plan"]["workflow"]["reasoning"]
    store = TraceStore(tmp_path / "traces.sqlite3")
    store.save(run)
    assert json.loads(store.get(run.id).model_dump_json())["plan"]["workflow"] == json.loads(old)["plan"]["workflow"]
    done = cli("trace", run.id[:6], tmp_path=tmp_path)
    assert done.returncode == 0 and "step 2" in done.stdout


# -------------------------------------------------------------------------------------------- pool


def test_pool_shows_conductor_backend_descriptions_and_missing_keys(tmp_path):
    env = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    mixed = cli("pool", str(ROOT / "examples" / "pools" / "mixed.toml"), tmp_path=tmp_path, env=env)
    said = words(mixed.stdout)
    assert mixed.returncode == 0, mixed.stderr
    assert "conductor: worker 'gpt-4o-mini'; at most 5 steps" in said and "fallback strongest" in said
    assert "missing key: OPENAI_API_KEY for gpt-4o-mini: set OPENAI_API_KEY" in said
    assert "missing key: GEMINI_API_KEY or GOOGLE_API_KEY for gemini-flash" in said
    local = cli("pool", tmp_path=tmp_path)
    said = words(local.stdout)
    assert ("conductor: trained conductor builtin:local-tools (--conductor none: the prompted conductor-smollm2 "
            "(local_gguf / smollm2-135m-instruct))") in said
    assert "Qwen2.5-Coder-0.5B: the strongest model here" in said and "ready:" in said


# ----------------------------------------------------------------------------------------- extras


def test_router_train_without_its_extra_prints_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    results = tmp_path / "results.jsonl"
    results.write_text("")
    result = CliRunner().invoke(app, ["router-train", str(results)])
    assert result.exit_code == 2 and "pip install 'openconductor[router]'" in words(result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit)


# ----------------------------------------------------------------------------------------- Ctrl-C


def _interruptible() -> None:
    """Ctrl-C as at a terminal: a test suite started in the background (`... &`) inherits SIGINT ignored,
    and Python then installs no KeyboardInterrupt handler in the child."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _wait_for_a_finished_step(db: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                row = sqlite3.connect(db).execute("SELECT record FROM runs").fetchone()
            except sqlite3.OperationalError:  # the schema is being created
                row = None
            if row and any(s["status"] == "ok" for s in json.loads(row[0])["steps"]):
                return
        time.sleep(0.1)
    raise AssertionError("no step finished")


def test_ctrl_c_during_ask_says_so_and_saves_the_run_as_cancelled(tmp_path):
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "traces.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    # moa: "fast" answers at once, "slow" takes a minute, the aggregator waits for both.
    proc = subprocess.Popen([sys.executable, "-m", "openconductor", "ask", "q", "--pool", str(sim_pool(tmp_path, 60.0)), "--policy", "moa"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_interruptible)
    try:
        _wait_for_a_finished_step(tmp_path / "traces.sqlite3")
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and time.monotonic() - started < 20
    assert "Traceback" not in err
    run = TraceStore(tmp_path / "traces.sqlite3").get(TraceStore(tmp_path / "traces.sqlite3").list(1)[0]["id"])
    assert run.status == "cancelled" and [s.status for s in run.steps] == ["ok", "skipped", "skipped"]
    assert f"cancelled: 1 of 3 step(s) had finished; the run is saved as cancelled: conductor trace {run.id[:8]}" in words(err)


# ----------------------------------------------------------------------------------------- README


def readme_python() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert len(blocks) == 1
    return blocks[0]


def test_the_readme_python_example_runs_as_pasted_on_a_simulated_pool(monkeypatch, capsys):
    """The block exactly as written, with only the offline pool it loads swapped for simulated workers."""
    import openconductor
    from openconductor.pool import PoolSpec
    from openconductor.providers.simulated import register_responder

    register_responder("readme-planner")(lambda spec, messages, rng: 'Reasoning: two steps.\nmodel_id = [0, 1]\n'
                                         'subtasks = ["solve", "check"]\naccess_list = [[], ["all"]]')
    simulated = PoolSpec.model_validate({"name": "sim", "workers": [{"name": "a", "provider": "simulated"}, {"name": "b", "provider": "simulated"}],
                                         "conductor": {"backend": {"name": "planner", "provider": "simulated", "options": {"world": "readme-planner"}}}})
    monkeypatch.setattr(openconductor, "load_default_pool", lambda: simulated)
    exec(compile(readme_python(), "README.md", "exec"), {"__name__": "__main__"})
    answer, calls, tokens = capsys.readouterr().out.rsplit(maxsplit=2)
    assert answer.startswith("b answer") and int(calls) == 2 and int(tokens) > 0


@pytest.mark.slow
@pytest.mark.realmodel
def test_the_readme_python_example_runs_as_pasted_on_the_real_local_pool(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_python())
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "t.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=1800, env=env)
    assert done.returncode == 0, done.stderr
    answer, calls, tokens = done.stdout.rsplit(maxsplit=2)
    assert int(calls) >= 1 and int(tokens) > 0


FIXED = """
[workflows.twice]
description = "fast answers, slow checks"
steps = [
  { worker = "fast", subtask = "Answer the question.", access = [] },
  { worker = "slow", subtask = "Check the answer above.", access = "all" },
]
"""


def test_ask_takes_a_policy_with_its_argument_as_eval_does(tmp_path):
    pool = sim_pool(tmp_path)
    pool.write_text(pool.read_text() + FIXED)
    done = cli("ask", "q", "--pool", str(pool), "--policy", "fixed:twice", "--json", tmp_path=tmp_path)
    run = json.loads(done.stdout)
    assert done.returncode == 0 and [s["worker_name"] for s in run["steps"]] == ["fast", "slow"]
    done = cli("ask", "q", "--pool", str(pool), "--policy", "single:slow", "--json", tmp_path=tmp_path)
    assert done.returncode == 0 and [s["worker_name"] for s in json.loads(done.stdout)["steps"]] == ["slow"]


@pytest.mark.parametrize("args, message", [
    (["--policy", "fixed"], "the fixed policy needs a workflow: --policy fixed:NAME (declared: twice)"),
    (["--policy", "fixed:nope"], "policy 'fixed:nope':"),
    (["--policy", "single", "--worker", "nosuch"], "unknown worker 'nosuch'; the pool has fast, slow"),
    (["--policy", "moa", "--worker", "nosuch"], "unknown worker 'nosuch'; the pool has fast, slow"),
    (["--policy", "single:*"], "ask runs one policy; 'single:*' names 2"),
    (["--policy", "single:fast", "--worker", "slow"], "--worker goes with a bare policy name"),
])
def test_ask_rejects_a_policy_it_cannot_run_before_running_anything(tmp_path, args, message):
    pool = sim_pool(tmp_path)
    pool.write_text(pool.read_text() + FIXED)
    done = cli("ask", "q", "--pool", str(pool), *args, tmp_path=tmp_path)
    assert done.returncode == 2 and message in words(done.stderr) and "Traceback" not in done.stderr
    assert not (tmp_path / "traces.sqlite3").exists() or TraceStore(tmp_path / "traces.sqlite3").list() == []


@pytest.mark.parametrize("name", ["true", "a,b", "1e3", "a=b"])
def test_a_worker_named_like_a_value_is_asked_by_its_name(tmp_path, name):
    pool = tmp_path / "odd.toml"
    pool.write_text(f'name = "odd"\n[[workers]]\nname = "other"\nprovider = "simulated"\n[[workers]]\nname = {json.dumps(name)}\nprovider = "simulated"\n')
    done = cli("ask", "q", "--pool", str(pool), "--policy", "single", "--worker", name, "--json", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [s["worker_name"] for s in json.loads(done.stdout)["steps"]] == [name]


@pytest.mark.parametrize("spec, message", [
    ("self-reflection:rounds=1.5", "rounds must be a whole number >= 0, got 1.5"),
    ("self-reflection:rounds=true", "rounds must be a whole number >= 0, got True"),
    ("moa:proposers=abc", "proposers must be a whole number >= 1, got 'abc'"),
])
def test_a_count_that_is_not_a_whole_number_is_a_clear_error(tmp_path, spec, message):
    done = cli("ask", "q", "--pool", str(sim_pool(tmp_path)), "--policy", spec, tmp_path=tmp_path)
    assert done.returncode == 2 and message in words(done.stderr) and "Traceback" not in done.stderr


def test_a_run_without_an_answer_says_why(tmp_path):
    # A pool without a conductor backend: the conductor policy cannot plan, the run ends plan_failed.
    done = cli("ask", "q", "--pool", str(sim_pool(tmp_path)), "--policy", "conductor", tmp_path=tmp_path)
    assert done.returncode == 1 and "plan_failed" in done.stdout
    assert re.search(r"why\s+policy_error: ", done.stdout), done.stdout


def test_a_router_policy_without_its_extra_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if not installed
    args = ["eval", "-t", "gsm8k", "--data", str(DATA / "gsm8k_sample.jsonl"), "--pool", str(sim_pool(tmp_path)),
            "-p", f"router:{tmp_path / 'r.npz'}", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "policy 'router:" in words(result.output) and "pip install 'openconductor[router]'" in words(result.output)


def test_ctrl_c_during_eval_keeps_the_finished_runs_and_the_same_command_resumes(tmp_path):
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "traces.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, "-m", "openconductor", "eval", "-t", "basic_arithmetic", "--limit", "1", "--pool", str(sim_pool(tmp_path, 60.0)),
            "-p", "single:fast", "-p", "single:slow", "--out", str(tmp_path / "out"), "--no-cache"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_interruptible)
    results = tmp_path / "out" / "results.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (results.exists() and results.read_text().count("\n") == 1):
            assert time.monotonic() < deadline, "no run finished"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    assert f"cancelled: 1 run(s) finished in this invocation and are in {results}" in words(err)
    assert [json.loads(line)["policy"] for line in results.read_text().splitlines()] == ["single:fast"]
