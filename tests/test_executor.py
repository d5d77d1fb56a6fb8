"""The orchestration loop on simulated workers (labelled: no model is involved here)."""

import asyncio
import time

import pytest

from openconductor.budget import Limits
from openconductor.executor import build_messages, clean_answer, solve
from openconductor.policies import Plan, PlanRequest, Policy
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, PoolSpec, WorkerCallError, WorkerSpec
from openconductor.providers.simulated import register_responder
from openconductor.records import PlanRecord, StepRecord
from openconductor.workflow import Step, Workflow


def sim(name, latency=0.0, **options):
    return WorkerSpec(name=name, provider="simulated", options={"latency_s": latency, **options}, max_retries=0)


def pool_of(*workers, **limits) -> Pool:
    return Pool(PoolSpec(name="test", workers=list(workers), limits=Limits(**limits)))


# ---------------------------------------------------------------------------------------- contexts


def record(i, worker, output, status="ok"):
    return StepRecord(index=i, worker=worker, worker_name=f"w{worker}", subtask="", access=[], output=output, status=status, error=None if status == "ok" else "boom")


def test_context_with_no_access_has_only_task_and_subtask():
    wf = Workflow((Step(2, "Design it", ()), Step(0, "Implement it", ())))
    messages = build_messages("Sort a list", wf, 1, {0: record(0, 2, "a plan")})
    assert len(messages) == 1 and messages[0]["role"] == "user"
    text = messages[0]["content"]
    assert "<Overall task>\nSort a list\n</Overall task>" in text
    assert "a plan" not in text and "Agent 2" not in text
    assert text.endswith("Your assigned subtask: Implement it")


def test_context_with_all_tags_each_earlier_step_by_worker_id():
    wf = Workflow((Step(2, "Design it", ()), Step(1, "Critique it", ()), Step(0, "Implement it", "all")))
    outputs = {0: record(0, 2, "PLAN-TEXT"), 1: record(1, 1, "CRITIQUE-TEXT")}
    text = build_messages("Sort a list", wf, 2, outputs)[0]["content"]
    assert "<Subtask assigned to Agent 2>\nDesign it\n</Subtask assigned to Agent 2>\n<Agent 2 response>\nPLAN-TEXT\n</Agent 2 response>" in text
    assert "<Agent 1 response>\nCRITIQUE-TEXT\n</Agent 1 response>" in text
    assert text.index("PLAN-TEXT") < text.index("CRITIQUE-TEXT") < text.index("Your assigned subtask")


def test_context_with_index_list_sees_only_those_steps_and_marks_failures():
    wf = Workflow((Step(0, "a", ()), Step(1, "b", ()), Step(0, "c", (1,))))
    outputs = {0: record(0, 0, "OUT-A"), 1: record(1, 1, "", status="error")}
    text = build_messages("q", wf, 2, outputs)[0]["content"]
    assert "OUT-A" not in text
    assert "(Agent 1 failed to respond: boom)" in text


def test_clean_answer_strips_think_and_answer_tags():
    assert clean_answer("<think>hmm 41?</think>The result: <answer>42</answer>") == "The result: 42"
    assert clean_answer("<think>never closed") == ""


# ------------------------------------------------------------------------------------ concurrency


async def test_fan_out_costs_max_latency_not_sum():
    latency = 0.3
    async with pool_of(sim("a", latency), sim("b", latency), sim("c", latency), sim("agg", latency)) as pool:
        wf = Workflow((Step(0, "x", ()), Step(1, "y", ()), Step(2, "z", ()), Step(3, "combine", "all")))
        start = time.perf_counter()
        run = await solve("q", GivenWorkflow(wf), pool)
        elapsed = time.perf_counter() - start
    assert run.status == "ok" and run.totals.calls == 4
    # Critical path is two calls (0.6 s); sequential would be 1.2 s.
    assert 2 * latency <= elapsed < 2 * latency + 0.25
    starts = sorted(s.started_at for s in run.steps[:3])
    assert starts[-1] - starts[0] < 0.1
    assert run.steps[3].started_at >= max(s.finished_at for s in run.steps[:3])


