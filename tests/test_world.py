"""World v2 (the SIMULATED pool): calibration to the paper's Table 7, roles read from wording, correlated errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openconductor.executor import solve
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, load_pool
from openconductor.sim import world
from openconductor.evaluation.calibration import calibrate, table
from openconductor.workflow import Step, Workflow

POOL = Path(__file__).resolve().parents[1] / "examples" / "pools" / "simulated_paper.toml"


@pytest.fixture(scope="module")
def spec():
    return load_pool(POOL)


@pytest.fixture(scope="module")
def traits(spec):
    return {w.name: world.Traits.from_spec(w) for w in spec.workers}


@pytest.mark.heavy
def test_calibration_reproduces_the_papers_baselines_within_tolerance(spec):
    rows = calibrate(spec, n=1000, seed=11)  # n=400 leaves self-reflection +-2.4 points of sampling noise
    by_kind = {}
    for row in rows:
        by_kind.setdefault(row.kind, []).append(row)
    assert len(by_kind["single"]) == 6
    bad = [r.system for r in rows if r.within() is False]
    assert not bad, table(rows)
    # MoA and self-reflection do not beat the best single worker by more than the paper's margin ...
    best_single = max(r.accuracy["avg"] for r in by_kind["single"])
    assert by_kind["MoA"][0].accuracy["avg"] < best_single
    # (The paper: +0.4. This world gives self-reflection -0.6 to +0.3 over the best single worker at seeds
    # 7 and 11; the bound leaves room for other question samples.)
    assert all(r.accuracy["avg"] < best_single + 3.0 for r in by_kind["self-reflection"]), table(rows)
    # ... while some workflow family reaches what the paper's trained Conductor reached.
    assert rows[-1].kind == "best-family" and rows[-1].accuracy["avg"] >= 72.0, table(rows)
    assert by_kind["MoA"][0].calls == 8.0


@pytest.mark.parametrize(
    "text, role",
    [
        ("Outline a plan for the algorithm, without solving it.", "plan"),
        ("Outline a plan; do not solve it yet.", "plan"),
        ("Design an efficient algorithm and explain it step by step.", "plan"),
        ("Implement the algorithm described by the previous agent in Python.", "solve"),
        ("Solve the overall task and give the final answer.", "solve"),
        ("Review the implementation, fix any bug, and output the final code.", "check"),
        ("Verify the previous answer.", "check"),
        ("Double-check the computation and correct any mistake.", "check"),
        ("Synthesise the responses above into one answer.", "aggregate"),
        ("Do your best.", "solve"),
    ],
)
def test_roles_are_read_from_wording(text, role):
    assert world.role_of(text) == role


def test_a_rephrased_subtask_with_the_same_role_has_the_same_outcome(spec):
    questions = world.make_questions(40, seed=21)
    first = Workflow((Step(2, "Solve the task and give the final answer.", ()), Step(5, "Check the previous answer and give the final answer.", "all")))
    reworded = Workflow((Step(2, "Compute the answer to the task.", ()), Step(5, "Verify what the previous agent wrote; correct it if needed.", "all")))

    async def answers(wf):
        async with Pool(spec) as pool:
            return [(await solve(q.text, GivenWorkflow(wf), pool)).final_answer.splitlines()[-1] for q in questions]

    assert asyncio.run(answers(first)) == asyncio.run(answers(reworded))


def test_a_worker_rechecking_its_own_answer_is_no_failed_step(spec):
    """Same worker, same role, same answer gives the same text: that is an answer, never an "echo".
    (It was, and every such multi-step plan scored as a worker failure in training and evaluation.)"""
    questions = world.make_questions(24, seed=5)
    chain = Workflow(tuple(Step(2, "Answer the question." if i == 0 else "Check the answer above and fix any error.", () if i == 0 else "all") for i in range(4)))

    async def runs():
        async with Pool(spec) as pool:
            return [await solve(q.text, GivenWorkflow(chain), pool) for q in questions]

    done = asyncio.run(runs())
    assert done[0].steps[2].output == done[0].steps[3].output  # the case in point
    assert [r.status for r in done] == ["ok"] * len(done)
    assert all(s.status == "ok" for r in done for s in r.steps)


def test_errors_correlate_and_self_checks_help_less_than_cross_checks(traits):
    questions = world.make_questions(2000, seed=5, domains=("math",))
    gemini, claude = traits["gemini-2.5-pro"], traits["claude-sonnet-4"]
    g = [world.solo_correct(q.text, gemini) for q in questions]
    c = [world.solo_correct(q.text, claude) for q in questions]
    p_c_wrong = 1 - sum(c) / len(c)
    p_c_wrong_given_g_wrong = sum(1 for a, b in zip(g, c) if not a and not b) / max(1, g.count(False))
    assert p_c_wrong_given_g_wrong > 2 * p_c_wrong  # a question one worker misses is hard for the other too

    def after_check(checker):
        out = []
        for q, ok in zip(questions, g):
            draft = world.Seen("solve", gemini.name, answer=q.reference if ok else world.wrong_answer(q.text, gemini.name))
            out.append(world.decide(q.text, checker, "check", [draft]).correct)
        return sum(out) / len(out)

    solo = sum(g) / len(g)
    assert after_check(claude) > after_check(gemini) + 0.02
    assert abs(after_check(gemini) - solo) < 0.03  # checking its own answer barely moves it


def test_plans_help_their_implementer_and_a_plan_is_no_answer(traits):
    questions = world.make_questions(800, seed=8, domains=("lcb",))
    gpt = traits["gpt-5-minimal"]
    alone = sum(world.solo_correct(q.text, gpt) for q in questions) / len(questions)
    planned = []
    for q in questions:
        plan = world.decide(q.text, traits["gemini-2.5-pro"], "plan")
        assert plan.kind == "plan"
        planned.append(world.decide(q.text, gpt, "solve", [world.Seen("plan", "gemini-2.5-pro", plan=plan.value)]).correct)
    assert sum(planned) / len(planned) > alone + 0.03
    text = world.render(gpt, "plan", world.decide(questions[0].text, gpt, "plan"))
    assert world.extract_final(text) is None  # a plan as the last step leaves no final answer


def test_stratified_sets_match_single_worker_accuracies(traits):
    workers = list(traits.values())
    questions = world.make_questions(200, seed=3, domains=("rlpr",), stratify=workers)
    for t in workers:
        acc = sum(world.solo_correct(q.text, t) for q in questions) / len(questions)
        assert acc == pytest.approx(t.skills["rlpr"], abs=0.011)


def test_unknown_aptitude_is_a_typed_error(spec):
    bad = spec.workers[0].model_copy(update={"options": {**spec.workers[0].options, "aptitude": {"charisma": 1.0}}})
    with pytest.raises(ValueError, match="unknown aptitude"):
        world.Traits.from_spec(bad)
