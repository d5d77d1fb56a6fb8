"""Answer graders: math (math-verify + normalisation), multiple choice, numeric, exact, registry."""

import threading

import pytest

from openconductor.graders import Grade, GraderError, agrade, grade, grader_kinds, register_grader
from openconductor.graders.math_grade import normalize_math

# ------------------------------------------------------------------------------------------- math


@pytest.mark.parametrize(
    "response, reference",
    [
        (r"The answer is $\boxed{\dfrac{1}{2}}$.", r"\frac{1}{2}"),
        ("0.5", r"\frac12"),
        ("1/2", "0.5"),
        ("x = 5", "5"),
        (r"<answer>\boxed{\left( 3, \frac{\pi}{2} \right)}</answer>", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"So $\boxed{\frac{\sqrt{3}}{2}}$", r"\frac{\sqrt3}{2}"),
        (r"We get \boxed{2\sqrt{2}}", r"\sqrt{8}"),
        (r"Nested: \boxed{\frac{1}{1+\frac{1}{2}}}", r"\frac{2}{3}"),
        ("Let me think.\nAfter checking both cases, the final answer is 12.", "12"),
        (r"<think>maybe 7?</think>The answer is \boxed{10}", "10"),
        (r"\boxed{\text{(C)}}", r"\text{(C)}"),
        (r"\boxed{90^\circ}", "90"),
        (r"Therefore, the answer is $\frac{1}{2}$ since $x>0$.", "1/2"),
        ("The answer is 5. Let me double-check: 2+3=5.", "5"),
        ("I computed 17 first, but the answer is 18", "18"),
        ("**Answer:** 7/2", "3.5"),
    ],
)
def test_math_equivalent_forms(response, reference):
    g = grade("math", response, reference)
    assert g.correct, g
    assert g.extracted


@pytest.mark.parametrize(
    "response, reference",
    [
        (r"The answer is \boxed{7}", "8"),
        ("0.33", r"\frac13"),
        (r"\boxed{x^2+1}", "x^2-1"),
        (r"<think>the answer is 5</think>I am not sure.", "5"),
    ],
)
def test_math_wrong_answers(response, reference):
    g = grade("math", response, reference)
    assert g.score == 0.0 and not g.correct, g
    assert g.reason


def test_math_normalisation_fallback_without_math_verify():
    g = grade("math", r"The answer is $\boxed{\dfrac{1}{2}}$.", r"\frac12", use_math_verify=False)
    assert g.correct and "normalised" in g.reason
    assert grade("math", "0.5", "1/2", use_math_verify=False).correct  # equal numeric value
    assert grade("math", r"\text{x = } 1,000 \text{ units}", "1000", use_math_verify=False).correct
    assert not grade("math", "0.51", "1/2", use_math_verify=False).correct
    assert normalize_math(r"\left(1, 2\right)") == "(1,2)"
    assert normalize_math(r"\dfrac12") == r"\frac{1}{2}"


def test_math_hostile_input_is_cut_off_by_the_hard_timeout():
    # 10^(10^10) makes sympy try to build a 10-billion-digit integer; the worker is killed.
    g = grade("math", r"\boxed{10^{10^{10}} - 10^{10^{10}} + 1}", "1", timeout_s=2.0)
    assert "math-verify exceeded 2 s" in g.reason and g.score == 0.0  # the fallback graded it instead
    # the pool recovers: the next call works
    assert grade("math", "2", "2").correct


def test_math_works_off_the_main_thread():
    # TRL calls rewards from a thread; math-verify's own signal.alarm would raise there.
    out: list = []
    t = threading.Thread(target=lambda: out.append(grade("math", r"\boxed{\frac{2}{4}}", "0.5")))
    t.start()
    t.join(60)
    assert out and out[0].correct


def test_math_bad_reference():
    with pytest.raises(GraderError, match="math reference"):
        grade("math", "5", "")
    with pytest.raises(GraderError):
        grade("math", "5", None)


# ----------------------------------------------------------------------------------------- choice


@pytest.mark.parametrize(
    "response, expected",
    [
        ("C", "C"),
        ("(C)", "C"),
        ("The answer is (C).", "C"),
        ("After weighing the options, the correct answer is C because ...", "C"),
        ("**B**", "B"),
        ("Answer: D) 42, since the others are too small", "D"),
        ("B) Paris\nIt is the capital of France.", "B"),
        (r"\boxed{A}", "A"),
        ("<answer>J</answer>", "J"),
        ("The answer is not A. Let me check again... The answer is (E)", "E"),
        ("Final answer: **(F)**", "F"),
    ],
)
def test_choice_extracts_the_letter(response, expected):
    g = grade("choice", response, expected)
    assert g.correct and g.extracted == expected, g


@pytest.mark.parametrize(
    "response",
    [
        "A or B",
        "The answer is either A or B.",
        "The answer is A, B",
        "(A) is wrong, so (C)",
        "**A** looks plausible but **C** is also possible",
        "the answer is a bit unclear",
        "",
    ],
)
def test_choice_ambiguous_or_missing_is_not_graded(response):
    g = grade("choice", response, "C")
    assert g.score == 0.0 and g.extracted is None, g
    assert "not graded confidently" in g.reason


