"""Tool workers on the real path: the python worker in the bubblewrap sandbox, BM25 retrieval with bm25s.

The only stand-in is a simulated "coder" worker (labelled: no model) that writes a fixed program, so a
tool's behaviour inside a workflow can be checked exactly; the tools themselves are real.
"""

import json
from pathlib import Path

import pytest

from openconductor.executor import build_messages, solve
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, PoolConfigError, PoolSpec, WorkerSpec
from openconductor.providers.base import make_provider
from openconductor.providers.python_tool import find_code, python_blocks
from openconductor.providers.retrieval import CorpusError, RetrievalOptions, load_corpus
from openconductor.providers.simulated import register_responder
from openconductor.records import StepRecord
from openconductor.worker_message import parse as parse_worker_message
from openconductor.workflow import Step, Workflow

PROGRAMS: dict[str, str] = {}


@register_responder("test-coder")
def _coder(spec, messages, rng):
    """Simulated (not a model): answers with the program registered for the overall task."""
    question = parse_worker_message(messages).question
    return f"Here is the program:\n```python\n{PROGRAMS[question]}\n```\nIt prints the answer."


def python_spec(name="python", **options):
    return WorkerSpec(name=name, provider="python", max_retries=0, options={"wall_s": 5, "cpu_s": 2, **options})


def coder_spec():
    return WorkerSpec(name="coder", provider="simulated", options={"world": "test-coder"}, max_retries=0)


async def run_code(code: str, **options):
    """The python worker on one program, through solve(): (final answer, the python step's record)."""
    question = f"task {len(PROGRAMS)}: {code[:40]}"
    PROGRAMS[question] = code
    spec = PoolSpec(name="t", workers=[coder_spec(), python_spec(**options)])
    workflow = Workflow((Step(0, "Write a program.", ()), Step(1, "Run the program.", "all")))
    async with Pool(spec) as pool:
        run = await solve(question, GivenWorkflow(workflow), pool)
    return run, run.steps[1]


# ------------------------------------------------------------------------------------ finding the code


def test_python_blocks_take_python_and_untagged_fences_and_an_unclosed_last_one():
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```\ny = 2\n```\n```py\nz = 3"
    assert python_blocks(text) == ["x = 1\n", "y = 2\n", "z = 3"]


def test_find_code_prefers_the_subtask_then_the_latest_response_then_the_task():
    block = lambda code: f"```python\n{code}\n```"  # noqa: E731
    assert find_code(block("t"), [block("a")], "run " + block("s")) == ("s\n", "subtask")
    assert find_code("", [block("a1") + block("a2"), "no code here", block("b")], "run it") == ("b\n", "response of visible step -1")
    assert find_code("", [block("a"), "prose only"], "run it") == ("a\n", "response of visible step -2")
    assert find_code("what does " + block("t") + " print?", ["prose"], "run it") == ("t\n", "overall task")
    assert find_code("", ["x = 2\nprint(x * 21)"], "run it")[0] == "x = 2\nprint(x * 21)"
    assert find_code("", ["The answer is 42."], "run it") == (None, "")


def test_worker_messages_read_back_into_their_parts():
    wf = Workflow((Step(0, "Design it", ()), Step(2, "Critique it", ()), Step(1, "Run it", "all")))
    outputs = {
        0: StepRecord(index=0, worker=0, worker_name="a", subtask="Design it", access=[], output="PLAN\n\nwith ``` fences", status="ok"),
        1: StepRecord(index=1, worker=2, worker_name="c", subtask="Critique it", access=[], status="error", error="boom"),
    }
    context = parse_worker_message(build_messages("Sort a list\n\nof numbers", wf, 2, outputs))
    assert context.question == "Sort a list\n\nof numbers"
    assert context.subtask == "Run it"
    assert context.earlier == [(0, "Design it", "PLAN\n\nwith ``` fences"), (2, "Critique it", "(Agent 2 failed to respond: boom)")]
    bare = parse_worker_message([{"role": "user", "content": "just text"}])
    assert bare.subtask == "just text" and bare.earlier == [] and bare.question == ""


# ------------------------------------------------------------------------------------------ running


