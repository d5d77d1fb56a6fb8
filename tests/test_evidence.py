"""Evidence a round can read (issue 67): per-step verdicts, the recursive round's view of them, the repair workflow.

Workers here are simulated (labelled: scripted replies, no model); programs run in the real bubblewrap sandbox.
"""

from __future__ import annotations

import json

import pytest

from openconductor.evaluation.runner import evaluate
from openconductor.evidence import evidence_lines, round_lines, tool_verdict
from openconductor.executor import solve
from openconductor.policies import make_policy
from openconductor.policies.baselines import GivenWorkflow
from openconductor.policies.base import Previous
from openconductor.conductor.prompt import conductor_messages
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.providers.simulated import register_responder
from openconductor.question_examples import Example, parse_examples, run_examples
from openconductor.sandbox import SandboxUnavailable, check_sandbox
from openconductor.tasks.base import Question, Task
from openconductor.workflow import Step, Workflow


def _sandbox() -> bool:
    try:
        check_sandbox()
        return True
    except SandboxUnavailable:
        return False


needs_sandbox = pytest.mark.skipif(not _sandbox(), reason="bubblewrap cannot run here")

PROMPT = '''
def add_one(x: int) -> int:
    """Return x plus one.
    >>> add_one(1)
    2
    >>> add_one(41)
    42
    """
'''
RIGHT = "```python\ndef add_one(x: int) -> int:\n    return x + 1\n```"
WRONG = "```python\ndef add_one(x: int) -> int:\n    return x + 2\n```"
BROKEN = "```python\ndef add_one(x: int) -> int:\n    return undefined_name\n```"


# ---------------------------------------------------------------------------------------- parsing


def test_examples_are_read_from_the_question_in_each_form_humaneval_uses():
    question = '''
def helper(x):
    return x

def f(a, b):
    """Sum, sort of.
    f(x) = 1 + x  (a definition above the examples: not one)
    Examples:
    >>> f(1, 2)
    3
    f(2, 2) == 4
    f(3, 3) ➞ 6
    * f(0, 1) => 1
    for f(5, 5) ==> 10
    f(7, 1) = 8
    f(a, 1) => 2
    Input: a = 9, b = 1
    Output: 10
    For a = 2, b = 3 the output should be 5.
    """
'''
    found = parse_examples(question)
    assert found == [Example("f(1, 2)", "3"), Example("f(2, 2)", "4"), Example("f(3, 3)", "6"), Example("f(0, 1)", "1"),
                     Example("f(5, 5)", "10"), Example("f(7, 1)", "8"), Example("f(9, 1)", "10"), Example("f(2, 3)", "5")]


def test_a_question_without_a_function_or_examples_has_none():
    assert parse_examples("What is 2 + 2?") == []
    assert parse_examples("def f(x):\n    '''Double x.'''\n") == []


def test_a_tool_verdict_keeps_exit_status_timeout_error_tail_and_output():
    failed = tool_verdict("[python: the program exited with code 1]\n[stdout]\npartial\n[stderr]\nTraceback (most recent call last):\n"
                          '  File "x", line 1\nNameError: name \'y\' is not defined', {"status": "error", "exit_code": 1, "timed_out": False})
    assert failed.exit_code == 1 and not failed.timed_out and failed.printed.startswith("partial")
    assert failed.error_tail[-1] == "NameError: name 'y' is not defined"
    assert failed.line() == "error: NameError: name 'y' is not defined"
    ok = tool_verdict("Final answer: 42\n", {"status": "ok", "exit_code": 0, "timed_out": False})
    assert ok.line() == "program ran, printed: Final answer: 42"
    slow = tool_verdict("[python: the program timed out after 10s]", {"status": "error", "exit_code": None, "timed_out": True})
    assert slow.line() == "program timed out"


# ---------------------------------------------------------------------------------------- running


@needs_sandbox
async def test_a_program_is_run_against_the_questions_examples():
    examples = parse_examples(PROMPT)
    right = await run_examples("def add_one(x):\n    return x + 1\n", "add_one", examples)
    assert right.all_passed and right.line() == "program ran: 2/2 examples reproduced"
    wrong = await run_examples("def add_one(x):\n    return 2 if x == 1 else 0\n", "add_one", examples)
    assert (wrong.passed, wrong.total) == (1, 2) and wrong.failures[0].got == "0"
    assert "add_one(41) should return 42, but it returned 0" in wrong.line()
    broken = await run_examples("def add_one(x):\n    return x +\n", "add_one", examples)
    assert broken.load_error is not None and broken.line().startswith("program does not load: SyntaxError")


def _pool(*workers, conductor=None, max_depth=1) -> Pool:
    return Pool(PoolSpec(name="t", workers=list(workers), conductor=conductor or {}, limits={"max_depth": max_depth}))


def _coder(world: str) -> WorkerSpec:
    return WorkerSpec(name="coder", provider="simulated", options={"world": world}, max_retries=0)


