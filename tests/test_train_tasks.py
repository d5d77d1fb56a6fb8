"""Training on registered tasks (``data.kind = "tasks"``): questions from real benchmarks, each graded by
its own grader inside the reward. Real path: reasoning-gym's generators and scorers, and the python tool
running programs in the bubblewrap sandbox; no model is needed (the workflows are given)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import reasoning_gym

from openconductor.pool import PoolSpec, WorkerSpec
from openconductor.train.config import TrainConfigError, load_train_config
from openconductor.train.data import Item, build_rows, decode_grading, load_items
from openconductor.train.reward import WorkflowReward
from openconductor.workflow import Step, Workflow

ROOT = Path(__file__).resolve().parents[1]


def config(tmp_path: Path, data: str, pool: str = "pools/local_tiny.toml"):
    path = tmp_path / "train.toml"
    path.write_text(f'pool = "{ROOT / "examples" / pool}"\n[data]\n{data}\n')
    return load_train_config(path)


def test_task_items_are_split_over_tasks_in_rotation_and_held_out_never_repeats(tmp_path):
    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic", "rg:letter_counting"]\nn_train = 7\nn_eval = 4\nseed = 1\neval_seed = 2')
    train, held = load_items(cfg), load_items(cfg, held_out=True)
    assert [i.domain for i in train] == ["basic_arithmetic", "letter_counting"] * 3 + ["basic_arithmetic"]
    assert sorted(i.domain for i in held) == ["basic_arithmetic"] * 2 + ["letter_counting"] * 2
    assert not {i.question for i in train} & {i.question for i in held}
    assert all(i.task == "reasoning_gym" and i.grader_options["dataset"] in i.domain for i in train)
    # The answer-format instruction of the task is part of what the conductor and workers are asked.
    assert all("answer" in i.question.lower() for i in train)
    rows = build_rows(cfg, PoolSpec(name="p", workers=[WorkerSpec(name="python", provider="python")]), train)
    reference, options = decode_grading(rows[0]["grading"])
    assert options == {"dataset": "basic_arithmetic"} and reference == train[0].reference


def test_fixed_dataset_held_out_questions_come_after_the_training_ones(tmp_path):
    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 3\nn_eval = 2')
    train, held = load_items(cfg), load_items(cfg, held_out=True)
    assert len(train) == 3 and len(held) == 2 and not {i.question for i in train} & {i.question for i in held}
    assert all(i.task == "code" for i in train + held)


def test_a_task_offset_keeps_the_first_questions_of_a_fixed_dataset_out_of_training(tmp_path):
    """HumanEval 0-19 is the offline pool's evaluation set: with offset = 20 neither training nor its
    held-out checks read them."""
    from openconductor.tasks import load_task

    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 3\nn_eval = 2\n[data.task_options.humaneval]\noffset = 20')
    train, held = load_items(cfg), load_items(cfg, held_out=True)
    evaluation = load_task("humaneval", limit=20)
    kept_out = {evaluation.text(q) for q in evaluation.questions}
    assert len(train) == 3 and len(held) == 2 and not {i.question for i in train + held} & kept_out
    assert train[0].question == load_items(config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 21\nn_eval = 0'))[20].question
    for bad in ("-1", "2.5", '"20"'):
        with pytest.raises(TrainConfigError, match="offset must be a whole number >= 0"):
            config(tmp_path, f'kind = "tasks"\ntasks = ["humaneval"]\n[data.task_options.humaneval]\noffset = {bad}')


def test_the_grading_column_keeps_the_reference_types_the_grader_compares(tmp_path):
    """ARC's scorer compares tuples of tuples: a JSON round trip (tuples -> lists) scored the exact right
    grid 0.05. The row's grading column must give the reward the same reference the evaluation grades."""
    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["rg:arc_agi"]\nn_train = 1\nn_eval = 0')
    item = load_items(cfg)[0]
    assert isinstance(item.reference["metadata"]["output"], tuple)
    row = build_rows(cfg, PoolSpec(name="p", workers=[WorkerSpec(name="python", provider="python")]), [item])[0]
    reference, options = decode_grading(row["grading"])
    assert reference == item.reference and options == item.grader_options == {"dataset": "arc_agi"}
    score = reasoning_gym.get_score_answer_fn("arc_agi")  # what the reasoning_gym grader hands the answer to
    assert score(item.reference["answer"], reference) == score(item.reference["answer"], item.reference) == 1.0
    odd = Item("q", {"set": {1, 2}, "key": {3: (4, 5)}}, "exact", grader_options={"n": 1})
    assert decode_grading(odd.grading()) == (odd.reference, {"n": 1})


