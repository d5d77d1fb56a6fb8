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