@needs_sandbox
async def test_each_step_carries_a_verdict_and_agreement():
    register_responder("right-coder")(lambda spec, messages, rng: RIGHT)
    wf = Workflow((Step(0, "write it", ()), Step(0, "write it again", ()), Step(0, "combine", "all")))
    async with _pool(_coder("right-coder")) as pool:
        run = await solve(PROMPT, GivenWorkflow(wf), pool)
    assert all(s.verdict is not None and s.verdict.examples.all_passed for s in run.steps)
    assert [a.model_dump() for a in run.steps[2].verdict.agreement] == [{"step": 0, "agrees": True}, {"step": 1, "agrees": True}]
    assert evidence_lines(run.steps).splitlines()[2] == "step 2 (coder): program ran: 2/2 examples reproduced; agrees with step 0, 1"


# ------------------------------------------------------------------------------------ the repair workflow


def _scripted(*replies):
    """A coder that gives ``replies`` in turn (the last repeats), recording every prompt it is sent."""
    seen: list[str] = []

    def reply(spec, messages, rng):
        seen.append(messages[-1]["content"])
        return replies[min(len(seen) - 1, len(replies) - 1)]

    return reply, seen


@needs_sandbox
async def test_repair_accepts_a_program_that_reproduces_the_examples():
    reply, seen = _scripted(RIGHT)
    register_responder("repair-right")(reply)
    async with _pool(_coder("repair-right")) as pool:
        run = await solve(PROMPT, make_policy("repair"), pool)
    review = run.steps[-1]
    assert review.nested is not None and review.nested.steps == [] and run.totals.calls == 1 == len(seen)
    assert run.final_answer == RIGHT.strip() and run.status == "ok"
    assert "recursive round accepted the answer" in "\n".join(round_lines(run))


@needs_sandbox
@pytest.mark.parametrize(("first", "named"), [(WRONG, "add_one(1) should return 2, but it returned 3"),
                                               (BROKEN, "NameError: name 'undefined_name' is not defined"),
                                               ("I cannot do that.", "did not contain a complete Python function named add_one")])
async def test_repair_once_names_what_failed(first, named):
    reply, seen = _scripted(first, RIGHT)
    register_responder("repair-wrong")(reply)
    async with _pool(_coder("repair-wrong")) as pool:
        run = await solve(PROMPT, make_policy("repair"), pool)
    assert len(seen) == 2 and named in seen[1]
    assert "```python\ndef add_one" not in seen[1]  # the failing program is not shown back by default: a small coder copies it
    nested = run.steps[-1].nested
    assert len(nested.steps) == 1 and nested.steps[0].verdict.examples.all_passed
    assert run.final_answer == RIGHT.strip() and run.totals.calls == 2
    rounds = round_lines(run)
    assert rounds[0] == "round 0: 2 step(s), ok" and "recursive round revised it in 1 step(s)" in rounds[2]
    assert rounds[-1].strip() == "step 0 (coder): program ran: 2/2 examples reproduced"


@needs_sandbox
async def test_repair_can_escalate_a_failing_program_to_another_worker():
    """escalate_to: the repair step, with the same instruction, goes to the stronger worker; a passing program is still
    accepted without calling it."""
    coder, coder_seen = _scripted(WRONG)
    strong, strong_seen = _scripted(RIGHT)
    register_responder("escalate-coder")(coder)
    register_responder("escalate-strong")(strong)
    strong_spec = WorkerSpec(name="strong", provider="simulated", options={"world": "escalate-strong"}, max_retries=0)
    async with _pool(_coder("escalate-coder"), strong_spec) as pool:
        policy = make_policy("repair", coder="coder", escalate_to="strong")
        run = await solve(PROMPT, policy, pool)
    assert policy.name == "repair:coder>strong"
    assert len(coder_seen) == 1 and len(strong_seen) == 1 and "add_one(1) should return 2, but it returned 3" in strong_seen[0]
    assert run.final_answer == RIGHT.strip() and run.steps[-1].nested.steps[0].worker_name == "strong"
    register_responder("escalate-right")(lambda spec, messages, rng: RIGHT)
    async with _pool(_coder("escalate-right"), strong_spec) as pool:
        run = await solve(PROMPT, make_policy("repair", coder="coder", escalate_to="strong"), pool)
    assert len(strong_seen) == 1 and run.final_answer == RIGHT.strip()


@needs_sandbox
async def test_repair_can_show_the_failing_program():
    reply, seen = _scripted(WRONG, RIGHT)
    register_responder("repair-shown")(reply)
    async with _pool(_coder("repair-shown")) as pool:
        run = await solve(PROMPT, make_policy("repair", show_program="true"), pool)
    assert "That program:\n```python\ndef add_one(x: int) -> int:\n    return x + 2\n```" in seen[1]
    assert run.final_answer == RIGHT.strip()


HALF = "```python\ndef add_one(x: int) -> int:\n    return 2 if x == 1 else 0\n```"
UNLOADABLE = "```python\ndef add_one(x: int) -> int:\n    return (x +\n```"