async def test_chain_waits_for_visible_steps_only():
    async with pool_of(sim("slow", 0.4), sim("fast", 0.05)) as pool:
        # Step 2 sees only step 1 (fast), so it must not wait for step 0 (slow).
        wf = Workflow((Step(0, "slow", ()), Step(1, "fast", ()), Step(1, "after fast", (1,)), Step(1, "final", "all")))
        run = await solve("q", GivenWorkflow(wf), pool)
    s = run.steps
    assert s[2].finished_at < s[0].finished_at
    assert s[3].started_at >= s[0].finished_at


# -------------------------------------------------------------------------------------- failures


async def test_failing_worker_is_reported_not_raised_and_best_answer_kept():
    async with pool_of(sim("good"), sim("bad", fail_rate=1.0)) as pool:
        wf = Workflow((Step(0, "answer", ()), Step(1, "refine", "all")))
        run = await solve("q", GivenWorkflow(wf), pool)
    assert run.steps[1].status == "error" and "simulated error" in run.steps[1].error
    assert run.status == "error"
    assert run.final_answer == run.steps[0].output  # best answer so far


async def test_retryable_failures_are_retried_then_reported():
    flaky = WorkerSpec(name="flaky", provider="simulated", options={"fail_rate": 1.0, "failure": "retryable"}, max_retries=2)
    async with pool_of(flaky) as pool:
        run = await solve("q", GivenWorkflow(Workflow((Step(0, "a", ()),))), pool)
    assert run.steps[0].status == "error"
    assert run.steps[0].attempts == 3
    assert "after 3 attempt(s)" in run.steps[0].error


async def test_worker_timeout_is_a_step_error():
    slow = WorkerSpec(name="slow", provider="simulated", options={"latency_s": 1.0}, timeout_s=0.1, max_retries=0)
    async with pool_of(slow) as pool:
        run = await solve("q", GivenWorkflow(Workflow((Step(0, "a", ()),))), pool)
    assert run.steps[0].status == "error" and "timed out" in run.steps[0].error


# ---------------------------------------------------------------------------------------- budgets


async def test_max_calls_is_never_exceeded():
    async with pool_of(sim("a"), max_calls=2) as pool:
        wf = Workflow(tuple(Step(0, f"s{i}", "all" if i else ()) for i in range(4)))
        run = await solve("q", GivenWorkflow(wf), pool)
    assert run.totals.calls == 2
    assert run.status == "limit" and run.limits_hit == ["max_calls"]
    assert [s.status for s in run.steps] == ["ok", "ok", "skipped", "skipped"]
    assert run.final_answer == run.steps[1].output


async def test_max_tokens_is_never_exceeded():
    register_responder("long")(lambda spec, messages, rng: " ".join(["word"] * 500))
    worker = WorkerSpec(name="a", provider="simulated", options={"world": "long"}, max_tokens=400)
    async with pool_of(worker, max_tokens=300) as pool:
        wf = Workflow(tuple(Step(0, f"s{i}", "all" if i else ()) for i in range(3)))
        run = await solve("a question", GivenWorkflow(wf), pool)
    assert run.totals.usage.total_tokens <= 300
    assert "max_tokens" in run.limits_hit
    assert run.steps[0].usage.output_tokens < 300  # the call's max_tokens was lowered to fit


async def test_max_cost_is_never_exceeded():
    register_responder("long")(lambda spec, messages, rng: " ".join(["word"] * 500))
    pricey = WorkerSpec(name="p", provider="simulated", options={"world": "long"}, max_tokens=500, price_input_per_m=1000.0, price_output_per_m=2000.0)
    async with pool_of(pricey, max_cost_usd=1.0) as pool:
        wf = Workflow(tuple(Step(0, f"s{i}", ()) for i in range(3)))
        run = await solve("q", GivenWorkflow(wf), pool)
    assert 0 < run.totals.usage.cost_usd <= 1.0
    assert "max_cost_usd" in run.limits_hit


# -------------------------------------------------------------------------------------- recursion


