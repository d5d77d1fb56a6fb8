"""Decision targets after round 1 by search (issue 67). Workers are SIMULATED (scripted replies, no model); programs
and hidden tests run in the real sandbox."""

from __future__ import annotations

import json

import pytest

from openconductor.conductor.prompt import conductor_messages
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.providers.simulated import register_responder
from openconductor.sandbox import SandboxUnavailable, check_sandbox
from openconductor.tasks import load_task
from openconductor.tasks.codegen import problem_of
from openconductor.train.decisions import decision_search, summarize


def _sandbox() -> bool:
    try:
        check_sandbox()
        return True
    except SandboxUnavailable:
        return False


needs_sandbox = pytest.mark.skipif(not _sandbox(), reason="bubblewrap cannot run here")


def _right(q) -> str:
    problem, shown, hidden = problem_of(q.metadata["template"], 0, q.metadata["index"])
    table = {repr(v): problem.reference(v) for v in shown + hidden}
    return f"```python\ndef {problem.entry}(x):\n    return {table!r}[repr(x)]\n```"


def _wrong(q) -> str:
    return f"```python\ndef {q.reference['entry_point']}(x):\n    return None\n```"


def _spec(coder: str, strong: str) -> PoolSpec:
    workers = [WorkerSpec(name="coder", provider="simulated", options={"world": coder}, max_retries=0),
               WorkerSpec(name="strong", provider="simulated", options={"world": strong}, max_retries=0)]
    return PoolSpec(name="t", workers=workers, strongest="coder", limits={"max_depth": 1})


@needs_sandbox
def test_each_decision_is_tried_from_one_round_and_the_cheapest_right_one_is_the_target(tmp_path):
    """Question 0: the coder is right at once (accept). Question 1: it fails, and its revision (told what failed) is
    right (revise). Question 2: only the other worker is right (escalate). Question 3: nobody is (accept, no gain)."""
    task = load_task("codegen", limit=4)
    q0, q1, q2, q3 = task.questions
    coder_prompts: list[str] = []

    def coder(spec, messages, rng):
        text = json.dumps(messages)
        coder_prompts.append(text)
        q = next(q for q in task.questions if f"{q.reference['entry_point']}(" in text)
        revising = "examples in the task" in text
        return _right(q) if q is q0 or (q is q1 and revising) else _wrong(q)

    def strong(spec, messages, rng):
        text = messages[-1]["content"]
        return _right(q2) if q2.reference["entry_point"] in text else "no idea"

    register_responder("decide-coder")(coder)
    register_responder("decide-strong")(strong)
    spec = _spec("decide-coder", "decide-strong")
    out = tmp_path / "rows.jsonl"
    import asyncio

    rows, summary = asyncio.run(decision_search(spec, task, coder="coder", escalate_to="strong", out=out))
    assert [r.best for r in rows] == ["accept", "revise", "escalate", "accept"]
    assert [r.failed for r in rows] == [False, True, True, True]
    assert rows[1].correct == {"accept": False, "revise": True, "escalate": False}
    assert summary["oracle"] == 3 and summary["always_accept"] == 1 and summary["oracle_gain_over_accept"] == 2
    assert summary["revise_on_failed_examples"] == 2 and summary["best"] == {"accept": 2, "revise": 1, "escalate": 1}
    # The revision named what failed; the target is the workflow a conductor writes.
    assert any("reproduces 0 of the 3 examples" in p for p in coder_prompts)
    assert rows[2].target.splitlines()[1] == "model_id = [1]" and rows[0].target.splitlines()[1] == "model_id = []"
    # The recorded prompt is the runtime's recursive-round prompt: the round's steps with their verdicts, no hidden test.
    user = rows[1].prompt[-1]["content"]
    assert "What the steps of that round did:\nstep 0 (coder): program ran: 0/3 examples reproduced" in user
    assert "This is a verification round" in user and "assert candidate" not in json.dumps(rows[1].prompt)
    assert [json.loads(line)["best"] for line in out.read_text().splitlines()] == [r.best for r in rows]
    assert summarize(rows[:1])["oracle_gain_over_accept"] == 0


@needs_sandbox
async def test_training_prompts_for_a_recursive_round_are_the_runtimes():
    """The prompt a review round is shown at run time (captured from the executor) equals the one training builds from
    the same round's steps (``executor.review_previous``, what the reward's blended recursive round uses)."""
    from openconductor.executor import review_previous, solve
    from openconductor.policies.baselines import SOLVE, GivenWorkflow
    from openconductor.train.decisions import _Reviewed
    from openconductor.workflow import Step, Workflow

    task = load_task("codegen", limit=1)
    q = task.questions[0]
    register_responder("decide-same")(lambda spec, messages, rng: _wrong(q))
    spec = _spec("decide-same", "decide-same")
    round1 = Workflow((Step(0, SOLVE, ()),))
    async with Pool(spec.for_execution()) as pool:
        captured = _Reviewed(round1)
        await solve(task.text(q), captured, pool)
        plain = await solve(task.text(q), GivenWorkflow(round1), pool)
    assert captured.previous is not None
    runtime = conductor_messages(task.text(q), spec, previous=captured.previous)
    training = conductor_messages(task.text(q), spec, previous=review_previous(plain.steps))
    assert runtime == training and "0/3 examples reproduced" in runtime[-1]["content"]