@needs_sandbox
@pytest.mark.parametrize(("keep_better", "answer"), [("true", HALF), ("false", UNLOADABLE)])
async def test_a_repair_that_does_worse_on_the_examples_is_not_taken(keep_better, answer):
    reply, seen = _scripted(HALF, UNLOADABLE)
    register_responder(f"repair-worse-{keep_better}")(reply)
    async with _pool(_coder(f"repair-worse-{keep_better}")) as pool:
        run = await solve(PROMPT, make_policy("repair", keep_better=keep_better), pool)
    assert len(seen) == 2 and run.final_answer == answer.strip()
    assert ("did worse on the question's examples" in (run.steps[-1].error or "")) == (keep_better == "true")


@needs_sandbox
async def test_repair_is_not_run_past_the_depth_limit():
    reply, seen = _scripted(WRONG, RIGHT)
    register_responder("repair-capped")(reply)
    async with _pool(_coder("repair-capped"), max_depth=0) as pool:
        run = await solve(PROMPT, make_policy("repair"), pool)
    assert len(seen) == 1 and run.final_answer == WRONG.strip() and "max_depth" in run.limits_hit


@needs_sandbox
async def test_the_recursive_round_prompt_shows_each_steps_verdict():
    seen: list[str] = []
    plans = iter(['Reasoning: write it.\nmodel_id = [0, 1]\nsubtasks = ["write it", "check it"]\naccess_list = [[], ["all"]]',
                  "Reasoning: fine.\nmodel_id = []\nsubtasks = []\naccess_list = []"])
    register_responder("planner-seeing")(lambda spec, messages, rng: seen.append(messages[-1]["content"]) or next(plans))
    register_responder("wrong-coder")(lambda spec, messages, rng: WRONG)
    conductor = {"backend": {"name": "c", "provider": "simulated", "options": {"world": "planner-seeing"}}}
    async with _pool(_coder("wrong-coder"), WorkerSpec(name="self", provider="conductor"), conductor=conductor) as pool:
        run = await solve(PROMPT, make_policy("conductor"), pool)
    assert run.steps[1].nested is not None and len(seen) == 2
    assert "What the steps of that round did:\nstep 0 (coder): program ran: 0/2 examples reproduced; first failure: add_one(1) should return 2" in seen[1]


# ------------------------------------------------------------------------------ what never reaches a worker


SENTINEL = "HIDDEN-TEST-SENTINEL-6a1f"


@needs_sandbox
async def test_the_graders_hidden_tests_and_reference_never_reach_a_worker_or_the_conductor():
    """A HumanEval question whose hidden test holds a sentinel, run through the eval loop (which holds the
    reference) with recording workers and a recording conductor: no prompt, no record of the run, holds it."""
    prompts: list[str] = []
    register_responder("recording-coder")(lambda spec, messages, rng: prompts.append(json.dumps(messages)) or WRONG)
    plan = 'Reasoning: code it.\nmodel_id = [0, 1]\nsubtasks = ["write it", "check it"]\naccess_list = [[], ["all"]]'
    register_responder("recording-planner")(lambda spec, messages, rng: prompts.append(json.dumps(messages)) or plan)
    test = f"def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(3) != '{SENTINEL}'\n"
    question = Question(id="HumanEval/0", prompt=PROMPT, grader="code",
                        reference={"test": test, "entry_point": "add_one", "canonical_solution": f"    return x + 1  # {SENTINEL}"})
    task = Task("humaneval", [question], instruction="Reply with the whole function in one ```python code block.")
    runs = []

    class Store:
        def save(self, run):
            runs.append(run)

    conductor = {"backend": {"name": "c", "provider": "simulated", "options": {"world": "recording-planner"}}}
    async with _pool(_coder("recording-coder"), WorkerSpec(name="self", provider="conductor"), conductor=conductor) as pool:
        policies = [("repair", make_policy("repair")), ("conductor", make_policy("conductor")), ("single", make_policy("single", worker="coder"))]
        records = await evaluate([task], policies, pool, store=Store(), concurrency=1)
    assert len(records) == 3 and len(runs) == 3
    assert len(prompts) >= 6  # the coder's first try and its repair, the conductor's two rounds, ...
    assert any("examples reproduced" in p for p in prompts)  # the evidence did reach them
    for text in prompts + [run.model_dump_json() for run in runs]:
        assert SENTINEL not in text
    again = conductor_messages(task.text(question), pool.spec, previous=Previous(answer=runs[0].final_answer, steps=runs[0].steps))
    assert SENTINEL not in json.dumps(again)


@needs_sandbox
async def test_conductor_trace_shows_each_round_and_its_verdicts():
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.traces import TraceStore

    reply, _ = _scripted(WRONG, RIGHT)
    register_responder("repair-traced")(reply)
    async with _pool(_coder("repair-traced")) as pool:
        run = await solve(PROMPT, make_policy("repair"), pool)
    TraceStore().save(run)
    shown = CliRunner().invoke(app, ["trace", run.id[:8]], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "verdict: program ran: 0/2 examples reproduced" in said and "rounds and verdicts" in said
    assert "round 1: 1 step(s), ok" in said and "recursive round revised it in 1 step(s), ok" in said