class ScriptedConductor(Policy):
    """Returns one scripted workflow per recursion depth (deeper rounds repeat the last one)."""

    name = "scripted"

    def __init__(self, by_depth):
        self.by_depth = by_depth
        self.requests: list[PlanRequest] = []

    async def plan(self, request: PlanRequest) -> Plan:
        self.requests.append(request)
        wf = self.by_depth[min(request.depth, len(self.by_depth) - 1)]
        return Plan(wf, PlanRecord(policy=self.name, raw=wf.render(), workflow=wf.to_dict()))


def recursive_pool(**limits):
    return pool_of(sim("a"), sim("b"), WorkerSpec(name="self", provider="conductor"), **limits)


async def test_recursion_accepts_previous_answer():
    top = Workflow((Step(0, "answer", ()), Step(2, "verify the answer", "all")))
    policy = ScriptedConductor([top, Workflow(())])
    async with recursive_pool() as pool:
        run = await solve("q", policy, pool)
    assert run.status == "ok"
    assert run.final_answer == run.steps[0].output
    nested = run.steps[1].nested
    assert nested is not None and nested.depth == 1 and nested.steps == []
    assert policy.requests[1].previous.answer == run.steps[0].output
    assert run.totals.calls == 1


async def test_recursion_revises_the_answer():
    top = Workflow((Step(0, "answer", ()), Step(2, "verify", "all")))
    revise = Workflow((Step(1, "re-solve carefully", ()),))
    policy = ScriptedConductor([top, revise])
    async with recursive_pool() as pool:
        run = await solve("q", policy, pool)
    nested = run.steps[1].nested
    assert len(nested.steps) == 1 and nested.steps[0].worker_name == "b"
    assert run.final_answer == nested.steps[0].output != run.steps[0].output
    assert run.totals.calls == 2 and run.totals.per_worker.keys() == {"a", "b"}


async def test_recursion_depth_is_capped():
    # Every round asks for another recursive round; the cap stops it at max_depth.
    loop = Workflow((Step(0, "answer", ()), Step(2, "verify", "all")))
    policy = ScriptedConductor([loop])
    async with recursive_pool(max_depth=2) as pool:
        run = await solve("q", policy, pool)
    depths = [r.depth for r in policy.requests]
    assert depths == [0, 1, 2]
    assert "max_depth" in run.limits_hit
    assert run.status in ("ok", "limit") and run.final_answer


# ----------------------------------------------------------------------------------- LM conductor


async def test_lm_conductor_resamples_then_falls_back():
    register_responder("garbage")(lambda spec, messages, rng: "I refuse to write lists.")
    spec = PoolSpec(
        name="t",
        workers=[sim("a"), sim("strong")],
        strongest="strong",
        conductor={"backend": {"name": "c", "provider": "simulated", "options": {"world": "garbage"}}, "max_attempts": 3},
    )
    from openconductor.policies import make_policy

    async with Pool(spec) as pool:
        run = await solve("q", make_policy("conductor"), pool)
    assert run.plan.attempts == 3 and len(run.plan.errors) == 3
    assert all(e.startswith("unparseable") for e in run.plan.errors)
    assert "single worker 'strong'" in run.plan.fallback
    assert run.steps[0].worker_name == "strong" and run.status == "ok"


async def test_lm_conductor_parses_simulated_plan_and_counts_conductor_tokens():
    plan = 'Reasoning: easy.\nmodel_id = [1, 0]\nsubtasks = ["solve", "check"]\naccess_list = [[], ["all"]]'
    register_responder("planner")(lambda spec, messages, rng: plan)
    spec = PoolSpec(name="t", workers=[sim("a"), sim("b")], conductor={"backend": {"name": "c", "provider": "simulated", "options": {"world": "planner"}}})
    from openconductor.policies import make_policy

    async with Pool(spec) as pool:
        run = await solve("q", make_policy("conductor"), pool)
    assert [s.worker_name for s in run.steps] == ["b", "a"]
    assert run.plan.fallback is None and run.plan.attempts == 1
    assert run.totals.conductor_usage.output_tokens > 0


