"""The generalisation data (issue 30): kinds split for training and held out, the everyday questions of our
own with their graders, and what a prompted conductor is shown of a pool (names and descriptions)."""

import json
from pathlib import Path

import pytest

from openconductor.pool import PoolSpec, load_pool
from openconductor.tasks import TaskError, grade, load_task
from openconductor.tasks.everyday import packaged_path
from openconductor.tasks.kinds import HELD_OUT_KINDS, HELD_OUT_SEED, TRAIN_KINDS, TRAIN_OPTIONS, kind_name, main

ROOT = Path(__file__).resolve().parents[1]


def test_held_out_kinds_are_never_training_kinds_and_number_at_least_ten():
    train = {kind_name(t) for t in TRAIN_KINDS}
    held = {kind_name(t) for t in HELD_OUT_KINDS}
    assert len(held) >= 10 and not train & held
    assert set(TRAIN_OPTIONS) <= set(TRAIN_KINDS)


def test_every_held_out_kind_yields_twenty_distinct_graded_questions():
    """Each held-out kind gives >= 20 distinct questions at the held-out seed, and its own scorer grades its
    reference answer right (a kind whose scorer rejects its own answers would measure nothing)."""
    pytest.importorskip("reasoning_gym")
    for name in HELD_OUT_KINDS:
        task = load_task(name, limit=20, seed=HELD_OUT_SEED)
        assert len({q.prompt for q in task.questions}) == 20, name
        q = task.questions[0]
        assert grade(q, f"Working.\nFinal answer: {q.reference['answer']}").score == 1.0, name
        assert grade(q, "Final answer: certainly not this").score < 1.0, name


def test_everyday_splits_are_disjoint_and_every_reference_grades_right():
    test, train = load_task("everyday"), load_task("everyday", split="train")
    assert len(test) >= 50 and len(train) >= 50
    assert not {q.prompt for q in test.questions} & {q.prompt for q in train.questions}
    assert {q.metadata["category"] for q in test.questions} == {q.metadata["category"] for q in train.questions}
    for q in test.questions + train.questions:
        answer = q.reference if isinstance(q.reference, str) else q.reference[0]
        assert grade(q, f"Let me think.\nFinal answer: {answer}").score == 1.0, q.prompt
        assert grade(q, "Final answer: 123456789 zebras").score == 0.0, q.prompt
    assert load_task("everyday", split="all").questions.__len__() == len(test) + len(train)


def test_everyday_answers_in_other_accepted_forms():
    by_prompt = {q.prompt: q for q in load_task("everyday", split="all").questions}
    assert grade(by_prompt["What is the capital of France?"], "The capital is Paris.\nFinal answer: paris").score == 1.0
    assert grade(by_prompt["What is 15% of 240?"], "Final answer: 36.0").score == 1.0
    assert grade(by_prompt["How many metres are there in 5 kilometres?"], "Final answer: 5,000 metres").score == 1.0
    clock = next(q for p, q in by_prompt.items() if p.startswith("What time is it 2 hours and 45 minutes after 10:30"))
    assert grade(clock, "Final answer: 13:15").score == 1.0 and grade(clock, "Final answer: 1:15 pm").score == 1.0
    assert grade(by_prompt["What day of the week was 4 July 1976?"], "Final answer: Sunday").score == 1.0


def test_everyday_bad_options_and_files_are_typed_errors(tmp_path):
    with pytest.raises(TaskError, match="split must be one of test, train, all"):
        load_task("everyday", split="validation")
    with pytest.raises(TaskError, match="no questions .* category='astrology'"):
        load_task("everyday", category="astrology")
    bad = tmp_path / "q.jsonl"
    bad.write_text(json.dumps({"id": "x", "question": "2+2?", "answer": "4", "grader": "math", "split": "test"}) + "\n")
    with pytest.raises(TaskError, match="graded 'exact' or 'numeric'"):
        load_task("everyday", data=bad)
    bad.write_text(json.dumps({"id": "x", "answer": "4", "grader": "exact", "split": "test"}) + "\n")
    with pytest.raises(TaskError, match="none of the columns \\('question', 'prompt'\\)"):
        load_task("everyday", data=bad)


