"""Run a question: the policy plans a workflow, the executor runs its steps on the pool.

``solve`` is the top: question → ``policy.plan`` → ``execute`` → ``Run``. ``execute`` schedules the
steps as a DAG: a step waits only for the steps its access list lets it see, so independent steps run
concurrently. A step whose worker is the conductor itself (provider ``conductor``) runs a nested,
recursive round that sees the previous answer and may accept it (three empty lists) or revise it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import worker_message
from .conductor.identity import identity_dict
from .answer_format import AnswerFormat, AnswerFormatError, check_json, off_the_loop
from .budget import Budget, Limits, LimitReached
from .evidence import does_worse, step_verdict
from .policies.base import Plan, PlanRequest, Policy, Previous
from .pool import TOOL_PROVIDERS, Pool, WorkerCallError
from .records import Completion, PlanRecord, Run, StepRecord, Totals, Usage
from .run_events import Event, EventHandler, _emit, _emit_soon
from .reply import answer_text as clean_answer  # the final answer is the reply as a user sees it
from .workflow import Step, Workflow
from .workflow.wordings import ANSWER_SUBTASK, REVIEW_SUBTASK

# --------------------------------------------------------------------------------------------- context

def build_messages(question: str, workflow: Workflow, index: int, outputs: dict[int, StepRecord]) -> list[dict[str, str]]:
    """The worker's one user message (``worker_message.render``): preamble, overall task, visible earlier
    steps, its subtask."""
    step = workflow.steps[index]
    earlier = []
    for j in step.visible(index):
        agent, record = workflow.steps[j].worker, outputs[j]
        response = record.output if record.status == "ok" else f"(Agent {agent} failed to respond: {record.error})"
        earlier.append((agent, workflow.steps[j].subtask, response))
    return [{"role": "user", "content": worker_message.render(question, earlier, step.subtask)}]


def final_answer(steps: list[StepRecord]) -> str:
    """The last step's output; if it failed or was skipped, the last non-empty output before it."""
    for record in reversed(steps):
        answer = clean_answer(record.output) if record.status == "ok" else ""
        if answer:
            return answer
    return ""


# -------------------------------------------------------------------------------------------- running


@dataclass
class Context:
    """What every round of one request shares."""

    question: str
    pool: Pool
    policy: Policy
    budget: Budget
    on_event: Optional[EventHandler] = None
    limits_hit: list[str] = field(default_factory=list)
    seed: Optional[int] = None
    stream_tokens: bool = True  # ask providers for token-by-token output (costly on HTTP backends)
    answer: Optional[AnswerFormat] = None  # what the caller asks of the final answer (its step only)
    max_output_tokens: Optional[int] = None  # the caller's cap on each worker call's output
    domain: Optional[str] = None  # the question's domain and kind, where the caller knows them (PlanRequest)
    kind: Optional[str] = None
    request_text: Optional[str] = None  # the current request alone, where the question renders a conversation (PlanRequest)
    # The caller's own messages (the server's request), sent as they are by a passthrough policy (policies/passthrough.py).
    messages: Optional[list[dict]] = None

    @property
    def passthrough(self) -> bool:
        return bool(getattr(self.policy, "passthrough", False))

    def hit(self, limit: str) -> None:
        if limit not in self.limits_hit:
            self.limits_hit.append(limit)