async def test_python_worker_runs_the_coders_program_and_its_usage_lands_in_the_run():
    run, step = await run_code("total = sum(range(10))\nprint(f'Final answer: {total}')")
    assert run.status == "ok" and run.final_answer == "Final answer: 45"
    assert step.status == "ok" and step.detail["status"] == "ok" and step.detail["exit_code"] == 0
    assert step.detail["code_from"] == "response of visible step -1" and step.detail["sandboxed"] is True
    assert step.detail["stdout_bytes"] == len("Final answer: 45\n")
    assert 0 < step.usage.cpu_s < 2 and step.latency_s > 0
    assert run.totals.per_worker["python"].cpu_s == step.usage.cpu_s
    assert run.totals.usage.cpu_s == step.usage.cpu_s


async def test_a_last_expression_is_printed_like_a_notebook_cell():
    run, step = await run_code("def f(n):\n    return n * 6\n\nf(7)")
    assert run.final_answer == "42"
    run, step = await run_code("x = 5; x")  # not a whole line: left alone, prints nothing
    assert step.output == "[python: the program ran without error but printed nothing]" and step.detail["status"] == "empty"
    # Nothing printed is no answer: the executor adds a step in which the pool's model answers (tests/test_tool_fallback.py).
    assert [s.worker_name for s in run.steps] == ["coder", "python", "coder"] and run.steps[-1].appended


async def test_a_program_error_is_returned_marked_with_the_traceback():
    run, step = await run_code("print('before')\nraise ValueError('boom')")
    assert step.status == "ok" and step.detail["status"] == "error" and step.detail["exit_code"] == 1
    assert step.output.startswith("[python: the program exited with code 1]")
    assert "[stdout]\nbefore" in step.output and "ValueError: boom" in step.output


async def test_auto_import_lets_a_program_use_math_unimported_and_its_own_names_come_first():
    program = "def lcm(a, b):\n    return a * b // math.gcd(a, b)\nprint(lcm(4, 6))"
    run, step = await run_code(program)  # the small coder's slip: math.gcd without `import math`
    assert step.detail["status"] == "error" and "NameError: name 'math' is not defined" in step.output
    run, step = await run_code(program, auto_import=["math", "itertools"])
    assert step.detail["status"] == "ok" and run.final_answer == "12"
    # A name the program binds itself is its own; only names it leaves free come from the list.
    run, step = await run_code("math = 'mine'\nprint(math, __name__, itertools.__name__)", auto_import=["math", "itertools"])
    assert step.output == "mine __main__ itertools"
    # Errors keep the program's own line numbers.
    run, step = await run_code("x = 1\nprint(math.sqrt(-1))", auto_import=["math"])
    assert 'File "/sandbox/program.py", line 2' in step.output and "ValueError: math domain error" in step.output
    # The program runs in the real __main__: pickle and unittest find what it defines, as without the option.
    checks = ("import pickle, sys, unittest\ndef f(x):\n    return x\n"
              "class T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(math.gcd(4, 6), 2)\n"
              "print(pickle.loads(pickle.dumps(f))(7), __spec__, sys.modules['__main__'].f is f)\n"
              "result = unittest.main(argv=['t'], exit=False).result\nprint(result.testsRun, len(result.failures))")
    run, step = await run_code(checks, auto_import=["math"])
    assert step.detail["status"] == "ok" and step.output == "7 None True\n1 0"


