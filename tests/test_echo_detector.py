"""The echo detector (``worker_message.echoes_prompt``) on replies that quote tags, prompts and code.

Issue 69: an MoA aggregator's reply that quoted ``</Agent 1 response>`` and ended "The final answer is \\boxed{13}"
was marked "echoed its prompt" and the run fell back to a wrong proposal. Every reply in ``QUOTING`` answers
(none may be flagged: 0 answers lost); every output in ``ECHOES`` repeats its prompt (each must still be caught).
The prompts are built by the executor itself (``build_messages``); the replies are written by hand (no model runs here),
and the last test runs the issue's case through ``solve`` on simulated workers (labelled: not a model).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openconductor.executor import build_messages, solve
from openconductor.policies import make_policy
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.providers.simulated import register_responder
from openconductor.records import StepRecord
from openconductor.worker_message import PREAMBLE, echoes_prompt
from openconductor.workflow import Step, Workflow

MATH = ("A farmer has 3 fields of 4 rows with 7 plants each, and loses 71 plants to frost. How many plants are left? "
        "End your response with 'Final answer: <answer>'.")
CODE = ('Complete the function.\n\ndef add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n\n    >>> add(2, 3)\n    5\n    """\n'
        "\nEnd your response with the code in one ```python block.")
CHOICE = ("Which organelle makes most of a cell's ATP?\nA) The nucleus of the cell\nB) The mitochondria of the cell\n"
          "C) The ribosome of the cell\nD) The golgi apparatus\nEnd your response with 'Final answer: <letter>'.")
PROPOSALS = ["3 * 4 * 7 = 84, and 84 - 71 = 12. Final answer: 12", "Each field has 28 plants, 84 in all; 84 - 71 = 13. Final answer: 13",
             "84 plants minus 71 lost is 13. Final answer: 13"]


def _messages(question: str, outputs: list[str], subtask: str, earlier_subtask: str = "Solve the task.") -> list[dict]:
    """The prompt of the last step of a workflow whose earlier steps (workers 0, 1, ...) answered ``outputs``."""
    steps = [Step(i, earlier_subtask, ()) for i in range(len(outputs))] + [Step(len(outputs), subtask, "all")]
    records = {i: StepRecord(index=i, worker=i, worker_name=f"w{i}", subtask=earlier_subtask, access=[], status="ok", output=out)
               for i, out in enumerate(outputs)}
    return build_messages(question, Workflow(tuple(steps)), len(outputs), records)


AGGREGATE = "Combine the proposals above into one final answer."
MOA = _messages(MATH, PROPOSALS, AGGREGATE)
SOLVE = _messages(MATH, [], "Solve the task.")
CODING = _messages(CODE, ["def add(a, b):\n    return a - b"], "Check the code above and give the corrected final version.")
CHOOSE = _messages(CHOICE, [], "Answer the question.")
SHORT_CODING = _messages('def inc(x: int) -> int:\n    """Return x plus one."""', [], "Write the function.")