async def solve(
    question: str,
    policy: Policy,
    pool: Pool,
    *,
    limits: Optional[Limits] = None,
    on_event: Optional[EventHandler] = None,
    seed: Optional[int] = None,
    metadata: Optional[dict] = None,
    stream_tokens: bool = True,
    answer: Optional[AnswerFormat] = None,
    max_output_tokens: Optional[int] = None,
    domain: Optional[str] = None,
    kind: Optional[str] = None,
    request_text: Optional[str] = None,
    messages: Optional[list[dict]] = None,
) -> Run:
    """Plan and run one question end to end. Never raises for worker or plan failures: the Run says.

    ``domain``, ``kind``: the question's domain and kind (its task) where the caller knows them (an eval
    task), for policies that key on them (``PlanRequest``). ``request_text``: the user's current request alone,
    where ``question`` renders a whole conversation (the server), for a conductor's familiarity test.
    ``messages``: the caller's own messages, which a passthrough policy sends to its worker untouched (else the question alone).

    ``answer`` (tools, JSON format, stop, sampling) goes to the final step's call only;
    ``max_output_tokens`` caps every worker call's output, so the final answer's too.
    Cancelled (Ctrl-C, a client that went away), the run ends ``cancelled`` with the steps that had
    finished, ``run_finished`` is emitted (so the trace store keeps it), and the cancellation goes on.
    """
    start = time.perf_counter()
    ctx = Context(question, pool, policy, Budget(limits or pool.spec.limits), on_event, seed=seed, stream_tokens=stream_tokens,
                  answer=answer, max_output_tokens=max_output_tokens, domain=domain, kind=kind,
                  request_text=request_text, messages=messages)
    # Which conductor planned (a checkpoint and its digest, a prompted worker, or a baseline): the policy's name cannot say.
    run = Run(question=question, policy=policy.name, pool=pool.spec.name, workers=pool.names,
              metadata={**(metadata or {}), "conductor": identity_dict(policy, pool)}, warnings=list(pool.warnings))
    await _emit(on_event, Event("run_started", run))
    try:
        plan = await _plan(ctx, PlanRequest(question, pool, max_steps=pool.spec.conductor.max_steps, seed=seed, budget=ctx.budget,
                                         domain=domain, kind=kind, request_text=request_text))
        await _run_round(ctx, run, plan)
    except asyncio.CancelledError:
        _cancelled(ctx, run)
        run.totals.wall_s = time.perf_counter() - start
        await asyncio.shield(_emit(on_event, Event("run_finished", run)))
        raise
    run.totals.wall_s = time.perf_counter() - start
    await _emit(on_event, Event("run_finished", run))
    return run


async def _plan(ctx: Context, request: PlanRequest) -> Plan:
    """The policy's plan (the policy reserves its model calls on ``request.budget``). A policy that cannot plan raises ValueError (a pool
    without a conductor backend, a router without its model, an unknown worker): that becomes a
    failed plan, as an unparseable one does, so the run ends ``plan_failed`` and says why."""
    try:
        plan = await ctx.policy.plan(request)
    except ValueError as exc:
        plan = Plan(None, PlanRecord(policy=ctx.policy.name, errors=[f"policy_error: {exc}"]))
    return plan


def _cancelled(ctx: Context, run: Run) -> None:
    """Close a run that was cancelled: finished steps keep their output, unfinished ones say why."""
    run.status, run.error = "cancelled", "cancelled before the run finished"
    for step in run.steps:
        if step.nested is not None and step.nested.status == "running":
            _cancelled(ctx, step.nested)
        if step.status in ("pending", "running"):
            step.status, step.error = "skipped", "cancelled before this step finished"
    run.final_answer = final_answer(run.steps)
    run.limits_hit = list(ctx.limits_hit)
    run.totals = _totals(run, 0.0)


async def _run_round(ctx: Context, run: Run, plan: Plan, final: bool = True) -> None:
    """``final``: this round writes the run's answer (the top round, or a recursion in its last step)."""
    run.plan = plan.record
    if plan.workflow is None:
        run.status = "limit" if ctx.budget.hits else "plan_failed"
        run.error = "; ".join(plan.record.errors) or "the policy returned no workflow"
        await _finish(ctx, run)
        return
    workflow = plan.workflow
    if final and _wants_format(ctx) and _ends_in_tool(ctx, workflow):
        workflow = _with_answer_step(ctx, workflow)  # a tool cannot answer in the caller's format; a model can
    run.steps = [_record(ctx, workflow, i) for i in range(len(workflow))]
    if len(workflow) > len(plan.workflow):
        run.steps[-1].appended = "the plan ended in a tool step; a model gives the answer in the requested format"
    await _emit(ctx.on_event, Event("plan", run))
    await execute(ctx, run, workflow, final)
    if _ends_in_tool(ctx, workflow) and not _tool_answered(run.steps[-1]) and not (ctx.limits_hit or ctx.budget.hits):
        await _answer_after_tool(ctx, run, workflow, final)
    if plan.review and not (ctx.limits_hit or ctx.budget.hits):
        await _review(ctx, run, final)
    await _finish(ctx, run)


