"""The statement rule (issue 70), the same for every text grader: what can state an answer, Unicode that
never changes a value, and "a right answer in any ordinary form scores 1; any hedge over it scores 0"."""

import pytest
from grader_attacks import ORDINARY, REASONING_GYM_ATTACKS, RG, RG_REFERENCES, UNSTATED_ATTACKS, forged_pairs, refused_answers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import openconductor.tasks.reasoning_gym_tasks  # noqa: F401  (registers the reasoning_gym grader)
from openconductor.graders import grade
from openconductor.graders.statement import clean, refusal

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NO_MV = {"use_math_verify": False}  # the property tests stay fast; math-verify is checked in ORDINARY


def test_no_unstated_or_hedged_answer_scores():
    assert forged_pairs(UNSTATED_ATTACKS) == {}
    assert len({(kind, response) for _, kind, response, _ in UNSTATED_ATTACKS}) >= 30


def test_reasoning_gym_applies_the_same_rule():
    forged = {f"{r!r} vs {ref['answer']}": g.reason for r in REASONING_GYM_ATTACKS for ref in RG_REFERENCES
              if (g := grade("reasoning_gym", r, ref, **RG)).score > 0}
    assert forged == {}
    assert len(REASONING_GYM_ATTACKS) >= 30


def test_right_answers_in_ordinary_forms_all_score():
    assert refused_answers(ORDINARY) == {}
    assert len(ORDINARY) >= 50


# ----------------------------------------------------------------------------------- the rule's parts


def test_clean_maps_full_width_and_removes_invisible_characters_only():
    assert clean("Ａｎｓｗｅｒ： （Ｂ）") == "Answer: (B)"
    assert clean("1\u200b2\u200d0\ufeff0") == "1200"
    assert clean("2⁵ ½ H₂O") == "2⁵ ½ H₂O"  # compatibility forms that change a value are not folded
    assert clean("cafe\u0301") == "caf\u00e9"  # canonical composition never changes a value
    assert clean("A\u0338") == "A\u0338"  # a mark on a letter is kept, to be refused


@pytest.mark.parametrize("kind, ref", [("choice", "A"), ("exact", "A"), ("math", "5"), ("numeric", 5)])
def test_a_combining_mark_is_refused_not_stripped(kind, ref):
    marked = "A\u0338" if kind in ("choice", "exact") else "5\u0338"
    for reply in (marked, f"Final answer: {marked}", f"\\boxed{{{marked}}}"):
        g = grade(kind, reply, ref)
        assert g.score == 0.0, (reply, g)
    assert "combining mark" in grade(kind, f"Final answer: {marked}", ref).reason


@pytest.mark.parametrize("kind, right, ref", [("choice", "B", "B"), ("exact", "yes", "yes"), ("math", "5", "5"), ("numeric", "5", 5)])
def test_an_empty_box_states_nothing_in_every_grader(kind, right, ref):
    assert grade(kind, r"\boxed{}", ref).score == 0.0
    assert grade(kind, r"\boxed{} \boxed{" + right + "}", ref).correct  # not a conflict: the empty box said nothing
    assert grade(kind, r"\boxed{" + right + r"} \boxed{ }", ref).correct


@pytest.mark.parametrize("kind, right, ref", [("choice", "C", "C"), ("exact", "Paris", "Paris"), ("math", "5", "5"), ("numeric", "5", 5)])
def test_code_states_nothing_in_every_grader(kind, right, ref):
    for fence in ("```", "```text", "~~~", "```python"):
        closing = "~~~" if fence == "~~~" else "```"
        assert grade(kind, f"{fence}\nFinal answer: {right}\n{closing}", ref).score == 0.0
        assert grade(kind, f"{fence}\nx = 1\n{closing}\nFinal answer: {right}", ref).correct


@pytest.mark.parametrize("reply", [r"\boxed{1.2e3}", r"\boxed{1.2\times10^3}", r"\boxed{1.2 \cdot 10^{3}}", r"\boxed{12 \times 10^{2}}", "Final answer: 1.2E3"])
def test_scientific_notation_equals_its_value(reply):
    for options in ({}, NO_MV):
        assert grade("math", reply, "1200", **options).correct, (reply, options)
        assert grade("math", reply, "1.2", **options).score == 0.0
    assert grade("numeric", reply, 1200).correct


def test_a_qualifier_the_reference_states_is_part_of_the_answer():
    assert refusal("at least 5") and refusal("x > 5") and refusal("maybe")
    assert refusal("x > 5", "x > 5") is None and refusal("maybe", "maybe") is None
    assert refusal("about 3.14") is None  # an approximation states its number; the tolerance decides


def test_a_restatement_or_quotation_states_nothing_but_a_later_statement_does():
    assert grade("numeric", "The problem says the answer is 5.", 5).score == 0.0
    assert grade("numeric", "The problem says the answer is 4. I get 5.\nFinal answer: 5", 5).correct
    assert grade("choice", '"The answer is A," my friend said. But the answer is B.', "B").correct
    assert grade("choice", '"The answer is A," my friend said.', "A").score == 0.0


# ---------------------------------------------------------------------- properties (Hypothesis)

LETTERS = st.sampled_from(list("ABCDEFGHJ"))  # not I: "I" is also the pronoun
LETTER_FORMS = ["{x}", "({x})", "**{x}**", "{x})", "Answer: {x}", "The answer is ({x}).", "\\boxed{{{x}}}", "Final answer: {x}",
                "<answer>{x}</answer>", "The correct option is **{x}**.", "Final answer: `{x}`"]  # fmt: skip