async def test_a_trained_conductor_is_prompted_in_the_style_it_was_trained_with(tmp_path):
    """A checkpoint whose manifest says style = "compact" (and no examples) gets the compact system prompt:
    the pool and the output's shape, under a third of the paper prompt's length."""
    import json

    from openconductor.policies import make_policy
    from openconductor.conductor.prompt import conductor_messages

    seen = []
    plan = 'Reasoning: easy.\nmodel_id = [1]\nsubtasks = ["solve"]\naccess_list = [[]]'
    register_responder("recording-planner")(lambda spec, messages, rng: seen.append(messages) or plan)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    conductor = {"backend": {"name": "conductor:ckpt", "provider": "simulated", "options": {"world": "recording-planner"}}, "checkpoint": str(checkpoint)}
    spec = PoolSpec(name="t", workers=[sim("a"), sim("b")], conductor=conductor)
    for style, examples in (("compact", False), ("paper", True)):
        (checkpoint / "openconductor.json").write_text(json.dumps({"prompt": {"style": style, "examples": examples}}))
        async with Pool(spec) as pool:
            run = await solve("What is 2 + 2?", make_policy("conductor"), pool)
        assert run.steps[0].worker_name == "b"
        expected = conductor_messages("What is 2 + 2?", spec, max_steps=spec.conductor.max_steps, show=spec.conductor.show,
                                      fine_grained=spec.conductor.fine_grained_access, examples=examples, style=style)
        assert seen[-1][0]["content"] == expected[0]["content"]
    compact, paper = (m[0]["content"] for m in seen)
    assert "Model id 1" in compact and "model_id, subtasks, access_list" in compact and "Example 1" not in compact
    assert len(compact) < len(paper) / 3
    with pytest.raises(ValueError, match="unknown conductor prompt style 'short'"):
        conductor_messages("q", spec, style="short")


async def test_conductor_planning_is_reserved_against_the_budget():
    # Issue 9: with max_tokens = 100, a conductor that never wrote a plan spent 945 tokens planning and
    # the run reported no limit. Planning calls are now reserved first, like worker calls.
    register_responder("garbage")(lambda spec, messages, rng: "I refuse to write lists. " * 100)
    spec = PoolSpec(
        name="t", workers=[sim("a")], limits=Limits(max_tokens=100),
        conductor={"backend": {"name": "c", "provider": "simulated", "options": {"world": "garbage"}}, "max_attempts": 3},
    )  # fmt: skip
    from openconductor.policies import make_policy

    async with Pool(spec) as pool:
        run = await solve("q", make_policy("conductor"), pool)
    assert run.totals.usage.total_tokens <= 100
    assert run.status == "limit" and run.limits_hit == ["max_tokens"]
    assert run.plan.errors[0].startswith("max_tokens")


async def test_planning_and_steps_together_stay_within_max_tokens():
    plan = 'Reasoning: two steps.\nmodel_id = [0, 0]\nsubtasks = ["solve", "check"]\naccess_list = [[], ["all"]]'
    register_responder("planner")(lambda spec, messages, rng: plan)
    register_responder("long")(lambda spec, messages, rng: " ".join(["word"] * 500))
    spec = PoolSpec(
        name="t", workers=[sim("a", world="long")], limits=Limits(max_tokens=1500),
        conductor={"backend": {"name": "c", "provider": "simulated", "options": {"world": "planner"}}},
    )  # fmt: skip
    from openconductor.policies import make_policy

    async with Pool(spec) as pool:
        run = await solve("q", make_policy("conductor"), pool)
    assert run.totals.conductor_usage.total_tokens > 0 and run.steps[0].usage.output_tokens > 0
    assert run.totals.usage.total_tokens <= 1500 and "max_tokens" in run.limits_hit
    assert run.totals.calls == 1  # planning is not a worker call; the second step did not fit


@pytest.mark.parametrize("policy,calls", [("single", 1), ("moa", 4), ("self-reflection", 3), ("random", None)])
async def test_baselines_run_on_the_same_executor(policy, calls):
    from openconductor.policies import make_policy

    async with pool_of(sim("a"), sim("b"), sim("c")) as pool:
        run = await solve("q", make_policy(policy, **({"seed": 1} if policy == "random" else {})), pool)
    assert run.status == "ok"
    if calls is not None:
        assert run.totals.calls == calls
    assert 1 <= len(run.steps) <= 5