def _record(ctx: Context, workflow: Workflow, i: int) -> StepRecord:
    s = workflow.steps[i]
    return StepRecord(index=i, worker=s.worker, worker_name=ctx.pool[s.worker].name, subtask=s.subtask,
                      access=s.access if s.access == "all" else list(s.access), visible=list(s.visible(i)))


# -------------------------------------------------------------------------- plans that end in a tool

def _wants_format(ctx: Context) -> bool:
    return ctx.answer is not None and bool(ctx.answer.features() & {"tools", "json_schema"})


def _ends_in_tool(ctx: Context, workflow: Workflow) -> bool:
    return bool(workflow.steps) and ctx.pool[workflow.steps[-1].worker].spec.provider in TOOL_PROVIDERS


def _tool_answered(record: StepRecord) -> bool:
    """A tool step's output can stand as the answer: it ran, and its tool says its result is one (a python
    program that failed or printed nothing is not; tools report it as ``detail["status"]``)."""
    return record.status == "ok" and record.detail.get("status", "ok") == "ok"


def _with_answer_step(ctx: Context, workflow: Workflow) -> Workflow:
    """The workflow with a last step in which the pool's answering model sees every step and answers."""
    answerer = ctx.pool.answering_worker()
    if answerer is None:
        return workflow
    return Workflow(workflow.steps + (Step(answerer, ANSWER_SUBTASK, "all"),), reasoning=workflow.reasoning)


async def _answer_after_tool(ctx: Context, run: Run, workflow: Workflow, final: bool) -> None:
    """A plan that ended in a tool step without an answer (it failed, its program failed or printed nothing,
    or the tool cannot run here): a model step follows, so the run ends with an answer a model could give."""
    extended = _with_answer_step(ctx, workflow)
    if len(extended) == len(workflow):
        return
    i = len(workflow)
    record = _record(ctx, extended, i)
    record.appended = f"the plan ended in a tool step ({run.steps[-1].worker_name}) without an answer; a model gives it"
    run.steps.append(record)
    try:
        await _run_step(ctx, run, extended, i, {r.index: r for r in run.steps}, final)
    except LimitReached as exc:
        ctx.hit(exc.limit)
        record.status, record.error = "skipped", f"limit reached: {exc}"
    finally:
        await _emit(ctx.on_event, Event("step_finished", run, record))


async def _finish(ctx: Context, run: Run) -> None:
    for limit in ctx.budget.hits:  # also those hit while planning
        ctx.hit(limit)
    last = run.steps[-1] if run.steps else None
    if last is not None and last.status == "ok" and last.tool_calls:  # the answer is a request to run tools
        run.final_answer, run.tool_calls = clean_answer(last.output), list(last.tool_calls)
    elif run.depth == 0 and ctx.answer is not None and ctx.answer.features() & {"tools", "json_schema"}:
        await _formatted_answer(ctx.answer, run, last)
    else:
        run.final_answer = final_answer(run.steps)
    run.limits_hit = list(ctx.limits_hit)
    run.totals = _totals(run, run.totals.wall_s)
    if run.status == "running":
        last = run.steps[-1] if run.steps else None
        if ctx.limits_hit and (last is None or last.status != "ok"):
            run.status = "limit"
        elif last is not None and last.status == "ok":
            run.status = "ok"
        else:
            run.status = "error"
            run.error = run.error or (last.error if last else "no steps ran")


