"""Tasks: loaders on the project's own sample files, offline packaged data, generators, typed errors."""

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from openconductor.graders import Grade, register_grader
from openconductor.tasks import (
    DatasetMissing,
    GraderUnavailable,
    Question,
    TaskError,
    check_graders,
    grade,
    load_task,
    task_infos,
)
from openconductor.tasks.livecodebench import decode_cases, function_name
from openconductor.tasks.reasoning_gym_tasks import extract_answer

DATA = Path(__file__).parent / "data"


def test_registry_lists_every_benchmark():
    names = {i.name for i in task_infos()}
    assert {"math500", "mmlu", "gpqa-diamond", "aime25", "livecodebench", "rlpr", "gsm8k", "humaneval", "champ",
            "gsm_symbolic", "basic_arithmetic", "countdown"} <= names


def test_unknown_task_and_bad_limit_are_typed_errors():
    with pytest.raises(TaskError, match="unknown task 'nope'.*gsm8k"):
        load_task("nope")
    with pytest.raises(TaskError, match="limit must be >= 1"):
        load_task("basic_arithmetic", limit=0)


def test_math500_from_local_file():
    task = load_task("math500", data=DATA / "math500_sample.jsonl")
    assert len(task) == 2
    q = task.questions[0]
    assert q.id == "test/prealgebra/1.json" and q.reference == "\\frac{3}{4}" and q.grader == "math"
    assert q.metadata["subject"] == "Prealgebra"
    assert task.text(q).startswith(q.prompt) and "\\boxed{}" in task.text(q)


def test_gsm8k_reference_is_the_number_after_hashes():
    task = load_task("gsm8k", data=DATA / "gsm8k_sample.jsonl")
    assert [q.reference for q in task.questions] == ["12", "2500"]
    assert {q.grader for q in task.questions} == {"numeric"}


def test_gsm8k_row_without_final_answer_is_rejected(tmp_path):
    bad = tmp_path / "gsm.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(TaskError, match="####"):
        load_task("gsm8k", data=bad)


def test_mmlu_letters_from_index_or_letter():
    task = load_task("mmlu", data=DATA / "mmlu_sample.jsonl")
    assert [q.reference for q in task.questions] == ["B", "B"]
    assert "A. Venus\nB. Mercury" in task.questions[0].prompt
    assert task.questions[0].grader == "choice"


def test_gpqa_shuffles_deterministically_and_reference_follows_the_answer():
    a = load_task("gpqa", data=DATA / "gpqa_sample.jsonl", seed=0)
    b = load_task("gpqa-diamond", data=DATA / "gpqa_sample.jsonl", seed=0)
    assert [q.prompt for q in a.questions] == [q.prompt for q in b.questions]
    for q, correct in zip(a.questions, ["photon", "Na"]):
        line = next(l for l in q.prompt.splitlines() if l.startswith(f"{q.reference}. "))
        assert line == f"{q.reference}. {correct}"
    letters = {load_task("gpqa", data=DATA / "gpqa_sample.jsonl", seed=s).questions[0].reference for s in range(12)}
    assert len(letters) > 1  # the correct option is not always in the same place


def test_aime_and_rlpr_columns():
    aime = load_task("aime25", data=DATA / "aime25_sample.jsonl")
    assert aime.questions[0].id == "I-1" and aime.questions[0].reference == "1"
    rlpr = load_task("rlpr", data=DATA / "rlpr_sample.jsonl")
    first, second = rlpr.questions
    assert first.prompt == "What fraction of 200 is 50, as a percent?" and first.reference == "25%"
    assert first.grader == "numeric" and first.grader_options == {"rel_tol": 1e-3}
    assert second.grader == "exact" and second.reference == "carbon dioxide"