def test_answer_lines_print_what_a_coder_wrote_as_its_programs_last_line():
    from openconductor.providers.python_tool import with_answer_lines_printed

    # The 1.5B coder's habit, asked to end its response with "Final answer: <answer>": it ends the program with it.
    program = "import math\nlcm = 49 * 42 // math.gcd(49, 42)\n# Print the result\nFinal answer: lcm"
    assert with_answer_lines_printed(program).endswith("print('Final answer:', lcm)")
    assert with_answer_lines_printed("x = 3\nFinal answer: {x * 2}").endswith("print(f'Final answer: {x * 2}')")
    assert with_answer_lines_printed("for i in range(2):\n    Final answer: i").endswith("\n    print('Final answer:', i)")
    # A bare number right after the statement that assigns the result is a number the coder stated, not computed: the
    # 1.5B's trace for "the LCM of 49 and 42" computes lcm_value and then writes "Final answer: 147"; the result prints.
    stated = "import math\nlcm_value = abs(49 * 42) // math.gcd(49, 42)\n\n# Print the result\nFinal answer: 147\n"
    assert with_answer_lines_printed(stated).endswith("print('Final answer:', lcm_value)\n")
    assert with_answer_lines_printed("total = 2\ntotal += 3\nFinal answer: 4.5").endswith("print('Final answer:', total)")
    assert with_answer_lines_printed("x = 3\nprint(x)\nFinal answer: 3").endswith("print('Final answer:', 3)")  # no assignment just before
    assert with_answer_lines_printed("Final answer: 3") == "print('Final answer:', 3)"
    assert with_answer_lines_printed("for i in range(2):\n    y = i\n    Final answer: 5").endswith("    print('Final answer:', 5)")  # nested: as written
    assert with_answer_lines_printed("a, b = 1, 2\nFinal answer: 3").endswith("print('Final answer:', 3)")  # not one name
    assert with_answer_lines_printed("print('Final answer: 4')") is None  # parses as written: left alone
    assert with_answer_lines_printed("Final answer: ZNK UL CUARJ") is None  # not an expression: the error is reported as written
    assert with_answer_lines_printed("x = (\nFinal answer: 3") is None  # another error stays


def test_answer_lines_look_back_from_the_last_line_only(monkeypatch):
    # A program of many bare-number lines (hostile, or a coder stuck in a loop) costs one look back, not one a line.
    from openconductor.providers import python_tool

    looked = []
    real = python_tool._computed_name
    monkeypatch.setattr(python_tool, "_computed_name", lambda code, line: looked.append(line.start()) or real(code, line))
    program = "x = 1\n" + "Final answer: 1\n" * 1000 + "y = 2\nFinal answer: 3\n"
    fixed = python_tool.with_answer_lines_printed(program)
    assert len(looked) == 1 and fixed.count("print('Final answer:', 1)") == 1000
    assert fixed.endswith("print('Final answer:', 3)\n")  # the lines before it do not parse: the stated number stays
    assert python_tool.with_answer_lines_printed("y = 2\nFinal answer: 1\nz = 5\nFinal answer: 3").endswith("print('Final answer:', 3)")


async def test_answer_lines_run_in_the_sandbox_only_when_the_option_is_on():
    program = "total = sum(range(5))\nFinal answer: total"
    run, step = await run_code(program)
    assert step.detail["status"] == "error" and "SyntaxError" in step.output
    run, step = await run_code(program, answer_lines=True)
    assert step.detail["status"] == "ok" and step.output == "Final answer: 10" and step.detail["code_from"].endswith("(answer lines printed)")
    run, step = await run_code("result = 6 * 7\nFinal answer: 41", answer_lines=True)
    assert step.detail["status"] == "ok" and step.output == "Final answer: 42"


def test_a_program_that_imports_what_it_uses_runs_as_without_auto_import():
    from openconductor.providers.python_tool import modules_to_preload

    assert modules_to_preload("import math\nprint(math.pi)", ["math"]) == []
    assert modules_to_preload("from math import gcd\nprint(gcd(4, 6), math.pi)", ["math", "re"]) == ["math"]
    assert modules_to_preload("print(math.pi, itertools.count)", ["re", "math", "itertools"]) == ["itertools", "math"]
    assert modules_to_preload("print(math.pi", ["math"]) == []  # does not parse: the interpreter reports it


def test_the_replay_key_names_the_modules_preloaded_and_nothing_when_there_are_none():
    from openconductor.providers.python_tool import PythonToolProvider

    def key(code, **options):
        return PythonToolProvider(python_spec(**options)).replay_key([{"role": "user", "content": f"```python\n{code}\n```"}])

    assert key("print(math.pi)") == {"code": "print(math.pi)\n"}
    assert key("print(math.pi)", auto_import=["re", "math"]) == {"code": "print(math.pi)\n", "auto_import": ["math"]}
    # A program that needs nothing preloaded keeps the key it had without the option: older stores still answer.
    assert key("import math\nprint(math.pi)", auto_import=["math"]) == {"code": "import math\nprint(math.pi)\n"}
    # answer_lines: the key is the program that runs, so a store made without the option answers only where it changes nothing.
    assert key("Final answer: 2 + 2", answer_lines=True) == {"code": "print('Final answer:', 2 + 2)\n"}
    assert key("print(4)", answer_lines=True) == {"code": "print(4)\n"}


