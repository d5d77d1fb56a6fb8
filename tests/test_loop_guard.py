"""The loop guard of in-process llama.cpp: which endings count as a loop (fast, no model).

The guard runs on every prefix of a streamed generation, so a text that is not a loop must pass at
every prefix, not only in full."""

import pytest

from openconductor.providers.local_gguf import LOOP_MIN, looping

# Loops from a fit on the offline pool whose calls ran to max_tokens (repeated as they went on).
LOOPS = [
    "The answer is " + "0" * 200,
    "= 1663 - 5242 + 9376 + 8961 + 7634 " * 9,
    "Let me see.\n" + "The answer is \n" * 12,
    "Final answer: 12 × 2 × 3 = 6 × 3 = 18\n\n" * 9,
    "1" * LOOP_MIN,
    "étape " * 30,
]

PROGRAM = '''# ======================================================================
# Solve the task
# ======================================================================
import numpy as np

grid = np.zeros((8, 8))
print(grid)
assert grid.sum() == 0
assert grid.sum() == 0
assert grid.sum() == 0
assert grid.sum() == 0
print("-" * 72)
print("Final answer: 0")
'''

# Output a model may rightly write: banners, rules, tables, rows of zeros, alignment, a few repeated lines.
NOT_LOOPS = [
    PROGRAM,
    "| " + " | ".join(f"c{i}" for i in range(12)) + " |\n|" + "---|" * 12 + "\n| " + " | ".join("0" * 12) + " |\n",
    "[[0. 0. 0. 0. 0. 0. 0. 0.]\n" + " [0. 0. 0. 0. 0. 0. 0. 0.]\n" * 6 + " [0. 0. 0. 0. 0. 0. 0. 0.]]\n",
    "10**100 = 1" + "0" * 100 + "\nFinal answer: 1" + "0" * 100,
    "0x" + "0" * 64 + "\n" + "x = 1" + " " * 64 + "# aligned\n",
    "-" * 120 + "\nTotal: 42\n" + "=" * 120 + "\n",
    ", ".join(str(i) for i in range(10, 90)),  # counting: differs at every step
    "[" + ", ".join(["0"] * 24) + "]",
    "Final answer: 18\n\n" * 6,
    "".join(chr(ord("a") + i % 26) for i in range(70)) * 4,  # a unit longer than the longest period looked at
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，疑是地上霜。举头望明月，低头思故乡。" * 2,
]
LEAD = "Here is the work, step by step, and then the final answer in the form the task asks for.\n"


@pytest.mark.parametrize("text", LOOPS)
def test_a_repeated_unit_at_the_end_is_a_loop(text):
    assert looping(text)


@pytest.mark.parametrize("text", NOT_LOOPS)
def test_text_that_does_not_loop_passes_at_every_prefix(text):
    text = LEAD + text
    assert len(text) >= LOOP_MIN  # long enough that the guard looks at it
    cut = [i for i in range(1, len(text) + 1) if looping(text[:i])]
    assert not cut, f"cut at {cut[0]}: {text[:cut[0]][-80:]!r}"


@pytest.mark.parametrize("reason, expected", [("repetition", "length"), ("length", "length"), ("stop", "stop")])
def test_the_server_reports_a_stopped_loop_as_cut_short(reason, expected):
    from openconductor.records import Run, StepRecord
    from openconductor.server.builders import finish_reason

    step = StepRecord(index=0, worker=0, worker_name="qwen-coder", subtask="solve", access=[], status="ok", finish_reason=reason)
    assert finish_reason(Run(question="q", policy="p", status="ok", steps=[step])) == expected
