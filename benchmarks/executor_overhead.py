"""Executor overhead, measured with simulated workers of fixed latency (no model involved).

Prints, for a sequential chain and for fan-outs:
  overhead = (wall time - measured critical path of worker calls), the executor's own time outside
             worker calls, as a fraction of the measured critical path (strict: what a user waits
             for) and of the total worker time (the sum of all calls' durations);
  fan-out ratio = fan-out wall time / nominal critical path (2 x latency; 1.0 = perfect concurrency).

    python benchmarks/executor_overhead.py [--runs 50] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from openconductor.executor import solve
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.budget import Limits
from openconductor.workflow import Step, Workflow


def pool_spec(n: int, latency: float) -> PoolSpec:
    workers = [WorkerSpec(name=f"sim{i}", provider="simulated", options={"latency_s": latency}, concurrency=64) for i in range(n)]
    return PoolSpec(name="bench-simulated", workers=workers, limits=Limits(max_calls=100))


def critical_path(run) -> float:
    """Longest path through the DAG, using each worker call's measured duration."""
    finish: dict[int, float] = {}
    for step in run.steps:
        finish[step.index] = max((finish[j] for j in step.visible), default=0.0) + step.latency_s
    return max(finish.values())


async def measure(workflow: Workflow, latency: float, runs: int, n_workers: int) -> tuple[list[float], list[float], list[float]]:
    """(wall times, measured critical paths, total worker times) of ``runs`` solves of ``workflow``; prints the
    process CPU per run (the executor's and the simulated workers' own work: the load of the box adds none)."""
    walls, paths, work = [], [], []
    async with Pool(pool_spec(n_workers, latency)) as pool:
        policy = GivenWorkflow(workflow)
        await solve("warm-up", policy, pool)
        cpu = time.process_time()
        for i in range(runs):
            start = time.perf_counter()
            run = await solve(f"question {i}", policy, pool)
            walls.append(time.perf_counter() - start)
            paths.append(critical_path(run))
            work.append(sum(step.latency_s for step in run.steps))
            assert run.status == "ok", run.error
    print(f"  CPU {(time.process_time() - cpu) / runs * 1000:.2f} ms per run", end=" · ")
    return walls, paths, work


def report(name: str, walls: list[float], paths: list[float], work: list[float], nominal: float) -> tuple[float, float, float]:
    overhead = statistics.median((w - p) / p for w, p in zip(walls, paths))
    of_work = statistics.median((w - p) / t for w, p, t in zip(walls, paths, work))
    ratio = statistics.median(w / nominal for w in walls)
    print(f"{name:<26} nominal path {nominal * 1000:6.1f} ms | median wall {statistics.median(walls) * 1000:6.1f} ms | "
          f"measured path {statistics.median(paths) * 1000:6.1f} ms | overhead {(statistics.median(walls) - statistics.median(paths)) * 1000:4.2f} ms = "
          f"{overhead * 100:5.2f}% of path, {of_work * 100:5.2f}% of worker time | wall/nominal {ratio:.3f}")
    return overhead, of_work, ratio


async def main(runs: int, latency: float) -> None:
    print(f"simulated workers, fixed latency {latency * 1000:.0f} ms, {runs} runs each (median reported)")
    chain = Workflow(tuple(Step(i % 3, f"step {i}", "all" if i else ()) for i in range(5)))
    fan = Workflow(tuple(Step(i, f"propose {i}", ()) for i in range(4)) + (Step(4, "aggregate", "all"),))
    wide = Workflow(tuple(Step(i, f"propose {i}", ()) for i in range(8)))
    results = [
        report("sequential chain, 5 steps", *await measure(chain, latency, runs, 3), 5 * latency),
        report("fan-out 4 + aggregator", *await measure(fan, latency, runs, 5), 2 * latency),
        report("fan-out 8, no aggregator", *await measure(wide, latency, runs, 8), latency),
    ]
    # The goals hold only if they hold for every shape: report the worst.
    print(f"\nexecutor time outside worker calls, worst shape: {max(w for _, w, _ in results) * 100:.2f}% of worker time, "
          f"{max(o for o, _, _ in results) * 100:.2f}% of the critical path (goal <= 1%)")
    print(f"latency / critical path, worst shape: {max(r for _, _, r in results):.3f} (goal <= 1.05)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.latency))