async def test_no_code_anywhere_fails_the_step_with_a_message():
    spec = PoolSpec(name="t", workers=[python_spec()])
    async with Pool(spec) as pool:
        run = await solve("What is 2 + 2?", GivenWorkflow(Workflow((Step(0, "Run it.", ()),))), pool)
    assert run.status == "error" and run.steps[0].status == "error"
    assert "found no Python code to run" in run.steps[0].error and run.steps[0].attempts == 1


# -------------------------------------------------------------------------------------- hostile code


async def test_code_cannot_read_the_host():
    here = Path(__file__).resolve()
    probe = (
        "import os\n"
        "found = []\n"
        f"for path in ['/etc/passwd', '/root', '/home', {str(here)!r}, {str(Path.home())!r}, '/proc/1/environ']:\n"
        "    try:\n"
        "        found.append((path, os.listdir(path) if os.path.isdir(path) else open(path).read()[:20]))\n"
        "    except OSError as exc:\n"
        "        found.append((path, type(exc).__name__))\n"
        "print(found)"
    )
    run, step = await run_code(probe)
    assert step.detail["exit_code"] == 0, step.output
    seen = dict(eval(step.output))  # noqa: S307 - our own program's printed repr
    assert seen["/etc/passwd"] == "FileNotFoundError" and seen[str(here)] == "FileNotFoundError"
    assert seen["/root"] == "FileNotFoundError" and seen["/home"] == "FileNotFoundError"
    assert seen["/proc/1/environ"] in ("PermissionError", "FileNotFoundError") or "OPENAI" not in str(seen["/proc/1/environ"])


async def test_code_cannot_reach_the_network_or_write_the_host(tmp_path):
    target = tmp_path / "escaped.txt"
    probe = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2); print('NET OPEN')\n"
        "except OSError as exc:\n"
        "    print('net blocked', type(exc).__name__)\n"
        "try:\n"
        f"    open({str(target)!r}, 'w').write('x'); print('WROTE HOST')\n"
        "except OSError as exc:\n"
        "    print('write blocked', type(exc).__name__)\n"
    )
    run, step = await run_code(probe)
    assert "net blocked" in step.output and "write blocked" in step.output, step.output
    assert not target.exists()


async def test_an_endless_loop_is_killed_at_the_wall_limit_and_marked():
    run, step = await run_code("import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.1)", wall_s=1.5)
    assert step.detail["timed_out"] is True and step.detail["status"] == "error"
    assert step.output.startswith("[python: the program timed out after 1.5 s and was killed]")
    assert "started" in step.output
    assert step.latency_s < 6


async def test_a_cpu_burner_hits_the_cpu_limit():
    run, step = await run_code("while True:\n    pass", cpu_s=1, wall_s=8)
    assert step.output.startswith("[python: the program exceeded its CPU-time limit of 1 s]"), step.output
    assert 0.8 <= step.usage.cpu_s <= 2.5


async def test_an_output_flood_is_cut_and_counted():
    run, step = await run_code("import sys\nsys.stdout.write('x' * 3_000_000)\n_ = sys.stderr.write('e' * 500_000)", max_output_chars=500)
    assert step.detail["stdout_bytes"] == 3_000_000 and step.detail["stderr_bytes"] == 500_000
    assert len(step.output) < 700
    assert step.output.endswith("[... 2999500 more bytes of output dropped]")


async def test_a_flood_past_the_file_size_limit_is_killed():
    run, step = await run_code("while True:\n    print('y' * 100_000)", wall_s=8)
    assert step.detail["status"] == "error"
    assert "output-size limit" in step.output or "timed out" in step.output, step.output