async def test_events_arrive_in_order():
    events = []
    async with pool_of(sim("a", 0.01)) as pool:
        wf = Workflow((Step(0, "x", ()), Step(0, "y", "all")))
        await solve("q", GivenWorkflow(wf), pool, on_event=lambda e: events.append((e.type, e.step.index if e.step else None)))
    types = [t for t, _ in events]
    assert types[0] == "run_started" and types[1] == "plan" and types[-1] == "run_finished"
    assert types.index("step_finished") < len(types) - 1
    assert ("step_token", 1) in events
    assert events.index(("step_finished", 0)) < events.index(("step_started", 1))


async def test_tokens_of_a_step_arrive_before_it_finishes_and_add_up():
    seen = []
    async with pool_of(sim("a", 0.01)) as pool:
        wf = Workflow((Step(0, "x", ()), Step(0, "y", "all")))
        run = await solve("q", GivenWorkflow(wf), pool, on_event=lambda e: seen.append((e.type, e.step.index if e.step else None, e.text)))
    for i, step in enumerate(run.steps):
        tokens = [t for kind, idx, t in seen if kind == "step_token" and idx == i]
        finished = seen.index(("step_finished", i, ""))
        last_token = max(k for k, (kind, idx, _) in enumerate(seen) if kind == "step_token" and idx == i)
        assert "".join(tokens) == step.output and last_token < finished


async def test_a_retried_step_announces_the_retry_so_viewers_drop_void_tokens():
    flaky = WorkerSpec(name="flaky", provider="simulated", options={"fail_first": 1, "failure": "retryable"}, max_retries=2)
    events = []
    async with pool_of(flaky) as pool:
        run = await solve("q", GivenWorkflow(Workflow((Step(0, "a", ()),))), pool, on_event=lambda e: events.append(e.type))
    assert run.steps[0].status == "ok" and run.steps[0].attempts == 2
    assert events.index("step_retry") < events.index("step_token") < events.index("step_finished")


@register_responder("echo-prompt")
def _echo(spec, messages, rng):
    """Simulated (not a model): a small model that repeats its prompt instead of answering."""
    return messages[0]["content"].split("\n\n")[2]  # e.g. "<Subtask assigned to Agent 0>\n..."


async def test_a_worker_that_echoes_its_prompt_fails_its_step_and_the_answer_falls_back():
    pool = pool_of(sim("a"), sim("echo", world="echo-prompt"))
    async with pool:
        run = await solve("What is 2 + 2?", GivenWorkflow(Workflow((Step(0, "Answer.", ()), Step(1, "Check it.", "all")))), pool)
    assert run.steps[1].status == "error" and run.steps[1].error == "the worker echoed its prompt instead of answering"
    assert run.steps[1].output.startswith("<Subtask assigned to Agent 0>")  # kept for the trace
    assert run.final_answer == run.steps[0].output and run.final_answer.startswith("a answer")


def test_echo_detection_spares_answers_and_short_spans():
    from openconductor.worker_message import PREAMBLE, echoes_prompt

    messages = [{"role": "user", "content": f"{PREAMBLE}\n\n<Overall task>\nCalculate 2 + 3. End with 'Final answer: <answer>'.\n</Overall task>\n\nYour assigned subtask: Solve it."}]
    assert not echoes_prompt("2 + 3 = 5. Final answer: 5", messages)
    assert not echoes_prompt("Calculate 2 + 3", messages)  # a short span is not flagged
    assert echoes_prompt("Calculate 2 + 3. End with 'Final answer: <answer>'.", messages)
    assert echoes_prompt("Sure.\n</Overall task>", messages) and echoes_prompt(PREAMBLE[:70], messages)


def test_repeating_an_earlier_agents_response_is_an_answer_not_an_echo():
    """A verifier that agrees word for word with what it was shown has answered; repeating the question,
    the preamble or an earlier subtask is still an echo."""
    from openconductor.worker_message import echoes_prompt

    answer = "I checked every step of the derivation above. Final answer: 5"
    workflow = Workflow((Step(0, "Solve it and state the final answer with its units.", ()), Step(0, "Check the answer above.", "all")))
    earlier = {0: StepRecord(index=0, worker=0, worker_name="a", subtask="Solve it.", access=[], status="ok", output=answer)}
    messages = build_messages("Calculate 2 + 3 and explain each step carefully.", workflow, 1, earlier)
    assert answer in messages[0]["content"]
    assert not echoes_prompt(answer, messages)
    assert not echoes_prompt("I checked every step of the derivation above.", messages)
    assert echoes_prompt("Calculate 2 + 3 and explain each step carefully.", messages)
    assert echoes_prompt("Solve it and state the final answer with its units.", messages)


