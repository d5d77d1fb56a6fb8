"""Running the evaluation: every (task, policy, question, repeat) through ``solve`` on one pool, graded.

``evaluate`` is the one loop: it runs the jobs on an open pool and returns their records in job order.
``run_eval`` (``conductor eval``) puts it on an output folder: every record becomes one line of
``results.jsonl`` the moment it finishes, with the id of its Run in the trace store; a re-run skips the
lines already there, so an interrupted eval resumes and a finished one just re-renders its report.
``setup.json`` fingerprints what the results were made with (``setup.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Iterable, Optional, Protocol

from ..budget import Limits
from ..executor import solve
from ..policies import Policy
from ..pool import Pool, PoolSpec
from ..records import Run
from ..tasks import Question, Task, check_graders
from .records import RESULTS_FILE, EvalError, EvalRecord, drop_partial_line, load_records, question_domain, question_seed, record_from_run
from .setup import SETUP_FILE, check_setup, eval_setup

ProgressFn = Callable[[EvalRecord], None]
Key = tuple[str, str, str, int]


class RunStore(Protocol):
    def save(self, run: Run) -> object: ...


async def evaluate(
    tasks: list[Task],
    policies: list[tuple[str, Policy]],
    pool: Pool,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    seed: int = 0,
    seed_per_question: bool = True,
    limits: Optional[Limits] = None,
    stream_tokens: bool = True,
    skip: Iterable[Key] = (),
    store: Optional[RunStore] = None,
    on_record: Optional[ProgressFn] = None,
) -> list[EvalRecord]:
    """Run every (task, policy, question, repeat) whose key is not in ``skip`` on ``pool``; return the
    records in job order (task, repeat, question, policy).

    Each run's sampling seed is ``question_seed(seed, ...)`` (the same for every policy); with
    ``seed_per_question=False`` every run gets ``seed`` itself. A policy sees the question's domain
    (``PlanRequest.domain``), so per-domain baselines (a lookup table, the oracle router) can key on it.
    Raises GraderUnavailable before any run if a question's grader kind is not registered.
    """
    if repeats < 1 or concurrency < 1:
        raise EvalError("repeats and concurrency must be >= 1")
    check_graders([q for t in tasks for q in t.questions])
    done = set(skip)
    jobs = [
        (task, q, label, policy, r)
        for task in tasks
        for r in range(repeats)
        for q in task.questions
        for label, policy in policies
        if (task.name, label, q.id, r) not in done
    ]
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, q: Question, label: str, policy: Policy, repeat: int) -> EvalRecord:
        s = question_seed(seed, task.name, q.id, repeat) if seed_per_question else seed
        async with gate:
            run = await solve(
                task.text(q), policy, pool, limits=limits, seed=s, stream_tokens=stream_tokens, domain=question_domain(task, q),
                metadata={"eval": {"task": task.name, "question_id": q.id, "policy": label, "repeat": repeat}},
            )
        # agrade keeps the event loop free: code runs in the sandbox, the rest in the grading process.
        record = await record_from_run(task, q, label, repeat, s, run)
        if store is not None:
            store.save(run)
        if on_record:
            on_record(record)
        return record

    return list(await asyncio.gather(*(one(*job) for job in jobs)))


async def run_eval(
    tasks: list[Task],
    policies: list[tuple[str, Policy]],
    spec: PoolSpec,
    out: Path,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    seed: int = 0,
    limits: Optional[Limits] = None,
    cache=None,
    store: Optional[RunStore] = None,
    on_record: Optional[ProgressFn] = None,
    on_start: Optional[Callable[[int, int], None]] = None,
) -> list[EvalRecord]:
    """``evaluate`` into the folder ``out``: run what is not yet in ``out/results.jsonl``; return all records.

    Raises EvalError, before any run, if ``out`` holds results of another setup (``check_setup``).
    """
    if repeats < 1 or concurrency < 1:
        raise EvalError("repeats and concurrency must be >= 1")
    check_graders([q for t in tasks for q in t.questions])
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    drop_partial_line(path)
    earlier = load_records(path)
    setup = check_setup(out, eval_setup(tasks, policies, spec, seed=seed, limits=limits or spec.limits), earlier)
    (out / SETUP_FILE).write_text(setup.model_dump_json(indent=1), encoding="utf-8")
    done = {r.key: r for r in earlier}
    wanted = {(t.name, label, q.id, r) for t in tasks for q in t.questions for label, _ in policies for r in range(repeats)}
    if on_start:
        on_start(len(wanted - set(done)), len(wanted & set(done)))

    def written(record: EvalRecord) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(record.model_dump_json() + "\n")
        if on_record:
            on_record(record)

    async with Pool(spec, cache=cache) as pool:
        fresh = await evaluate(tasks, policies, pool, repeats=repeats, concurrency=concurrency, seed=seed, limits=limits,
                               skip=done, store=store, on_record=written)
    return [r for r in list(done.values()) + fresh if r.key in wanted]