async def test_a_fork_bomb_and_a_memory_hog_are_contained():
    run, step = await run_code("import os\nwhile True:\n    os.fork()", wall_s=3)
    assert step.detail["status"] == "error", step.output
    run, step = await run_code("x = bytearray(4 * 1024**3)\nprint(len(x))", memory_mb=256)
    assert step.output.startswith("[python: the program ran out of memory (limit 256 MiB)]"), step.output


def test_bad_python_options_are_a_pool_config_error():
    # Options are checked where the worker is declared (the pool file), before any provider exists.
    with pytest.raises(ValueError, match=r"wall_s: Input should be greater than 0 \(provider 'python' takes options: wall_s"):
        WorkerSpec(name="py", provider="python", options={"wall_s": 0})
    with pytest.raises(ValueError, match="shell: Extra inputs are not permitted"):
        WorkerSpec(name="py", provider="python", options={"shell": True})
    with pytest.raises(ValueError, match=r"auto_import names standard-library modules .*not \['numpy', '_thread', 'this', 'winreg'\]"):
        WorkerSpec(name="py", provider="python", options={"auto_import": ["math", "numpy", "_thread", "this", "winreg"]})
    with pytest.raises(PoolConfigError, match="sandbox settings file .* does not exist"):
        make_provider(WorkerSpec(name="py", provider="python", options={"sandbox": "/nonexistent/sandbox.toml"}))


# ----------------------------------------------------------------------------------------- retrieval

DOCS = {
    "volcanoes.md": "# Volcanoes\n\nMount Etna is an active volcano on Sicily.\n\nIt erupts often.",
    "rivers/nile.txt": "The Nile flows north through Egypt into the Mediterranean Sea.",
    "rivers/amazon.txt": "The Amazon carries more water than any other river.",
    "ignored.bin": "Etna Etna Etna",
}


def corpus_dir(tmp_path: Path) -> Path:
    for name, text in DOCS.items():
        path = tmp_path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "corpus"


def retrieval_spec(corpus, **options):
    return WorkerSpec(name="search", provider="retrieval", max_retries=0, options={"corpus": str(corpus), **options})


async def search(spec: WorkerSpec, question: str, subtask: str = "Find the relevant passage."):
    async with Pool(PoolSpec(name="t", workers=[spec])) as pool:
        return await solve(question, GivenWorkflow(Workflow((Step(0, subtask, ()),))), pool)


async def test_retrieval_over_a_directory_returns_the_best_passage_first(tmp_path):
    run = await search(retrieval_spec(corpus_dir(tmp_path), top_k=2), "Which river flows through Egypt?")
    step = run.steps[0]
    assert run.status == "ok" and step.output.startswith("[1] rivers/nile.txt (score ")
    assert "flows north through Egypt" in step.output and "ignored.bin" not in step.output
    assert step.detail["passages"] == 3 and step.detail["sources"][0] == "rivers/nile.txt"
    assert step.detail["scores"] == sorted(step.detail["scores"], reverse=True) and step.latency_s > 0