# ------------------------------------------------------------------------ plan failures never escape


async def test_a_pool_without_a_conductor_backend_ends_plan_failed_not_raising():
    from openconductor.policies import make_policy

    async with pool_of(sim("a")) as pool:
        run = await solve("q", make_policy("conductor"), pool)
    assert run.status == "plan_failed" and run.steps == []
    assert "declares no conductor backend" in run.error and run.plan.errors[0].startswith("policy_error: ")


async def test_a_router_trained_on_other_workers_ends_plan_failed_not_raising():
    np = pytest.importorskip("numpy")
    from openconductor.policies.router import LearnedRouter, RouterModel

    model = RouterModel(["elsewhere"], np.zeros((1, 384)), np.zeros(1), train_questions=1, train_accuracy={"elsewhere": 1.0})
    async with pool_of(sim("a")) as pool:
        run = await solve("q", LearnedRouter(model), pool)
    assert run.status == "plan_failed" and "trained on ['single:elsewhere']; pool 'test' has none of them" in run.error


async def test_a_recursive_round_whose_policy_raises_keeps_the_answer():
    class Planner(Policy):
        name = "planner"

        async def plan(self, request):
            if request.previous is not None:
                raise ValueError("cannot verify")
            wf = Workflow((Step(0, "solve", ()), Step(1, "verify", "all")))
            return Plan(wf, PlanRecord(policy=self.name, workflow=wf.to_dict()))

    async with pool_of(sim("a"), WorkerSpec(name="me", provider="conductor")) as pool:
        run = await solve("q", Planner(), pool)
    assert run.status == "ok" and run.steps[1].nested.status == "plan_failed"
    assert run.final_answer == run.steps[0].output


# -------------------------------------------------------------------------------------- cancellation


async def test_a_cancelled_run_is_closed_as_cancelled_with_its_finished_steps(tmp_path):
    from openconductor.traces import TraceStore

    store = TraceStore(tmp_path / "t.sqlite3")
    wf = Workflow((Step(0, "fast", ()), Step(1, "slow", (0,)), Step(0, "never", (1,))))
    first_done = asyncio.Event()

    def on_event(event):
        store.handler()(event)
        if event.type == "step_finished" and event.step.index == 0:
            first_done.set()

    async with pool_of(sim("fast"), sim("slow", latency=30.0)) as pool:
        task = asyncio.create_task(solve("q", GivenWorkflow(wf), pool, on_event=on_event))
        await first_done.wait()
        await asyncio.sleep(0.05)  # step 1 is now running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    saved = store.get(store.list(1)[0]["id"])
    assert saved.status == "cancelled" and store.list(1)[0]["status"] == "cancelled"
    assert [s.status for s in saved.steps] == ["ok", "skipped", "skipped"]
    assert saved.steps[0].output and saved.final_answer == saved.steps[0].output
    assert "cancelled" in saved.steps[1].error and saved.totals.calls == 1


async def test_an_in_process_model_that_timed_out_is_not_retried():
    from openconductor.providers.local_gguf import LocalGGUFProvider
    from openconductor.providers.transformers_local import TransformersProvider

    assert LocalGGUFProvider.retry_timeouts is False and TransformersProvider.retry_timeouts is False
    slow = WorkerSpec(name="slow", provider="simulated", options={"latency_s": 1.0}, timeout_s=0.05, max_retries=2)
    async with pool_of(slow) as pool:
        worker = pool[0]
        with pytest.raises(WorkerCallError, match=r"after 3 attempt\(s\): timed out"):
            await worker.call([{"role": "user", "content": "q"}])  # a remote-like provider: retried
        worker.provider.retry_timeouts = False  # as the in-process providers declare
        with pytest.raises(WorkerCallError, match=r"after 1 attempt\(s\): timed out .*in-process model is not retried"):
            await worker.call([{"role": "user", "content": "q"}])