# (name, prompt, reply): replies that quote the prompt's tags, its question, its subtask or its code, and answer.
QUOTING = [
    ("issue-69 aggregator quoting a closing tag", MOA,
     "Agent 0 computes 84 - 71 = 12, which is an arithmetic slip. The text just before </Agent 1 response> shows 84 - 71 = 13, "
     "and Agent 2 agrees. The final answer is \\boxed{13}"),
    ("aggregator quoting an opening tag in backticks", MOA,
     "The `<Agent 0 response>` block has a subtraction error; the other two are right. The final answer is \\boxed{13}"),
    ("aggregator quoting every closing tag", MOA,
     "</Agent 0 response> says 12, </Agent 1 response> says 13, </Agent 2 response> says 13. 84 - 71 = 13. Final answer: 13"),
    ("aggregator quoting the subtask tag", MOA,
     "Each <Subtask assigned to Agent 0> asked for the whole solution. Two of three say 13, and 84 - 71 = 13.\nFinal answer: 13"),
    ("aggregator quoting a whole proposal block", MOA,
     "<Agent 1 response>\n" + PROPOSALS[1] + "\n</Agent 1 response>\nThis one is right: 3 * 4 * 7 = 84 and 84 - 71 = 13.\nFinal answer: 13"),
    ("aggregator repeating its subtask, then answering", MOA, AGGREGATE + " Majority: 13. Final answer: 13"),
    ("aggregator restating the question in full", MOA, MATH + "\n\n84 - 71 = 13.\nFinal answer: 13"),
    ("aggregator quoting the overall-task tags", MOA,
     "The <Overall task> asks for plants left after frost. 3 fields * 4 rows * 7 = 84; 84 - 71 = 13. Final answer: 13"),
    ("aggregator endorsing a proposal word for word", MOA, PROPOSALS[2]),
    ("aggregator quoting the subtask line", MOA, "Your assigned subtask: combine. Done: the proposals agree on 13. Final answer: 13"),
    ("aggregator in boxed form only, quoting a tag", MOA, "Ignoring the slip in </Agent 0 response>: \\boxed{13}"),
    ("aggregator with an <answer> tag, quoting tags", MOA,
     "<Agent 1 response> and <Agent 2 response> agree.\n<answer>13</answer>"),
    ("aggregator quoting the preamble's advice", MOA,
     "As the instructions say, check them rather than trusting them blindly: 84 - 71 = 13, so Agent 0 is wrong. Final answer: 13"),
    ("aggregator quoting the preamble's first sentence", MOA,
     PREAMBLE[:69] + " So I check each proposal: 84 - 71 = 13. Final answer: 13"),
    ("solver restating the question, then solving", SOLVE,
     "Question: " + MATH + "\nThere are 3 * 4 * 7 = 84 plants. 84 - 71 = 13.\nFinal answer: 13"),
    ("solver quoting the answer format", SOLVE,
     "The task says to end with 'Final answer: <answer>'. 84 - 71 = 13.\nFinal answer: 13"),
    ("solver quoting one sentence of the question", SOLVE,
     "\"A farmer has 3 fields of 4 rows with 7 plants each\" gives 84 plants; 71 are lost, so 13 remain. Final answer: 13"),
    ("solver with a bare number after the question", SOLVE, MATH + "\n13"),
    ("solver writing a markdown quote of the question", SOLVE,
     "> " + MATH.split("?")[0] + "?\n\n**Solution.** 84 - 71 = 13\n\nFinal answer: 13"),
    ("coder repeating the signature and docstring", CODING,
     '```python\ndef add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n```'),
    ("coder repeating the whole question, then the fix", CODING, CODE + "\n\n```python\ndef add(a, b):\n    return a + b\n```"),
    ("coder quoting the earlier wrong code and fixing it", CODING,
     "The code in <Agent 0 response> subtracts:\n```python\ndef add(a, b):\n    return a - b\n```\nFixed:\n```python\ndef add(a, b):\n    return a + b\n```"),
    ("coder quoting the doctest", CODING, ">>> add(2, 3)\n5\nThe earlier code returns -1 here. Use `return a + b`."),
    ("coder quoting a closing tag in a comment", CODING,
     "```python\n# fixes the version in </Agent 0 response>\ndef add(a, b):\n    return a + b\n```"),
    # A short question, so that the program covers most of it: a repair step's reply (evidence.py judges whether it runs).
    ("coder: the signature and a body of two words", SHORT_CODING, "```python\ndef inc(x: int) -> int:\n    return x\n```"),
    ("coder: a program cut off mid-line (broken, but its own: the evidence says it does not load)", SHORT_CODING,
     "```python\ndef inc(x: int) -> int:\n    return (x +\n```"),
    ("coder endorsing after quoting the subtask", CODING,
     "Check the code above and give the corrected final version: it subtracts, so\n```python\ndef add(a, b):\n    return a + b\n```"),
    ("coder writing XML-like tags of its own", CODING,
     "<analysis>The earlier version subtracts.</analysis>\n<code>\ndef add(a, b):\n    return a + b\n</code>"),
    ("chooser quoting the right option line", CHOOSE, "B) The mitochondria of the cell"),
    ("chooser quoting an option line and the letter", CHOOSE, "B) The mitochondria of the cell\nFinal answer: B"),
    ("chooser quoting all options, then choosing", CHOOSE,
     "A) The nucleus of the cell\nB) The mitochondria of the cell\nC) The ribosome of the cell\nD) The golgi apparatus\n"
     "Mitochondria make ATP. Final answer: B"),
    ("chooser restating the whole question", CHOOSE, CHOICE + "\nFinal answer: B"),
    ("chooser answering in one word", CHOOSE, "B"),
    ("chooser quoting the overall task tag in prose", CHOOSE,
     "Reading the </Overall task> section: the mitochondria produce most ATP. Final answer: B"),
    ("a short reply sharing words with the question", SOLVE, "13 plants are left"),
    ("a reply naming the agents' tags in its own words", MOA, "Agent 1 response and Agent 2 response both say 13, which is right."),
    ("aggregator opening with a quoted block, answering in words", MOA,
     "<Agent 0 response>\n" + PROPOSALS[0] + "\n</Agent 0 response>\nThe subtraction above is wrong: 84 - 71 is 13, so the answer is 13."),
]