async def _formatted_answer(answer: AnswerFormat, run: Run, last: Optional[StepRecord]) -> None:
    """With tools or a JSON format asked for, only the final step's own answer counts (earlier steps
    wrote for the team, not in that format); a JSON answer that does not match fails the step."""
    text = clean_answer(last.output) if last is not None and last.status == "ok" else ""
    if text and answer.json_format is not None and last is not None and last.finish_reason != "length":
        try:
            text = await off_the_loop(check_json, text, answer.json_format)
        except AnswerFormatError as exc:  # e.g. a recursive last round that kept an earlier, unformatted answer
            last.status, last.error, last.error_code = "error", str(exc), "invalid_answer_format"
            text = ""
    run.final_answer = text  # once, checked: a cancellation while the check runs leaves no unchecked answer


def _totals(run: Run, wall_s: float) -> Totals:
    # Each sum is made once (Usage.total), and a worker called once keeps its step's Usage: a run's totals are
    # built at its end, on the critical path, and Usage objects are never changed in place.
    calls, worker, conductor = 0, [], [run.plan.usage] if run.plan else []
    per_worker: dict[str, list[Usage]] = {}
    for step in run.steps:
        if step.nested is not None:
            inner = step.nested.totals
            calls += inner.calls
            worker.append(inner.worker_usage)
            conductor.append(inner.conductor_usage)
            for name, usage in inner.per_worker.items():
                per_worker.setdefault(name, []).append(usage)
        elif step.attempts:
            calls += 1
            worker.append(step.usage)
            per_worker.setdefault(step.worker_name, []).append(step.usage)
    return Totals(calls=calls, worker_usage=Usage.total(worker), conductor_usage=Usage.total(conductor), wall_s=wall_s,
                  per_worker={name: usages[0] if len(usages) == 1 else Usage.total(usages) for name, usages in per_worker.items()})


async def execute(ctx: Context, run: Run, workflow: Workflow, final: bool = True) -> None:
    """Run every step as soon as the steps it can see are done."""
    done: dict[int, asyncio.Future] = {i: asyncio.get_running_loop().create_future() for i in range(len(workflow))}
    records = {r.index: r for r in run.steps}
    stopped = asyncio.Event()  # a limit was hit: steps not yet started are skipped

    async def run_step(i: int) -> None:
        record = records[i]
        try:
            for j in workflow.steps[i].visible(i):
                await done[j]
            if stopped.is_set():
                record.status, record.error = "skipped", "a request limit was reached before this step"
                return
            await _run_step(ctx, run, workflow, i, records, final and i == len(workflow) - 1)
        except LimitReached as exc:
            ctx.hit(exc.limit)
            stopped.set()
            record.status, record.error = "skipped", f"limit reached: {exc}"
        finally:
            if not done[i].done():  # a cancelled waiter cancels the future it awaited
                done[i].set_result(None)
            await _emit(ctx.on_event, Event("step_finished", run, record))

    await asyncio.gather(*(run_step(i) for i in range(len(workflow))))


def _step_messages(ctx: Context, workflow: Workflow, i: int, records: dict[int, StepRecord]) -> list[dict]:
    """What step ``i``'s worker is sent: the agent template, or for a passthrough policy (a transparent endpoint)
    the caller's messages untouched."""
    if ctx.passthrough:
        return list(ctx.messages or [{"role": "user", "content": ctx.question}])
    return build_messages(ctx.question, workflow, i, records)


# Below this many characters (prompt and reply) the echo check takes microseconds, less than the hop to a thread
# (measured: the hop on every step tripled the executor's overhead on 8 parallel 50 ms steps).
ECHO_INLINE_CHARS = 20_000


async def _echo_checked(ctx: Context, provider: str, completion: Completion, messages: list[dict]) -> bool:
    """``_echoed``; a long prompt is checked on the reply-check thread, so the loop gets the GIL back every switch
    interval (6,000 messages held it 25 ms a step; issue 70)."""
    size = len(completion.text) + sum(len(str(m.get("content") or "")) for m in messages)
    if size < ECHO_INLINE_CHARS:
        return _echoed(ctx, provider, completion, messages)
    return await off_the_loop(_echoed, ctx, provider, completion, messages)