def test_your_own_questions_file_is_a_task(tmp_path):
    """`--task questions --data FILE`: a number is graded numerically, text exactly, a list as accepted forms;
    kinds filter; a missing file, a row without an answer or another grader are typed errors."""
    from openconductor.tasks import DatasetMissing

    path = tmp_path / "mine.jsonl"
    rows = [{"question": "What is 15% of 240?", "answer": "36", "kind": "percent"},
            {"question": "Capital of Peru?", "answer": "Lima", "kind": "capital"},
            {"id": "t", "question": "Ten past six in 24-hour time?", "answer": ["18:10", "6:10 pm"]},
            {"question": "Pi to two places?", "answer": 3.14, "grader_options": {"rel_tol": 0.01}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task("questions", data=path)
    assert [q.grader for q in task.questions] == ["numeric", "exact", "exact", "numeric"]
    assert [q.id for q in task.questions] == ["0", "1", "t", "3"] and task.questions[3].reference == "3.14"
    assert grade(task.questions[0], "Final answer: 36.0").score == 1.0 and grade(task.questions[1], "Final answer: lima").score == 1.0
    assert grade(task.questions[2], "Final answer: 6:10 pm").score == 1.0 and grade(task.questions[3], "Final answer: 3.1416").score == 1.0
    assert [q.prompt for q in load_task("questions", data=path, kind="capital").questions] == ["Capital of Peru?"]
    with pytest.raises(DatasetMissing, match="--data FILE.jsonl"):
        load_task("questions")
    with pytest.raises(TaskError, match="no questions of kind 'poetry'"):
        load_task("questions", data=path, kind="poetry")
    path.write_text(json.dumps({"question": "2+2?", "answer": "4", "grader": "math"}) + "\n")
    with pytest.raises(TaskError, match="row 1 has grader 'math'"):
        load_task("questions", data=path)
    path.write_text(json.dumps({"question": "2+2?"}) + "\n")
    with pytest.raises(TaskError, match="none of the columns \\('answer', 'reference'\\)"):
        load_task("questions", data=path)


def test_everyday_file_is_what_its_generator_writes():
    """The shipped file is reproducible: the script that computes its references writes it byte for byte."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_everyday", ROOT / "scripts" / "make_everyday_questions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in module.rows())
    assert packaged_path().read_text() == expected


def test_kinds_module_prints_task_flags(capsys):
    assert main(["held-out"]) == 0
    assert capsys.readouterr().out.split() == [w for t in HELD_OUT_KINDS for w in ("--task", t)]
    assert main(["nope"]) == 2


# ------------------------------------------------------------------ what a prompted conductor is shown


def test_a_prompted_conductor_is_shown_names_and_descriptions_by_default():
    from openconductor.conductor.prompt import conductor_messages

    spec = PoolSpec(name="p", workers=[{"name": "gpt-4o-mini", "provider": "simulated", "description": "fast and cheap"},
                                       {"name": "gpt-4o", "provider": "simulated", "model": "gpt-4o"},
                                       {"name": "py", "provider": "python"}])
    assert spec.conductor.show == "descriptions"
    system = conductor_messages("q", spec, show=spec.conductor.show)[0]["content"]
    assert "Model id 0: gpt-4o-mini — fast and cheap" in system
    assert "Model id 1: gpt-4o — simulated model gpt-4o" in system  # no description: its model says what it is
    assert "Model id 2: py — a python tool" in system
    ids = conductor_messages("q", spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"show": "ids"})}), show="ids")[0]["content"]
    assert "Model id 0\nModel id 1\nModel id 2" in ids and "gpt-4o" not in ids


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "pools").glob("*.toml")), ids=lambda p: p.name)
def test_every_example_pool_describes_its_workers(path):
    spec = load_pool(path)  # parses only: keys and SDKs are checked when a pool is used
    assert spec.conductor.show != "ids"
    missing = [w.name for w in spec.workers if w.provider != "conductor" and not w.description.strip()]
    assert not missing, f"{path.name}: workers without a description: {missing}"


def test_every_kind_generates_the_same_questions_in_every_process():
    """A generator whose questions follow the interpreter's hash seed (reasoning-gym's ransom_note iterates
    over a set) would give a resumed eval, or a training run's second process, other questions."""
    pytest.importorskip("reasoning_gym")
    import os
    import subprocess
    import sys

    code = ("import hashlib, warnings; warnings.filterwarnings('ignore'); from openconductor.tasks import load_task; "
            "from openconductor.tasks.kinds import HELD_OUT_KINDS, TRAIN_KINDS, HELD_OUT_SEED; "
            "print(hashlib.sha256(''.join(q.prompt for t in HELD_OUT_KINDS + TRAIN_KINDS if t.startswith('rg:') "
            "for q in load_task(t, limit=5, seed=HELD_OUT_SEED).questions).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)}, capture_output=True,
                              text=True, check=True).stdout for seed in (1, 2)}
    assert len(digests) == 1