def test_bare_share_shows_half_of_each_tasks_warmup_prompts_without_the_answer_format_instruction(tmp_path):
    """Task questions end in an answer-format instruction; a user's question does not. ``bare_share`` shows
    a share of each task's warm-up prompts (all of a prompt's consecutive targets together) as the bare
    question, so the plan is tied to what is asked, not to the instruction's presence."""
    from openconductor.tasks.reasoning_gym_tasks import INSTRUCTION
    from openconductor.train.data import with_bare_questions

    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic", "rg:letter_counting"]\nn_train = 8\nn_eval = 0')
    items = load_items(cfg)
    assert all(i.bare and i.question == f"{i.bare}\n\n{INSTRUCTION}" for i in items)
    spec = PoolSpec(name="p", workers=[WorkerSpec(name="python", provider="python")])
    rows = build_rows(cfg, spec, items)
    shown = [row for row in rows for _ in range(2)]  # 2 targets per prompt
    out = with_bare_questions(cfg, spec, shown, items, 0.5)
    assert out == with_bare_questions(cfg, spec, shown, items, 0.5)  # seeded
    bare = {i.question: i.bare for i in items}
    stripped = [i for i, (new, old) in enumerate(zip(out, shown)) if new is not old]
    for i in stripped:
        assert out[i]["question"] == bare[shown[i]["question"]]
        user = out[i]["prompt"][-1]["content"]
        assert out[i]["question"] in user and INSTRUCTION not in user and INSTRUCTION in shown[i]["prompt"][-1]["content"]
        assert {k: v for k, v in out[i].items() if k not in ("question", "prompt")} == {k: v for k, v in shown[i].items() if k not in ("question", "prompt")}
    assert set(stripped) == {j for i in stripped for j in (i - i % 2, i - i % 2 + 1)}  # a prompt's targets keep one form
    for domain in ("basic_arithmetic", "letter_counting"):  # 4 prompts each, 2 of them bare
        assert sum(1 for i in stripped if out[i]["domain"] == domain) == 4
    assert with_bare_questions(cfg, spec, shown, items, 0.0) == shown
    assert all(row["question"] in bare.values() for row in with_bare_questions(cfg, spec, shown, items, 1.0))
    one = [r for r in shown if r["domain"] == "letter_counting"][:1]
    assert with_bare_questions(cfg, spec, one, items, 0.5)[0] is not one[0]  # half of 1 prompt rounds up
    # humaneval's instruction ("Complete the function ...") is stripped the same way.
    he = load_items(config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 1\nn_eval = 0'))[0]
    assert he.bare and he.question.startswith(he.bare) and he.bare != he.question


def test_bare_share_config_errors(tmp_path):
    with pytest.raises(TrainConfigError, match="warmup_sft.bare_share: Input should be less than or equal to 1"):
        config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic"]\n[warmup_sft]\nbare_share = 1.5')
    with pytest.raises(TrainConfigError, match="needs data.kind = 'tasks', got 'simulated'"):
        config(tmp_path, 'kind = "simulated"\n[warmup_sft]\nbare_share = 0.5')


def test_task_splits_that_cannot_be_met_are_config_errors(tmp_path):
    """A fixed dataset smaller than the split asks, two names for one task: a TrainConfigError, not a short run."""
    with pytest.raises(TrainConfigError, match="fewer than the 200 training ones"):
        load_items(config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 200\nn_eval = 10'))
    with pytest.raises(TrainConfigError, match="held-out questions that are not training ones, 50 asked"):
        load_items(config(tmp_path, 'kind = "tasks"\ntasks = ["humaneval"]\nn_train = 150\nn_eval = 50'), held_out=True)
    with pytest.raises(TrainConfigError, match="twice"):
        load_items(config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic", "rg:basic_arithmetic"]\nn_train = 4\nn_eval = 2'))


def test_task_config_errors_are_typed(tmp_path):
    with pytest.raises(TrainConfigError, match="needs data.tasks"):
        config(tmp_path, 'kind = "tasks"')
    with pytest.raises(TrainConfigError, match="does not list"):
        config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic"]\n[data.task_options.countdown]\nmin_numbers = 3')
    with pytest.raises(TrainConfigError, match=r"sets \['seed'\], which training sets itself"):
        config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic"]\n[data.task_options.basic_arithmetic]\nseed = 3')
    with pytest.raises(TrainConfigError, match="more than once"):
        config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic", "Basic_Arithmetic"]')
    with pytest.raises(TrainConfigError, match="3 tasks need n_train >= 3"):
        config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic", "rg:letter_counting", "syllogism"]\nn_train = 2')
    with pytest.raises(TrainConfigError, match="data.n_train: Input should be greater than or equal to 1"):
        config(tmp_path, 'kind = "simulated"\nn_train = -1')
    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["no_such_task"]')
    with pytest.raises(TrainConfigError, match="unknown task 'no_such_task'"):
        load_items(cfg)


def test_jsonl_rows_may_carry_structured_references_and_grader_options(tmp_path):
    data = tmp_path / "q.jsonl"
    entry = {"question": "What is 2 + 3?", "answer": "5", "metadata": {}}
    lines = [{"question": f"q{i}", "reference": entry, "task": "reasoning_gym", "grader_options": {"dataset": "basic_arithmetic"}} for i in range(10)]
    data.write_text("\n".join(json.dumps(x) for x in lines) + "\n" + json.dumps({"question": "q", "reference": 7, "task": "numeric"}) + "\n")
    cfg = config(tmp_path, f'kind = "jsonl"\npath = "{data}"')
    items = {i.question: i for i in load_items(cfg) + load_items(cfg, held_out=True)}
    assert items["q"].reference == "7" and items["q"].grader_options == {}  # scalars stay strings, as before
    assert items["q3"].reference == entry and items["q3"].grader_options == {"dataset": "basic_arithmetic"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "reference": "1", "task": "numeric", "grader_options": [1]}) + "\n")
    with pytest.raises(TrainConfigError, match="grader_options must be a JSON object"):
        load_items(config(tmp_path, f'kind = "jsonl"\npath = "{bad}"'))
    for line, message in (("[1, 2]", "need a JSON object with question"), ('{"question": "q"', "not valid JSON"),
                          (json.dumps({"question": "q", "reference": "1", "task": "numeric", "grader_options": None}), "must be a JSON object")):
        bad.write_text(line + "\n")
        with pytest.raises(TrainConfigError, match=message):
            load_items(config(tmp_path, f'kind = "jsonl"\npath = "{bad}"'))


async def test_reward_grades_task_rows_with_their_own_grader_through_the_sandbox(tmp_path):
    """A program that prints the right answer earns 1 from reasoning-gym's own scorer; a wrong one 0.5."""
    cfg = config(tmp_path, 'kind = "tasks"\ntasks = ["basic_arithmetic"]\nn_train = 2\nseed = 5')
    items = load_items(cfg)
    spec = PoolSpec(name="t", workers=[WorkerSpec(name="python", provider="python", max_retries=0, options={"wall_s": 10, "cpu_s": 5})])
    rows = build_rows(cfg, spec, items)
    program = lambda value: Workflow((Step(0, f"Run it:\n```python\nprint('Final answer:', {value})\n```", ()),), reasoning="Reasoning: compute it.").render()  # noqa: E731
    right, wrong = items[0].reference["answer"], f"{items[0].reference['answer']} + 1"
    columns = {k: [rows[0][k]] * 2 for k in ("question", "reference", "grading", "task", "domain")}
    reward = WorkflowReward(spec, cfg.reward, cfg.prompt)
    logged: dict[str, float] = {}
    scores = await reward(prompts=[[]] * 2, completions=[program(right), program(wrong)], log_metric=logged.__setitem__, **columns)
    await reward.aclose()
    assert scores == [cfg.reward.correct, cfg.reward.wrong]
    assert [s.correct for s in reward.last_samples] == [True, False]
    assert logged["basic_arithmetic/accuracy"] == 0.5


REASONING_KINDS = {"basic_arithmetic", "gsm_symbolic", "letter_counting", "simple_equations", "syllogism"}


@pytest.mark.parametrize("recipe, domains", [("train_local_tools.toml", REASONING_KINDS | {"humaneval"}),
                                             ("train_local_tools_reasoning.toml", REASONING_KINDS)])
def test_the_offline_pool_examples_train_on_their_tasks_with_the_packaged_pool(recipe, domains):
    """examples/train_local_tools.toml (the shipped conductor's recipe) and the previous one's: the real
    offline pool (pool = "default"), their kinds of questions with their own graders, workers shown by
    description, and held-out questions apart from training and from the evaluation's HumanEval 0-19."""
    from openconductor.pool import default_pool_path, load_pool

    cfg = load_train_config(ROOT / "examples" / recipe)
    assert cfg.pool_path == default_pool_path()
    spec = load_pool(cfg.pool_path)
    items = load_items(cfg)
    assert len(items) == cfg.data.n_train and {i.domain for i in items} == domains
    held = load_items(cfg, held_out=True)
    assert len(held) == cfg.data.n_eval and not {i.question for i in items} & {i.question for i in held}
    from openconductor.tasks import load_task

    evaluation = load_task("humaneval", limit=20)  # what docs/evaluation.md evaluates the conductor on
    assert not {i.question for i in items + held} & {evaluation.text(q) for q in evaluation.questions}
    rows = build_rows(cfg, spec, items[:2])
    system = rows[0]["prompt"][0]["content"]
    assert "python" in system and "runs the Python program" in system  # the tool is described, not an id
    assert cfg.path(cfg.reward.replay).name == "local-tools-replay.sqlite3"