def test_choice_wrong_letter_and_configuration():
    g = grade("choice", "The answer is (B)", "C")
    assert g.score == 0.0 and g.extracted == "B"
    # only A-D valid: "E" is not an option letter
    assert grade("choice", "E", "A", choices="ABCD").extracted is None
    # option texts: a reply that quotes exactly one option's text
    g = grade("choice", "It must be Paris.", 1, choices=["London", "Paris", "Rome", "Berlin"])
    assert g.correct and g.extracted == "B"
    assert grade("choice", "(c)", "C").correct
    assert grade("choice", "Answer: c", "C").correct
    assert grade("choice", "The answer is a bit unclear", "A").extracted is None


def test_choice_bad_reference():
    with pytest.raises(GraderError, match="letters"):
        grade("choice", "A", "Z", choices="ABCD")
    with pytest.raises(GraderError):
        grade("choice", "A", 7, choices=4)


# ---------------------------------------------------------------------------------------- numeric


@pytest.mark.parametrize(
    "response, reference",
    [
        ("45%", 0.45),
        ("0.45", "45%"),
        ("The growth rate is 45 percent.", "45%"),
        ("$1,200", 1200),
        ("It costs USD 1,200.00 in total", "$1200"),
        ("1.2e5", "120000"),
        (r"\boxed{2.5 \times 10^{3}}", 2500),
        ("about 3.1416 meters", 3.14159),
        ("The answer is 12,345.6 km, roughly.", "12345.6"),
        ("-1/2", -0.5),
        ("$1.2 million", 1_200_000),
        (r"\boxed{\frac{3}{4}}", 0.75),
        ("1000.9", 1000),  # within rel 1e-3
    ],
)
def test_numeric_matches(response, reference):
    g = grade("numeric", response, reference)
    assert g.correct, g


@pytest.mark.parametrize(
    "response, reference",
    [("0.46", 0.45), ("1002", 1000), ("12", -12), ("no numbers here", 3), ("45%", 4.5)],
)
def test_numeric_mismatches(response, reference):
    assert grade("numeric", response, reference).score == 0.0


def test_numeric_tolerance_option_and_bad_reference():
    assert grade("numeric", "1002", 1000, rel_tol=0.01).correct
    with pytest.raises(GraderError, match="exactly one"):
        grade("numeric", "1", "between 1 and 2")
    with pytest.raises(GraderError):
        grade("numeric", "1", "n/a")
    # RLPR: a word reference is graded by normalised exact match when asked to
    assert grade("numeric", "The answer is: Photosynthesis.", "photosynthesis", fallback_exact=True).correct
    assert not grade("numeric", "Respiration", "photosynthesis", fallback_exact=True).correct
    assert grade("numeric", "$1,200", "1200", fallback_exact=True).correct


# ------------------------------------------------------------------------------------------ exact


def test_exact():
    assert grade("exact", "  Paris. ", "paris").correct
    assert grade("exact", "The answer is: Paris", "Paris").correct
    assert grade("exact", r"\boxed{yes}", ["Yes", "True"]).correct
    assert not grade("exact", "Paris", "paris", case_sensitive=True).correct
    assert not grade("exact", "Lyon", "Paris").correct
    with pytest.raises(GraderError):
        grade("exact", "x", "")


# --------------------------------------------------------------------------------- interface/registry


def test_interface_errors_are_actionable():
    with pytest.raises(GraderError, match="unknown grader kind 'essay'.*choice"):
        grade("essay", "x", "y")
    with pytest.raises(GraderError, match="unknown option.*rel_tol"):
        grade("choice", "A", "A", rel_tol=0.1)
    with pytest.raises(GraderError, match="must be a str"):
        grade("exact", 42, "42")  # type: ignore[arg-type]


def test_grade_model():
    g = grade("numeric", "3", 3)
    assert isinstance(g, Grade) and g.correct and g.score == 1.0 and g.to_dict()["correct"] is True
    assert not Grade(0.5, "x", "half").correct
    with pytest.raises(ValueError):
        Grade(1.5, None, "out of range")
    assert set(grader_kinds()) >= {"math", "choice", "numeric", "exact", "code"}


async def test_register_a_new_kind_and_agrade():
    @register_grader("test-palindrome")
    def _pal(response: str, reference, *, strict: bool = False) -> Grade:
        ok = response.strip() == response.strip()[::-1]
        return Grade(1.0 if ok else 0.0, response.strip(), "palindrome" if ok else "not a palindrome")

    assert grade("test-palindrome", "abba", None).correct
    assert (await agrade("test-palindrome", "abc", None, strict=True)).score == 0.0
    assert (await agrade("numeric", "45%", 0.45)).correct
    assert (await agrade("math", r"\boxed{\dfrac{1}{2}}", "0.5")).correct