# (name, prompt, output): outputs that repeat the prompt instead of answering.
ECHOES = [
    ("the whole prompt", MOA, MOA[0]["content"]),
    ("the first earlier step, tags and all", MOA, MOA[0]["content"].split("\n\n")[2]),
    ("the overall task with its tags", SOLVE, "<Overall task>\n" + MATH + "\n</Overall task>"),
    ("the subtask line", SOLVE, "Your assigned subtask: Solve the task."),
    ("the preamble", SOLVE, PREAMBLE),
    ("the preamble's head", SOLVE, PREAMBLE[:70]),
    ("a word and a closing tag", SOLVE, "Sure.\n</Overall task>"),
    ("the question alone", SOLVE, MATH),
    ("the question's main sentence", SOLVE, MATH.split(" End")[0]),
    ("the aggregator's subtask", MOA, AGGREGATE),
    ("the earlier subtask, repeated", CODING, "Solve the task."),
    ("tags only", MOA, "</Agent 2 response>\n\n<Subtask assigned to Agent 3>"),
    ("the code question", CODING, CODE),
    ("a continuation into the next agent's block", MOA,
     "</Agent 2 response>\n<Subtask assigned to Agent 3>\n" + AGGREGATE + "\n</Subtask assigned to Agent 3>"),
]


# Real outputs (not written by hand): a tiny model imitating its prompt's layout (the preamble, subtask labels,
# "Final answer:" lines) without answering. The detector before issue 69's fix caught them; the first rewrite did not.
REAL = json.loads((Path(__file__).parent / "data/echo_real_outputs.json").read_text())
ECHOES += [(f"real output {i} ({case['source'].split(' (')[0]})", case["messages"], case["output"]) for i, case in enumerate(REAL)]


@pytest.mark.parametrize("name, messages, reply", QUOTING, ids=[c[0] for c in QUOTING])
def test_a_reply_that_quotes_tags_prompts_or_code_is_an_answer(name, messages, reply):
    assert not echoes_prompt(reply, messages), name


@pytest.mark.parametrize("name, messages, output", ECHOES, ids=[c[0] for c in ECHOES])
def test_an_output_that_repeats_its_prompt_is_still_an_echo(name, messages, output):
    assert echoes_prompt(output, messages), name


def test_the_set_is_as_large_as_the_issue_asks():
    assert len(QUOTING) >= 30 and len({c[0] for c in QUOTING}) == len(QUOTING)
    assert sum("</Agent" in r or "<Agent" in r or "<Subtask" in r or "Overall task>" in r for _, _, r in QUOTING) >= 10


@register_responder("quotes-a-tag")
def _quotes_a_tag(spec, messages, rng):
    """Simulated (not a model): proposers answer 12 or 13; the aggregator quotes a tag and answers 13 (issue 69)."""
    if "Agent 0 response" in messages[-1]["content"]:
        return "Agent 0 slipped; the line before </Agent 1 response> has 84 - 71 = 13.\nThe final answer is \\boxed{13}"
    return PROPOSALS[0] if spec.name == "w0" else PROPOSALS[1]


async def test_an_moa_aggregator_that_quotes_a_tag_gives_the_answer():
    workers = [WorkerSpec(name=f"w{i}", provider="simulated", options={"world": "quotes-a-tag"}, max_retries=0) for i in range(2)]
    async with Pool(PoolSpec(name="echo", workers=workers)) as pool:
        run = await solve(MATH, make_policy("moa", aggregator="w1"), pool)
    last = run.steps[-1]
    assert last.status == "ok" and last.error is None, last.error
    assert run.final_answer.endswith("\\boxed{13}")