def _echoed(ctx: Context, provider: str, completion: Completion, messages: list[dict]) -> bool:
    """Whether a model's reply repeats the agent template it was sent instead of answering (a passthrough
    worker was sent the caller's own messages: repeating them may be what the caller asked for)."""
    if provider in TOOL_PROVIDERS or completion.tool_calls or ctx.passthrough:
        return False
    return worker_message.echoes_prompt(completion.text, messages)


def _step_callbacks(ctx: Context, run: Run, record: StepRecord) -> tuple[Optional[Callable[[str], None]], Optional[Callable[[int, str], None]]]:
    """A model step's ``on_token`` and ``on_retry``: each emits its event on this loop, whichever thread calls it
    (None without a handler: nothing would receive them)."""
    if ctx.on_event is None:
        return None, None
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def on_token(text: str) -> None:
        # In-process llama.cpp calls this from a worker thread; hand it to the loop. Callbacks run in
        # FIFO order, so every token is delivered before the call's own result (and step_finished).
        event = Event("step_token", run, record, text)
        if threading.get_ident() == loop_thread:
            _emit_soon(ctx.on_event, event)
        else:
            loop.call_soon_threadsafe(_emit_soon, ctx.on_event, event)

    def on_retry(attempt: int, error: str) -> None:
        # Tokens already streamed by the failed attempt are void: viewers reset the step's text.
        _emit_soon(ctx.on_event, Event("step_retry", run, record, error))

    return on_token, on_retry


async def _run_step(ctx: Context, run: Run, workflow: Workflow, i: int, records: dict[int, StepRecord], final: bool = False) -> None:
    record = records[i]
    worker = ctx.pool[workflow.steps[i].worker]
    record.messages = _step_messages(ctx, workflow, i, records)
    record.status, record.started_at = "running", time.time()
    await _emit(ctx.on_event, Event("step_started", run, record))
    if worker.spec.provider == "conductor":
        await _recurse(ctx, run, record, final)
        record.finished_at = time.time()
        record.latency_s = record.finished_at - record.started_at
        return

    spec = worker.spec
    if worker.name in ctx.pool.unavailable:
        record.status, record.error_code = "error", "worker_unavailable"
        # Short: later steps read it in their context; why and the fix are in the run's warnings.
        record.error = f"worker {worker.name!r} cannot run on this machine (the run's warnings say why and how to fix it)"
        record.finished_at = time.time()
        return
    wanted = spec.max_tokens if ctx.max_output_tokens is None else min(spec.max_tokens, ctx.max_output_tokens)
    max_tokens, reserved_tokens, reserved_cost = ctx.budget.reserve(
        record.messages, wanted, spec.price_input_per_m, spec.price_output_per_m
    )
    on_token, on_retry = _step_callbacks(ctx, run, record)
    usage = None
    try:
        completion, attempts = await worker.call(
            record.messages,
            max_tokens=max_tokens,
            # A tool's output arrives whole, and may yet be followed by a model's answer: it is not streamed.
            on_token=on_token if ctx.on_event and ctx.stream_tokens and spec.provider not in TOOL_PROVIDERS else None,
            on_retry=on_retry if ctx.on_event else None,
            seed=ctx.seed,
            answer=ctx.answer if final else None,
        )
        usage = completion.usage
        record.output, record.usage, record.attempts = completion.text, completion.usage, attempts
        record.tool_calls, record.finish_reason = completion.tool_calls, completion.finish_reason
        record.latency_s, record.status, record.detail = completion.latency_s, "ok", completion.detail
        record.cached = completion.cached
        if await _echo_checked(ctx, spec.provider, completion, record.messages):
            # Not an answer: the step fails, so the final answer falls back to the last real output.
            record.status, record.error = "error", "the worker echoed its prompt instead of answering"
    except WorkerCallError as exc:
        record.status, record.error, record.attempts, record.error_code = "error", str(exc), exc.attempts, exc.code
    finally:
        ctx.budget.settle(reserved_tokens, reserved_cost, usage)
        record.finished_at = time.time()
    # Evidence for a later round (evidence.py): read from the question and this step's own output only.
    record.verdict = await step_verdict(ctx.question, record, [records[j] for j in record.visible if j in records],
                                        spec.provider in TOOL_PROVIDERS)


