"""Plans that end in a tool step: the run still ends with an answer a model could give.

The python worker and its bubblewrap sandbox are real. "No bubblewrap" is made real too, by the pool's own
config flag (a sandbox settings file naming a bwrap binary that does not exist): the sandbox's probe fails
exactly as on a machine without it. The only stand-in is a simulated "coder" (labelled: no model) whose
program is fixed per question, so what the executor does around the tool can be checked exactly.
"""

from __future__ import annotations

import json
import logging

import pytest

from openconductor.answer_format import AnswerFormat, JSONFormat
from openconductor.budget import Limits
from openconductor.executor import ANSWER_SUBTASK, solve
from openconductor.worker_message import parse as parse_worker_message
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.providers.simulated import register_responder
from openconductor.workflow import Step, Workflow

PROGRAMS: dict[str, str] = {}


@register_responder("fallback-coder")
def _coder(spec, messages, rng) -> str:
    """Simulated (not a model): writes the program registered for the task; asked for the answer after the
    program ran (or could not), it says what it read."""
    context = parse_worker_message(messages)
    if context.subtask == ANSWER_SUBTASK:
        return f"coder's answer after: {context.earlier[-1][2][:60]}"
    return f"```python\n{PROGRAMS[context.question]}\n```"


def pool_spec(sandbox_file: str | None = None) -> PoolSpec:
    python_options = {"wall_s": 5, "cpu_s": 2, **({"sandbox": sandbox_file} if sandbox_file else {})}
    return PoolSpec(name="t", workers=[
        WorkerSpec(name="coder", provider="simulated", options={"world": "fallback-coder"}, max_retries=0),
        WorkerSpec(name="python", provider="python", max_retries=0, options=python_options),
    ])


CODE_THEN_RUN = Workflow((Step(0, "Write a program that prints the answer.", ()), Step(1, "Run the program.", "all")))


async def ask(pool: Pool, code: str, **kwargs):
    question = f"task {len(PROGRAMS)}"
    PROGRAMS[question] = code
    return await solve(question, GivenWorkflow(CODE_THEN_RUN), pool, **kwargs)


@pytest.fixture
def no_bwrap(tmp_path) -> str:
    """A sandbox settings file whose bubblewrap does not exist: the config flag for 'bwrap is missing'."""
    path = tmp_path / "sandbox.toml"
    path.write_text('[sandbox]\nbwrap = "/nonexistent/bwrap"\n')
    return str(path)


# ------------------------------------------------------------------------------ the sandbox is missing


async def test_a_tool_that_cannot_run_is_reported_once_at_load_and_a_model_answers(no_bwrap, caplog):
    caplog.set_level(logging.WARNING, logger="openconductor.pool")
    async with Pool(pool_spec(no_bwrap)) as pool:
        loaded = [r.getMessage() for r in caplog.records]
        runs = [await ask(pool, "print('Final answer:', 6 * 7)") for _ in range(2)]
    # Once, at load, naming the worker, what is missing and the fix; never again per run.
    assert len(loaded) == 1 and [r.getMessage() for r in caplog.records] == loaded
    assert "worker 'python' cannot run on this machine" in loaded[0] and "`/nonexistent/bwrap` is not on PATH" in loaded[0]
    assert "apt-get install -y bubblewrap" in loaded[0] and "'coder' answers instead" in loaded[0]
    assert set(pool.unavailable) == {"python"}
    for run in runs:
        coder, python, answer = run.steps
        assert python.status == "error" and python.error_code == "worker_unavailable" and python.attempts == 0
        assert "cannot run on this machine" in python.error
        assert answer.worker_name == "coder" and answer.appended and answer.subtask == ANSWER_SUBTASK
        assert run.status == "ok" and run.final_answer.startswith("coder's answer after: (Agent 1 failed to respond")
        assert run.warnings == loaded and run.totals.calls == 2  # the tool was never called


async def test_a_view_of_the_pool_keeps_what_cannot_run_without_warning_again(no_bwrap, caplog):
    caplog.set_level(logging.WARNING, logger="openconductor.pool")
    async with Pool(pool_spec(no_bwrap)) as pool:
        view = pool.view([1, 0])
    assert len(caplog.records) == 1 and view.unavailable == pool.unavailable and view.warnings == pool.warnings


async def test_with_the_sandbox_working_nothing_is_reported_and_a_printed_answer_stands():
    async with Pool(pool_spec()) as pool:
        run = await ask(pool, "print('Final answer:', 6 * 7)")
    assert pool.unavailable == {} and pool.warnings == [] and run.warnings == []
    assert [s.worker_name for s in run.steps] == ["coder", "python"] and run.final_answer == "Final answer: 42"


# ------------------------------------------------------------------ a program that fails or prints nothing


@pytest.mark.parametrize("code, status", [("raise ValueError('boom')", "error"), ("x = 6 * 7", "empty")])
async def test_a_program_that_fails_or_prints_nothing_is_followed_by_a_model_answer(code, status):
    async with Pool(pool_spec()) as pool:
        run = await ask(pool, code)
    coder, python, answer = run.steps
    assert python.status == "ok" and python.detail["status"] == status
    assert answer.worker_name == "coder" and answer.visible == [0, 1] and "without an answer" in answer.appended
    assert run.status == "ok" and run.final_answer.startswith("coder's answer after: [python: the program")


async def test_no_model_step_is_added_past_a_limit():
    async with Pool(pool_spec()) as pool:
        run = await ask(pool, "x = 1", limits=Limits(max_calls=2))
    assert [s.worker_name for s in run.steps] == ["coder", "python", "coder"]
    assert run.steps[2].status == "skipped" and run.limits_hit == ["max_calls"] and run.status == "limit"


# -------------------------------------------------------------------- the caller asks for a format or tools


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.mark.parametrize("answer", [AnswerFormat(json_format=JSONFormat(type="json_schema", name="a", schema=SCHEMA)),
                                    AnswerFormat(json_format=JSONFormat(type="json_object"))])
async def test_a_format_request_adds_a_model_step_after_a_final_tool_step(answer):
    async with Pool(pool_spec()) as pool:
        run = await ask(pool, "print('Final answer:', 6 * 7)", answer=answer)
    coder, python, formatter = run.steps
    assert python.detail["status"] == "ok" and formatter.worker_name == "coder" and "requested format" in formatter.appended
    assert run.status == "ok" and isinstance(json.loads(run.final_answer), dict)
    assert "Final answer: 42" in json.dumps(formatter.messages)  # the model saw the program's output
