"""Planning latency of the LM conductor on the real offline pool, variants side by side.

For each question, every variant plans once (interleaved, so machine load hits all alike); prints per
variant the median wall time and CPU seconds of a plan, the plan's output tokens, and whether it parsed.

    PYTHONPATH=src nice -n 19 python benchmarks/bench_planning.py --questions 6
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from openconductor.policies import make_policy
from openconductor.policies.base import PlanRequest
from openconductor.pool import Pool, WorkerSpec, load_default_pool
from openconductor.tasks import load_task

BACKENDS = {"smollm2": "smollm2-135m-instruct", "qwen": "qwen2.5-coder-0.5b-instruct"}


def variant_spec(base, name: str):
    """``<backend>-t<threads>[-shared]``, e.g. smollm2-t1 or qwen-t2-shared: the default pool with that
    conductor backend, on its own llama.cpp server or (-shared) on the server of the pool's worker of
    the same model, whose calls then run between the plans (as in an eval)."""
    shared = name.endswith("-shared")
    model, _, threads = name.removesuffix("-shared").rpartition("-t")
    backend = WorkerSpec(
        name=f"conductor-{name}", provider="local_gguf", model=BACKENDS[model], max_tokens=base.conductor.max_tokens,
        concurrency=2, timeout_s=600, options={"threads": int(threads), "shared": shared},
    )
    return base.model_copy(update={"conductor": base.conductor.model_copy(update={"worker": None, "backend": backend})})


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--variant", action="append", default=None)
    args = parser.parse_args()
    variants = args.variant or ["smollm2-t1", "smollm2-t1-shared", "smollm2-t2-shared", "qwen-t1"]
    base = load_default_pool()
    tasks = ["basic_arithmetic", "gsm_symbolic", "rg:letter_counting", "rg:simple_equations", "rg:syllogism"]
    questions = []
    for i in range(args.questions):
        task = load_task(tasks[i % len(tasks)], limit=i // len(tasks) + 1, seed=777)
        questions.append(task.text(task.questions[-1]))
    pools = {v: Pool(variant_spec(base, v)) for v in variants}
    policy = make_policy("conductor")
    rows: dict[str, list[tuple[float, float, int, bool]]] = {v: [] for v in variants}
    for n, question in enumerate(questions):
        for v, pool in pools.items():
            # A worker call on the same model between plans, as in an eval (not timed): it evicts a
            # shared slot's cached conductor prompt, and leaves an own server's alone.
            worker = next(w for w in pool.workers if w.spec.model == pool.conductor_backend().spec.model)
            await worker.call([{"role": "user", "content": question}], max_tokens=8, seed=n)
            cpu, wall = time.process_time(), time.perf_counter()
            plan = await policy.plan(PlanRequest(question, pool, max_steps=base.conductor.max_steps, seed=n))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows[v].append((wall, cpu, plan.record.usage.output_tokens, plan.record.fallback is None))
            print(f"q{n} {v}: {wall:.2f} s wall, {cpu:.2f} CPU s, {plan.record.usage.output_tokens} tokens, "
                  f"parsed={plan.record.fallback is None}, load {os.getloadavg()[0]:.1f}", flush=True)
    print("\n| variant | plans | median wall (s) | median CPU (s) | median output tokens | parsed |")
    print("|---|---|---|---|---|---|")
    for v, rs in rows.items():
        print(f"| {v} | {len(rs)} | {statistics.median(r[0] for r in rs):.2f} | {statistics.median(r[1] for r in rs):.2f} | "
              f"{statistics.median(r[2] for r in rs):.0f} | {sum(r[3] for r in rs)}/{len(rs)} |")
    for pool in pools.values():
        await pool.aclose()


if __name__ == "__main__":
    asyncio.run(main())