def test_livecodebench_loads_stdin_and_functional_problems_and_decodes_private_tests():
    task = load_task("livecodebench", data=DATA / "livecodebench_sample.jsonl")
    assert [q.id for q in task.questions] == ["abc001_a", "lc-1"]  # lc-2 mixes test types: left out
    assert task.questions[0].reference == [{"input": "3\n", "output": "6\n"}, {"input": "5\n", "output": "10\n"}]
    functional = task.questions[1]
    assert functional.reference["fn_name"] == "twoSum" and len(functional.reference["tests"]) == 2
    assert "class Solution" in functional.prompt and "standard input" not in functional.prompt
    assert "1 problems without usable tests" in task.source
    public_only = load_task("livecodebench", data=DATA / "livecodebench_sample.jsonl", private_tests=False)
    assert len(public_only.questions[0].reference) == 1


def test_livecodebench_function_name_from_metadata_or_starter_code():
    assert function_name({"metadata": '{"func_name": "maxArea"}'}) == "maxArea"
    assert function_name({"metadata": {}, "starter_code": "class Solution:\n    def helper(self): ...\n    def countWays(self, n: int) -> int:\n"}) == "countWays"
    assert function_name({"metadata": "not json", "starter_code": ""}) is None


def test_bbh_jsonl_rows_are_graded_exact_with_letter_options():
    task = load_task("bbh", data=DATA / "bbh_sample.jsonl")
    assert [q.grader for q in task.questions] == ["exact", "exact"] and "Final answer" in task.instruction
    assert task.questions[0].reference == ["False"]
    assert task.questions[1].reference == ["(B)", "B"]  # BBH's option targets may be answered bare


def test_bigbench_task_json_multiple_choice_and_generative(tmp_path):
    mc = tmp_path / "mc_task" / "task.json"
    mc.parent.mkdir()
    mc.write_text(json.dumps({"task_prefix": "Q: ", "examples": [
        {"input": "2 + 2 is", "target_scores": {"3": 0, "4": 1, "5": 0}},
        {"input": "The sky is", "target_scores": {"blue": 1, "green": 0}},
    ]}))
    task = load_task("bigbench", data=mc)
    first = task.questions[0]
    assert first.grader == "choice" and first.reference == "B" and first.prompt.startswith("Q: 2 + 2 is")
    assert "A. 3" in first.prompt and "Answer: <letter>" in task.instruction
    assert first.metadata["subtask"] == "mc_task"
    gen = tmp_path / "gen.json"
    gen.write_text(json.dumps({"examples": [
        {"input": "Capital of France?", "target": ["Paris", "paris, France"]},
        {"input": "Pick one", "target_scores": {"x": 0, "y": 1}},  # mixed file: graded exact on the best option
    ]}))
    task = load_task("bbh", data=gen)
    assert [q.grader for q in task.questions] == ["exact", "exact"]
    assert task.questions[0].reference == ["Paris", "paris, France"] and task.questions[1].reference == ["y"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"examples": [{"input": "no target"}]}))
    with pytest.raises(TaskError, match="target"):
        load_task("bbh", data=bad)


def test_livecodebench_refuses_pickled_objects():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(TaskError, match="refusing global"):
        decode_cases(blob)


def test_humaneval_sample_and_packaged():
    sample = load_task("humaneval", data=DATA / "humaneval_sample.jsonl")
    q = sample.questions[0]
    assert q.reference["entry_point"] == "add" and "def check" in q.reference["test"] and q.grader == "code"
    packaged = load_task("humaneval")
    assert len(packaged) == 164 and packaged.questions[0].id == "HumanEval/0"


def test_champ_packaged():
    task = load_task("champ", limit=5)
    assert len(task) == 5
    assert task.questions[0].id == "P_Combinatorics_1" and task.questions[0].reference == "239"


def test_missing_local_file_and_unreachable_hub_say_how_to_get_the_data(monkeypatch, tmp_path):
    with pytest.raises(DatasetMissing, match="not found"):
        load_task("mmlu", data=tmp_path / "missing.jsonl")
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DatasetMissing, match="HuggingFaceH4/MATH-500.*--data FILE.jsonl"):
        load_task("math500")
    with pytest.raises(DatasetMissing, match="gated"):
        load_task("gpqa-diamond")


