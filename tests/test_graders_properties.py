"""Property tests over the text graders (hypothesis, bounded examples): whatever the text, a grade never
raises, stays in [0, 1], never credits two different answers, and reads a number as its whole expression."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openconductor.graders import grade
from openconductor.reply import answer_block, answer_blocks

# Pieces where the graders' edge cases live: answer markers, boxes, tags, connectives, numbers that
# overflow, Unicode that NFKC would change, option letters and the words "yes" / "no".
PIECES = [
    "\\boxed{", "}", "{", "\\fbox{", "Final answer:", "final answer is ", "The answer is ", "Answer: ", "answer is not ",
    "if the answer is ", "<answer>", "</answer>", "<think>", "</think>", "\n", " ", ". ", ", ", "; ", " or ", " and ",
    "\\vee ", "\\lor ", " = ", "\\%", "%", "$", "^", "^{", "!", "\\sqrt{", "\\frac{", "\\log ", "e", "⁵", "²", "½", "₂",
    "１", "1e400", "10^{999}", "-", "(", ")", "0", "1", "2", "3", "5", "9", "42", "3.5", "1,200", "A", "B", "C", "D",
    "(A)", "**B**", "yes", "no", "Paris", "x", "is wrong", "million", "\\times 10^{", "\\\\", "|",
]  # fmt: skip
replies = st.lists(st.sampled_from(PIECES), max_size=16).map("".join) | st.text(max_size=60)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REFERENCES = {  # kind -> (options, two references that are different answers)
    "exact": ({}, ("yes", "no")),
    "numeric": ({}, (3, 5)),
    "choice": ({}, ("A", "B")),
    "math": ({"use_math_verify": False}, ("3", "5")),
}


@FAST
@given(replies)
def test_any_text_grades_in_range_and_never_credits_two_answers(text):
    for kind, (options, refs) in REFERENCES.items():
        grades = [grade(kind, text, ref, **options) for ref in refs]
        assert all(0.0 <= g.score <= 1.0 for g in grades), (kind, text, grades)
        assert not any("failed on this response" in g.reason for g in grades), (kind, text, grades)  # no internal error
        assert not all(g.correct for g in grades), (kind, text, grades)


# Derandomised: the same 40 replies every run, so a sympy worst case cannot make one CI run slow.
@settings(max_examples=40, deadline=None, derandomize=True)
@given(replies)
def test_math_verify_never_credits_two_answers(text):
    grades = [grade("math", text, ref, timeout_s=2.0) for ref in ("3", "5")]
    assert not all(g.correct for g in grades), (text, grades)


# Two different final answers stated in one reply, in every way the rule counts as final.
TWO_ANSWERS = [
    "\\boxed{{{a}}} the answer is {b}",
    "The answer is {a}. \\boxed{{{b}}}",
    "Final answer: {a}\nFinal answer: {b}",
    "\\boxed{{{a}}}\\boxed{{{b}}}",
    "<answer>{a}</answer>{filler}<answer>{b}</answer>",
    "Final answer: {a}. The answer is {b}.",
    "The final answer is {a}.{filler}The answer is \\boxed{{{b}}}",
]
FILLER = st.sampled_from(["", " ", "\n", "\n\nLet me check.\n", " Hmm. ", "\n**Check**: done.\n"])
VALUES = {
    "exact": st.sampled_from(["yes", "no", "Paris", "London", "True", "False"]),
    "numeric": st.integers(0, 99),
    "choice": st.sampled_from(list("ABCDEFGHIJ")),
    "math": st.integers(-50, 50),
}


@FAST
@given(st.sampled_from(sorted(VALUES)), st.data(), st.sampled_from(TWO_ANSWERS), FILLER, FILLER)
def test_a_reply_that_states_two_different_answers_never_scores(kind, data, template, filler, lead):
    a = data.draw(VALUES[kind])
    b = data.draw(VALUES[kind].filter(lambda v: v != a))
    text = lead + template.format(a=a, b=b, filler=filler)
    for ref in (a, b):
        ref = str(ref) if kind in ("math", "exact", "choice") else ref
        g = grade(kind, text, ref, **({"use_math_verify": False} if kind == "math" else {}))
        assert g.score == 0.0, (text, ref, g)


SUPER = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@FAST
@given(st.integers(2, 12), st.integers(2, 9), st.sampled_from(["{a}^{{{b}}}", "{a}^{b}", "{sa}", "\\boxed{{{a}^{b}}}"]))
def test_a_power_is_read_as_its_value_never_as_one_of_its_numbers(a, b, form):
    text = "Final answer: " + form.format(a=a, b=b, sa=f"{a}{str(b).translate(SUPER)}")
    assert grade("numeric", text, a**b).correct, text
    assert grade("numeric", text, a).score == 0.0 and grade("numeric", text, b).score == 0.0, text


@FAST
@given(st.integers(3, 20))
def test_factorials_and_roots_are_read_whole(n):
    assert grade("numeric", f"Final answer: {n}!", math.factorial(n)).correct
    assert grade("numeric", f"Final answer: {n}!", n).score == 0.0
    assert grade("numeric", f"Final answer: \\sqrt{{{n * n}}}", n).correct
    assert grade("numeric", f"Final answer: \\sqrt{{{n * n}}}", n * n).score == 0.0


@FAST
@given(st.integers(309, 10**6), st.sampled_from(["1e{n}", "\\boxed{{2 \\times 10^{{{n}}}}}", "10^{{{n}}}", "{n}!", "2^{{{n}}}"]))
def test_overflow_scores_zero_and_never_raises(n, form):
    assert grade("numeric", "Final answer: " + form.format(n=n), 72).score == 0.0


@FAST
@given(st.from_regex(r"[1-9][0-9]{0,3}", fullmatch=True), st.from_regex(r"[0-9]{1,3}", fullmatch=True))
def test_exact_never_folds_a_superscript_into_the_number(base, exponent):
    assert grade("exact", base + exponent.translate(SUPER), base + exponent).score == 0.0


@FAST
@given(replies)
def test_the_last_answer_block_is_answer_block(text):
    blocks = answer_blocks(text)
    assert (blocks[-1] if blocks else None) == answer_block(text)