async def test_retrieval_over_jsonl_names_sources_and_says_when_nothing_matches(tmp_path):
    path = tmp_path / "kb.jsonl"
    rows = [{"title": "Etna", "body": "Mount Etna erupts often."}, {"id": "k2", "body": "Bubblewrap isolates processes."}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    run = await search(retrieval_spec(path, text_field="body"), "What isolates processes?")
    assert run.steps[0].output.startswith("[1] k2 (score ")
    run = await search(retrieval_spec(path, text_field="body"), "zebra quantum", subtask="xylophone")
    assert run.steps[0].output == "[retrieval: no passage of the corpus matches the query]"


def test_passages_merge_paragraphs_and_cut_long_ones(tmp_path):
    (tmp_path / "long.txt").write_text("word " * 250 + "\n\nshort one\n\nshort two")
    passages = load_corpus(RetrievalOptions(corpus=str(tmp_path), passage_words=100))
    assert [len(p.text.split()) for p in passages] == [100, 100, 54]  # the rest of the long one + both short ones


async def test_a_giant_query_is_cut_to_max_query_words(tmp_path):
    run = await search(retrieval_spec(corpus_dir(tmp_path), max_query_words=50), "Nile " + "padding " * 200_000)
    assert run.status == "ok" and run.steps[0].detail["query_words"] == 50
    assert "Nile" in run.steps[0].output


def test_a_missing_corpus_fails_when_the_pool_loads(tmp_path):
    with pytest.raises(CorpusError, match="retrieval corpus not found"):
        Pool(PoolSpec(name="t", workers=[retrieval_spec(tmp_path / "nope")]))


async def test_an_empty_or_broken_or_giant_corpus_fails_the_step_with_its_reason(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.md").write_text("\n\n  \n")
    run = await search(retrieval_spec(empty), "anything")
    assert run.steps[0].status == "error" and "has no text" in run.steps[0].error

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine"}\nnot json\n')
    run = await search(retrieval_spec(broken), "fine")
    assert "broken.jsonl:2: not a JSON object" in run.steps[0].error

    big = tmp_path / "big"
    big.mkdir()
    (big / "a.txt").write_bytes(b"lorem ipsum " * 200_000)  # 2.4 MB
    run = await search(retrieval_spec(big, max_corpus_mb=1), "lorem")
    assert "is 2.4 MB, over max_corpus_mb = 1" in run.steps[0].error
    with pytest.raises(CorpusError, match="expected a directory, a .jsonl file or a text file"):
        load_corpus(RetrievalOptions(corpus=__file__))  # a .py file


async def test_tools_are_not_the_strongest_worker_and_moa_skips_them(tmp_path):
    from openconductor.policies import PlanRequest, make_policy

    spec = PoolSpec(name="t", workers=[python_spec(), coder_spec(), retrieval_spec(corpus_dir(tmp_path))])
    assert spec.strongest_index() == 1
    async with Pool(spec) as pool:
        plan = await make_policy("moa").plan(PlanRequest("q", pool))
    assert [s.worker for s in plan.workflow.steps] == [1, 1]


def test_the_offline_pool_auto_imports_and_the_results_commands_write_it_without(tmp_path):
    """The default pool's python worker takes auto_import (on since 2026-11-28) and its conductor hands unfamiliar
    questions to a fixed workflow (since 2026-11-29); the two seds of docs/results.md, which write the pools its earlier rows were
    measured on, change those settings and nothing else."""
    import re
    import shlex
    import subprocess

    from openconductor.pool import default_pool_path, load_default_pool, load_pool

    spec = load_default_pool()
    (python,) = [w for w in spec.workers if w.provider == "python"]
    assert python.options["auto_import"] == ["math", "itertools", "functools", "collections", "fractions", "decimal", "statistics",
                                             "datetime", "re", "string", "heapq", "operator", "bisect"]
    results = (Path(__file__).resolve().parents[1] / "docs" / "results.md").read_text().splitlines()
    (plan_line,) = [x for x in results if re.match(r"mkdir -p runs && sed '.*' src/openconductor/data/local_pool.toml > runs/plan.toml$", x)]
    (plain_line,) = [x for x in results if re.match(r"sed '.*' runs/plan.toml > runs/plain.toml$", x)]

    def sed(line: str, source: Path, target: Path) -> Path:
        script = shlex.split(line.split("&& ", 1)[-1])[1]
        target.write_text(subprocess.run(["sed", script, str(source)], check=True, capture_output=True, text=True).stdout)
        return target

    planning = load_pool(sed(plan_line, default_pool_path(), tmp_path / "plan.toml"))
    assert spec.conductor.unfamiliar == "best-fixed" and planning.conductor.unfamiliar == "plan"
    assert planning.model_dump(exclude={"conductor"}) == spec.model_dump(exclude={"conductor"})
    assert planning.conductor.model_dump(exclude={"unfamiliar"}) == spec.conductor.model_dump(exclude={"unfamiliar"})
    without = load_pool(sed(plain_line, tmp_path / "plan.toml", tmp_path / "plain.toml"))
    (python_plain,) = [w for w in without.workers if w.provider == "python"]
    assert "auto_import" not in python_plain.options
    assert without.model_dump(exclude={"workers"}) == planning.model_dump(exclude={"workers"})
    assert [w.model_dump(exclude={"options"}) for w in without.workers] == [w.model_dump(exclude={"options"}) for w in spec.workers]
    assert {k: v for k, v in python.options.items() if k != "auto_import"} == python_plain.options