def test_unsupported_and_malformed_local_files(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n")
    with pytest.raises(TaskError, match="unsupported data file type"):
        load_task("mmlu", data=csv)
    broken = tmp_path / "x.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(TaskError, match="not valid JSON"):
        load_task("mmlu", data=broken)
    wrong = tmp_path / "y.jsonl"
    wrong.write_text(json.dumps({"text": "no question column"}) + "\n")
    with pytest.raises(TaskError, match="none of the columns"):
        load_task("math500", data=wrong)


def test_reasoning_gym_generators_are_deterministic_and_graded_by_their_scorer():
    opts = dict(min_terms=2, max_terms=2, max_digits=1, operators=["+"], allow_negation=False, allow_parentheses=False)
    a = load_task("basic_arithmetic", limit=5, seed=3, **opts)
    b = load_task("basic_arithmetic", limit=5, seed=3, **opts)
    assert [q.prompt for q in a.questions] == [q.prompt for q in b.questions] and len(a) == 5
    q = a.questions[0]
    expected = q.reference["answer"]
    right = grade(q, f"Adding gives {expected}.\nFinal answer: {expected}")
    wrong = grade(q, f"Final answer: {int(expected) + 1}")
    assert right.correct and right.score == 1.0 and right.extracted == expected and "by 'final answer'" in right.reason
    assert not wrong.correct and wrong.score < 1.0
    assert not grade(q, "").correct


def test_an_answer_that_only_contains_the_reference_earns_nothing():
    """reasoning-gym's base scorer pays len(reference)/len(answer) to any answer containing the reference;
    a float format ("7.0" for "7") or a hedge ("7 or 8") scored up to 0.7 and ranked plans in the fit's
    search above more accurate ones. Generators with their own scorer keep their closeness credit."""
    import reasoning_gym

    q = load_task("basic_arithmetic", limit=1, seed=3, min_terms=2, max_terms=2, max_digits=1, operators=["+"]).questions[0]
    expected = q.reference["answer"]
    padded = reasoning_gym.get_score_answer_fn("basic_arithmetic")(f"{expected}.0", q.reference)
    assert 0 < padded < 1  # what reasoning-gym itself pays
    for hedge in (f"x = {expected}", f"{expected}7"):
        got = grade(q, f"Final answer: {hedge}")
        assert got.score == 0.0 and not got.correct and "only contains the reference" in got.reason
    either = grade(q, f"Final answer: {expected} or {int(expected) + 1}")  # the statement rule refuses it first
    assert either.score == 0.0 and "a hedge ('or')" in either.reason
    assert grade(q, f"Final answer: {expected}").score == 1.0
    coin = load_task("rg:coin_flip", limit=1, seed=1).questions[0]
    near = str(round(float(coin.reference["answer"]) * 1.1, 6))
    own = reasoning_gym.get_score_answer_fn("coin_flip")(near, coin.reference)
    assert 0 < own < 1 and grade(coin, f"Final answer: {near}").score == pytest.approx(own)


@pytest.mark.parametrize("written", ["106475279601.0", "106475279601.000", "106,475,279,601", "+106475279601", "1.06475279601e11",
                                     "$106475279601", "**106475279601.0**"])
def test_the_same_number_written_another_trivial_way_scores_1(written):
    """Issue 69: "106475279601.0" against "106475279601" scored 0 (reasoning-gym pays it a containment credit,
    which the rule above zeroes). Exact equality of the numbers, no tolerance."""
    from openconductor.graders import grade as grade_kind

    entry = {"question": "q", "answer": "106475279601", "metadata": {}}
    got = grade_kind("reasoning_gym", f"The product is large.\nFinal answer: {written}", entry, dataset="basic_arithmetic")
    assert got.score == 1.0 and "same number" in got.reason


@pytest.mark.parametrize("written, reference", [("106475279600.9", "106475279601"), ("106475279601.01", "106475279601"), ("0101", "101"),
                                                ("101", "0101"), ("1,06", "106"), ("12 or 13", "12"), ("-7", "7")])
def test_numbers_that_differ_or_strings_of_digits_are_not_the_same_number(written, reference):
    from openconductor.tasks.reasoning_gym_tasks import same_number

    assert not same_number(written, reference)


def test_reasoning_gym_any_generator_and_bad_options():
    task = load_task("rg:chain_sum", limit=3)
    assert len(task) == 3 and task.questions[0].grader_options == {"dataset": "chain_sum"}
    with pytest.raises(TaskError, match="basic_arithmetic"):
        load_task("basic_arithmetic", limit=2, no_such_option=1)
    with pytest.raises(TaskError, match="takes no --data"):
        load_task("gsm_symbolic", data="x.jsonl")


@pytest.mark.parametrize(
    "response, expected",
    [
        ("so 3 + 4 = 7\nFinal answer: 7", "7"),
        ("The answer is 42.", "42"),
        ("we get \\boxed{12}", "12"),
        ("first 3, then 1,234 apples", "1234"),
        ("no digits here", None),
        ("", None),
    ],
)
def test_extract_answer(response, expected):
    assert extract_answer(response) == expected


def test_a_multi_line_answer_is_read_whole_where_the_reference_spans_lines():
    """An ARC grid (reasoning-gym's own entry and scorer): the answer is as many lines after "Final
    answer:" as the reference has; before, only its first row was read and the right grid scored 0.05."""
    import reasoning_gym

    from openconductor.graders import grade

    entry = reasoning_gym.create_dataset("arc_agi", size=1, seed=3)[0]
    grid = entry["answer"]
    rows = grid.splitlines()
    assert len(rows) > 1
    score = lambda response: grade("reasoning_gym", response, entry, dataset="arc_agi").score  # noqa: E731
    assert score(f"I compared the examples.\nFinal answer:\n{grid}") == 1.0
    assert score("**Final answer:**\n```\n" + "\n".join("  " + r for r in rows) + "\n```\nThis answers the task.") == 1.0
    assert score(f"Final answer:\r\n{grid}\r\n\r\nDone.") == 1.0
    assert score("Final answer:\n" + rows[0]) < 1.0
    # A second grid after the first is not read: reasoning-gym pays a partial score to any answer that
    # contains the reference, so a list of guesses must not reach its scorer.
    wrong = "\n".join(" ".join("9" for _ in r.split()) for r in rows)
    assert extract_answer(f"Final answer:\n{wrong}\n{grid}", lines=len(rows)) == wrong
    assert score(f"Final answer:\n{wrong}\n{grid}") < 1.0
    # A one-line reference still reads one line; "answers" is not the marker.
    assert extract_answer("Final answer: 7\nI hope that helps") == "7"
    assert extract_answer("Final answer: 7\nI hope", lines=2) == "7\nI hope"
    assert extract_answer("The result is 12. That answers it.") == "12"


def test_a_task_grader_registers_in_the_one_registry_and_unknown_kinds_fail_early():
    @register_grader("test-exact")
    def exact(response, reference):
        ok = response.strip() == reference
        return Grade(float(ok), response.strip(), "test double")

    q = Question(id="1", prompt="p", reference="yes", grader="test-exact")
    assert grade(q, " yes ").correct and not grade(q, "no").correct
    check_graders([q])  # registered: no error
    with pytest.raises(GraderUnavailable, match="'no-such-kind'.*registered: .*math"):
        check_graders([q, Question(id="2", prompt="p", reference="4", grader="no-such-kind")])


def test_cli_lists_tasks():
    from typer.testing import CliRunner

    from openconductor.cli import app

    result = CliRunner().invoke(app, ["tasks"], terminal_width=200)
    assert result.exit_code == 0
    for name in ("math500", "gpqa-diamond", "livecodebench", "humaneval", "basic_arithmetic"):
        assert name in result.output


def test_offset_gives_a_disjoint_split():
    first = load_task("humaneval", limit=3)
    second = load_task("humaneval", limit=3, offset=3)
    both = load_task("humaneval", limit=6)
    assert [q.id for q in first.questions + second.questions] == [q.id for q in both.questions]
    with pytest.raises(TaskError, match="offset must be >= 0"):
        load_task("humaneval", offset=-1)
    with pytest.raises(TaskError, match="no questions after the first 500"):
        load_task("humaneval", offset=500)
