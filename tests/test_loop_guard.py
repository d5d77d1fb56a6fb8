"""The loop guard of in-process llama.cpp: which endings count as a loop (fast, no model)."""

import pytest

from openconductor.providers.local_gguf import looping

# Endings of real generations from a fit on the offline pool that ran to max_tokens.
LOOPS = [
    "The answer is " + "0" * 70,
    "= 1663 - 5242 + 9376 + 8961 + 7634 " * 5,
    "Let me see.\n" + "The answer is \n" * 6,
    "Final answer: 12 × 2 × 3 = 6 × 3 = 18\n\n" * 4,
    "1" * 64,
]

# Normal text, code and numbers that repeat a little, or vary, must not be cut.
NOT_LOOPS = [
    "",
    "1" * 63,  # shorter than the minimum span
    "Final answer: 18\n\n" * 3,  # a few repeats, under the span
    "def f(x):\n    return x * 2\n\nprint(f(3))\n" * 1,
    ", ".join(str(i) for i in range(10, 60)),  # a counting list differs at every step
    "[0.0, 0.25, 0.5, 0.75, 1.0]\n" * 2,
    "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n",
    "x = 1\ny = 2\nz = 3\n" + "print(x + y + z)\n",
    "abcd" * 15 + "e",  # the loop has to reach the end
]


@pytest.mark.parametrize("text", LOOPS)
def test_a_repeated_unit_at_the_end_is_a_loop(text):
    assert looping(text)


@pytest.mark.parametrize("text", NOT_LOOPS)
def test_text_that_does_not_end_in_a_loop_is_left_alone(text):
    assert not looping(text)


def test_a_unit_longer_than_the_longest_period_is_not_a_loop():
    unit = "".join(chr(ord("a") + i % 26) for i in range(70)) + "\n"  # 71 characters, over the 64 looked at
    assert not looping(unit * 4)