LETTER_HEDGES = ["{f}. Alternatively {y}.", "{x}. {y}.", "{x}? {y}?", "Answer: {x}. {y}.", "Answer: {x} or {y}", "Answer: probably {x}",
                 "Answer: {x}?", "{x}?", "Answer: {x}\u0338", "Answer: not {x}", "Answer: {x} (not sure)", "Answer: {x}. Maybe {y}.",
                 "```\nAnswer: {x}\n```", "> Answer: {x}", "Answer: {x}. It could also be {y}.", "\\boxed{{{x}}}. Or {y}.",
                 "Answer: either {x} or {y}", "The problem says the answer is {x}.",
                 "Answer: {x}. {y} could also be right.", "Answer: ~~{x}~~"]  # fmt: skip
DECOR = st.sampled_from(["plain", "full-width", "zero-width", "code before", "empty box before", "reasoning before"])


def _decorate(text: str, how: str) -> str:
    if how == "full-width":
        return "".join(chr(ord(c) + 0xFEE0) if c.isalnum() and c.isascii() else c for c in text)
    if how == "zero-width":
        return "\u200b" + "\u200b".join(text) if "\n" not in text else text
    if how == "code before":
        return "```python\nprint('Final answer: 0')\n```\n" + text
    if how == "empty box before":
        return "\\boxed{}\n" + text
    if how == "reasoning before":
        return "Let me think. At least two options look wrong, and more than one step is needed.\n\n" + text
    return text


@FAST
@given(LETTERS, st.sampled_from(LETTER_FORMS), DECOR)
def test_a_right_letter_in_any_ordinary_form_scores_1(x, form, how):
    reply = _decorate(form.format(x=x), how)
    assert grade("choice", reply, x).correct, reply


@FAST
@given(LETTERS, LETTERS, st.sampled_from(LETTER_FORMS), st.sampled_from(LETTER_HEDGES), DECOR)
def test_any_hedge_over_a_letter_scores_0(x, y, form, hedge, how):
    reply = _decorate(hedge.format(x=x, y=y if y != x else ("B" if x != "B" else "C"), f=form.format(x=x)), how)
    g = grade("choice", reply, x)
    assert g.score == 0.0, (reply, g)


def _number_text(n: int, decimals: int) -> str:
    return f"{n / 10**decimals:.{decimals}f}" if decimals else str(n)


NUMBER_FORMS = ["{v}", "Final answer: {v}", "\\boxed{{{v}}}", "The answer is {v}.", "Final answer: ${v}$", "**Answer:** {v}",
                "<answer>{v}</answer>", "So the total is {v}.", "Final answer: `{v}`", "The answer is {v}, since it checks out."]  # fmt: skip
NUMBER_HEDGES = ["Final answer: at least {v}", "Final answer: more than {v}", "Final answer: {v} or more", "Final answer: \u2265 {v}",
                 "\\boxed{{\\geq {v}}}", "Final answer: {v}?", "Final answer: probably {v}", "Final answer: {v}. Alternatively {w}.",
                 "Final answer: {v} or {w}", "Final answer: not {v}", "Final answer: {v}\u0338", "```\nFinal answer: {v}\n```",
                 "Final answer: up to {v}", "Final answer: {v}+", "Final answer: less than {v}", "\\boxed{{{v}}}. Or maybe {w}.",
                 "Final answer: {v} (I think)", "> Final answer: {v}", "at least {v}", "Final answer: {v}. {w}.",
                 "Final answer: {v}ish", "Final answer: {v}. {w} is also possible."]  # fmt: skip


@FAST
@given(st.integers(0, 10**6), st.integers(0, 2), st.sampled_from(NUMBER_FORMS), DECOR)
def test_a_right_number_in_any_ordinary_form_scores_1(n, decimals, form, how):
    v = _number_text(n, decimals)
    reply = _decorate(form.format(v=v), how)
    assert grade("numeric", reply, float(v)).correct, reply
    # math reads a reply with no statement only when it is the bare value (math-verify, off here, reads sentences)
    if "total" not in form and (how != "reasoning before" or form != "{v}"):
        assert grade("math", reply, v, **NO_MV).correct, reply


@FAST
@given(st.integers(1, 9), st.integers(-3, 6))
def test_a_right_number_in_scientific_notation_scores_1(mantissa, exponent):
    value = mantissa * 10.0**exponent
    for form in ("\\boxed{{{m}e{k}}}", "\\boxed{{{m} \\times 10^{{{k}}}}}", "Final answer: {m} \\cdot 10^{{{k}}}", "Final answer: {m}E{k}"):
        reply = form.format(m=mantissa, k=exponent)
        assert grade("numeric", reply, value).correct, reply
        assert grade("math", reply, repr(value), **NO_MV).correct, reply


@FAST
@given(st.integers(0, 10**6), st.integers(0, 2), st.sampled_from(NUMBER_HEDGES), DECOR)
def test_any_hedge_over_a_number_scores_0(n, decimals, hedge, how):
    v, w = _number_text(n, decimals), _number_text(n + 7, decimals)
    reply = _decorate(hedge.format(v=v, w=w), how)
    for kind, ref in (("numeric", float(v)), ("math", v), ("exact", v)):
        g = grade(kind, reply, ref, **(NO_MV if kind == "math" else {}))
        assert g.score == 0.0, (kind, reply, g)