async def _recurse(ctx: Context, run: Run, record: StepRecord, final: bool = False) -> None:
    """A conductor step: plan a nested round that sees the answer so far; accept or revise it."""
    visible = [s for s in run.steps if s.index in record.visible]
    previous_answer = final_answer(visible)
    try:
        ctx.budget.check_depth(run.depth + 1)
    except LimitReached as exc:
        ctx.hit(exc.limit)
        record.status, record.output = "ok", previous_answer
        record.error = f"not recursing: {exc}; the previous answer stands"
        return
    nested = Run(question=ctx.question, policy=ctx.policy.name, pool=run.pool, workers=run.workers, depth=run.depth + 1)
    record.nested = nested
    plan = await _plan(
        ctx,
        PlanRequest(
            ctx.question,
            ctx.pool,
            max_steps=ctx.pool.spec.conductor.max_steps,
            previous=Previous(answer=previous_answer, steps=visible, instruction=record.subtask),
            depth=run.depth + 1,
            seed=ctx.seed,
            budget=ctx.budget,
            domain=ctx.domain,
            kind=ctx.kind,
            request_text=ctx.request_text,
        ),
    )
    if plan.workflow is not None and plan.workflow.is_accept:
        nested.plan, nested.status, nested.final_answer = plan.record, "ok", previous_answer
        nested.totals = _totals(nested, 0.0)
        record.status, record.output = "ok", previous_answer
        return
    await _run_round(ctx, nested, plan, final)
    record.usage = nested.totals.usage
    if nested.status == "ok" and nested.tool_calls:
        record.status, record.output, record.tool_calls = "ok", nested.final_answer, list(nested.tool_calls)
    elif plan.keep_better and does_worse(nested.steps, visible):
        record.status, record.output = "ok", previous_answer
        record.error = "the revision did worse on the question's examples; the previous answer stands"
    elif nested.status == "ok" or nested.final_answer:
        record.status, record.output = "ok", nested.final_answer or previous_answer
    else:
        # A failed revision keeps the answer it was asked to check.
        record.status, record.output = "ok", previous_answer
        record.error = f"nested round ended with {nested.status}: {nested.error}"


def review_previous(steps: list[StepRecord]) -> Previous:
    """What a review round after ``steps`` is shown (``_review``, then ``_recurse``): training builds its recursive
    rounds' prompts with this, so they equal the runtime's (the round's answer, its steps' verdicts, the instruction)."""
    return Previous(answer=final_answer(steps), steps=list(steps), instruction=REVIEW_SUBTASK)


async def _review(ctx: Context, run: Run, final: bool) -> None:
    """A plan that asked for review (``Plan.review``): a conductor step is appended that sees the whole round,
    and runs a recursive round as ``_recurse`` does (depth and budget limits apply). Its worker id is -1: the
    conductor is not one of the pool's workers here."""
    record = StepRecord(index=len(run.steps), worker=-1, worker_name="conductor", subtask=REVIEW_SUBTASK, access="all",
                        visible=[s.index for s in run.steps], appended="the policy asked to review its round")
    run.steps.append(record)
    record.status, record.started_at = "running", time.time()
    await _emit(ctx.on_event, Event("step_started", run, record))
    try:
        await _recurse(ctx, run, record, final)
    except LimitReached as exc:
        ctx.hit(exc.limit)
        record.status, record.error = "skipped", f"limit reached: {exc}"
    finally:
        record.finished_at = time.time()
        record.latency_s = record.finished_at - record.started_at
        await _emit(ctx.on_event, Event("step_finished", run, record))
