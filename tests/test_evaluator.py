"""The one evaluator (openconductor.evaluation) and the per-domain baselines it runs, on the SIMULATED world
and synthetic records: no model is involved and no number here is a measurement."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.evaluation import EvalError, EvalRecord, evaluate, markdown_table, summarize
from openconductor.policies import PlanRequest, Previous, make_policy
from openconductor.policies.baselines import GivenPlans, GivenWorkflow
from openconductor.policies.lookup import LookupTable, OracleRouter, best_by_domain
from openconductor.policies.specs import parse_policy_specs
from openconductor.pool import Pool, PoolSpec, load_pool
from openconductor.records import Usage
from openconductor.sim import world
from openconductor.tasks import load_task
from openconductor.tasks.simulated import simulated_task
from openconductor.workflow import Step, Workflow

ROOT = Path(__file__).resolve().parents[1]
PAPER_POOL = ROOT / "examples" / "pools" / "simulated_paper.toml"


@pytest.fixture(scope="module")
def spec() -> PoolSpec:
    return load_pool(PAPER_POOL)


def _run(coro):
    return asyncio.run(coro)


async def _evaluate(spec, task, policies, **kw):
    async with Pool(spec) as pool:
        return await evaluate([task], policies, pool, concurrency=16, **kw)


def test_the_oracle_sends_each_domain_to_its_best_declared_worker(spec):
    task = simulated_task(world.make_questions(40, seed=3))
    best = best_by_domain(spec, list(world.DOMAINS))
    assert best["lcb"] == "gpt-5-minimal" and best["math"] == "gemini-2.5-pro"
    records = _run(_evaluate(spec, task, [("oracle", OracleRouter())]))
    assert len(records) == 40 and all(r.workers_used == [best[r.domain]] for r in records)
    # The same table given explicitly plans the same; a pool without declared skills is a clear error.
    explicit = _run(_evaluate(spec, task, [("oracle", OracleRouter(best))]))
    assert [r.correct for r in explicit] == [r.correct for r in records]
    with pytest.raises(ValueError, match="needs per-domain skills"):
        parse_policy_specs(["oracle"], load_pool(ROOT / "tests" / "data" / "sim_pool.toml"))


def test_a_lookup_table_file_plans_per_domain_with_a_default(tmp_path, spec):
    table = tmp_path / "table.toml"
    table.write_text(
        'description = "code is written and checked"\n'
        '[domains.lcb]\nsteps = [{ worker = "gpt-5-minimal", subtask = "Solve the task.", access = [] },'
        ' { worker = "gemini-2.5-pro", subtask = "Check the previous answer and give the final answer.", access = "all" }]\n'
        '[default]\nsteps = [{ worker = "claude-sonnet-4", subtask = "Solve the overall task and give the final answer." }]\n'
    )
    [(label, policy)] = parse_policy_specs([f"lookup:{table}"], spec)
    assert label == f"lookup:{table}" and isinstance(policy, LookupTable)
    task = simulated_task(world.make_questions(8, seed=4))
    records = _run(_evaluate(spec, task, [(label, policy)]))
    for r in records:
        expected = ["gpt-5-minimal", "gemini-2.5-pro"] if r.domain == "lcb" else ["claude-sonnet-4"]
        assert r.workers_used == expected and r.accesses == ([[], "all"] if r.domain == "lcb" else [[]])
    # A verification round accepts; a worker the pool lacks is an error before anything runs.
    async def accept():
        async with Pool(spec) as pool:
            return await policy.plan(PlanRequest("q", pool, previous=Previous(answer="a"), domain="lcb"))
    assert _run(accept()).workflow.is_accept
    table.write_text('[domains.math]\nsteps = [{ worker = "ghost", subtask = "x" }]\n')
    with pytest.raises(ValueError, match=r"unknown worker\(s\) ghost"):
        parse_policy_specs([f"lookup:{table}"], spec)
    with pytest.raises(ValueError, match="no workflow for domain 'mmlu' and no default"):
        LookupTable({"math": Workflow((Step(0, "Solve."),))}).workflow_for("mmlu", spec)


def test_the_simulated_task_grades_with_the_worlds_rule():
    task = load_task("simulated", limit=8, seed=2, domains="math,lcb")
    assert len(task) == 8 and {q.metadata["domain"] for q in task.questions} == {"math", "lcb"}
    from openconductor.graders import grade

    q = task.questions[0]
    assert grade("simulated", f"work\nFinal answer: {q.reference}", q.reference).correct
    wrong = grade("simulated", "Final answer: nope", q.reference)
    assert wrong.score == 0.0 and wrong.extracted == "nope"
    assert grade("simulated", "no answer here", q.reference).extracted is None


def test_given_plans_score_unparseable_text_as_a_failed_plan_and_count_the_conductors_tokens(spec):
    questions = world.make_questions(4, seed=6)
    texts = {q.text: Workflow((Step(2, "Solve the overall task and give the final answer."),)).render() for q in questions}
    texts[questions[1].text] = "no plan at all"
    usage = {q.text: Usage(input_tokens=100, output_tokens=20) for q in questions}
    policy = GivenPlans(texts, max_steps=3, usage=usage)
    records = _run(_evaluate(spec, simulated_task(questions), [("plans", policy)]))
    failed = records[1]
    assert failed.status == "plan_failed" and not failed.planned and failed.steps == 0 and failed.conductor_tokens == 120
    assert all(r.conductor_tokens == 120 and r.tokens == r.worker_tokens + 120 for r in records)
    [row] = summarize(records)
    assert row.parse_rate == 0.75 and row.steps == 1.0 and row.shapes == {"single": 0.75, "unparseable": 0.25}


def _record(policy: str, qid: int, correct: bool, domain: str = "d") -> EvalRecord:
    return EvalRecord(task="t", policy=policy, question_id=str(qid), repeat=0, question=f"q{qid}", domain=domain, run_id="r", seed=0,
                      status="ok", final_answer="a", correct=correct, score=float(correct), steps=1, calls=1, tokens=10,
                      worker_tokens=10, conductor_tokens=0, cost_usd=0.0, wall_s=0.0, workers_used=["w"], accesses=[[]])


def test_summaries_compare_every_policy_with_a_named_baseline_on_the_same_questions():
    records = [_record("base", i, i < 50) for i in range(100)] + [_record("new", i, i < 60) for i in range(100)]
    records += [_record("other", i, True) for i in range(200, 210)]  # no question in common with the baseline
    rows = {r.policy: r for r in summarize(records, against="base", resamples=2_000)}
    vs = rows["new"].vs
    assert vs is not None and vs.baseline == "base" and vs.n == 100 and vs.mean == pytest.approx(0.10) and 0.0 < vs.low < 0.10 < vs.high
    assert rows["base"].vs is None and rows["other"].vs is None
    assert "| vs base (points, 95% CI) |" in markdown_table(list(rows.values())) and "+10.0 [" in markdown_table(list(rows.values()))
    with pytest.raises(EvalError, match="baseline 'nobody' is not among the policies"):
        summarize(records, against="nobody")


def test_per_domain_breakdowns_split_accuracy_steps_and_workers():
    records = [_record("p", 0, True, "a"), _record("p", 1, False, "a"), _record("p", 2, True, "b")]
    records[2] = records[2].model_copy(update={"steps": 2, "workers_used": ["x", "y"], "accesses": [[], "all"]})
    [row] = summarize(records)
    assert row.domains["a"].accuracy == 0.5 and row.domains["b"].steps == 2.0
    assert row.domains["b"].first_worker == {"x": 1.0} and row.domains["b"].final_worker == {"y": 1.0}
    assert row.shapes == {"single": 2 / 3, "chain-2": 1 / 3}


def test_the_training_reward_of_a_record_is_the_reward_of_the_same_run(spec):
    """The held-out table's reward column (train.reward.record_reward) and the reward GRPO optimises
    (score_completion) agree on the same workflows, penalties included."""
    from openconductor.train.config import RewardSettings
    from openconductor.train.reward import record_reward, score_completion

    settings = RewardSettings(step_weight=0.01, token_weight=0.002)
    questions = world.make_questions(12, seed=9)
    workflow = Workflow((Step(2, "Solve the overall task and give the final answer."), Step(4, "Check the previous answer and give the final answer.", "all")))
    texts = {q.text: workflow.render() for q in questions}
    texts[questions[0].text] = "garbage"

    async def both():
        async with Pool(spec) as pool:
            samples = [await score_completion(texts[q.text], question=q.text, reference=q.reference, task="simulated", pool=pool,
                                              settings=settings, max_steps=5, seed=0) for q in questions]
            records = await evaluate([simulated_task(questions)], [("p", GivenPlans(texts, max_steps=5))], pool, seed=0, seed_per_question=False)
        return samples, records

    samples, records = _run(both())
    assert [record_reward(r, settings) for r in records] == pytest.approx([s.reward for s in samples])
    assert [r.correct for r in records] == [s.correct for s in samples]


def test_baselines_run_through_the_evaluator_match_a_given_workflow(spec):
    """The moa policy and its plan rendered and given back score the same (the held-out table used to
    replay rendered baselines; it now runs the policies)."""
    questions = world.make_questions(12, seed=12)
    moa = make_policy("moa", proposers=7, aggregator="random")

    async def replayed():
        async with Pool(spec) as pool:
            plans = [(await moa.plan(PlanRequest(q.text, pool, seed=0))).workflow for q in questions]
            direct = await evaluate([simulated_task(questions)], [("moa", moa)], pool, seed=0, seed_per_question=False)
            given = []
            for q, wf in zip(questions, plans):
                given += await evaluate([simulated_task([q])], [("given", GivenWorkflow(wf))], pool, seed=0, seed_per_question=False)
        return direct, given

    direct, given = _run(replayed())
    assert [(r.final_answer, r.tokens) for r in direct] == [(r.final_answer, r.tokens) for r in given]


def test_cli_train_select_prints_the_chosen_checkpoint(tmp_path):
    validation = tmp_path / "validation"
    validation.mkdir()
    for name, accuracy in [("warmup", 0.6), ("checkpoint-40", 0.7), ("final", 0.7)]:
        (validation / f"{name}.json").write_text(json.dumps([{"system": "after GRPO (trained)", "accuracy": accuracy, "steps": 2.0}]))
    result = CliRunner().invoke(app, ["train-select", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(tmp_path / "final")  # a tie goes to the later one
    empty = CliRunner().invoke(app, ["train-select", str(tmp_path / "nowhere")])
    assert empty.exit_code == 2 and "no validation rows" in empty.output


def test_cli_train_eval_rejects_run_rows_without_a_run(tmp_path):
    result = CliRunner().invoke(app, ["train-eval", str(ROOT / "examples" / "train_cpu_smollm2.toml"), "--only", "final"])
    assert result.exit_code == 2 and "--run RUN_DIR" in result.output
    result = CliRunner().invoke(app, ["train-eval", str(ROOT / "examples" / "train_cpu_smollm2.toml"), "--run", str(tmp_path), "--only", "best"])
    assert result.exit_code == 2 and "--only takes untrained, warmup, final" in result.output
