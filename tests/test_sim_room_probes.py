"""The two probes of where room above the per-bucket table could lie (SIMULATED; docs/simulation.md, "Twenty-fourth
step"): benchmarks/sim_shapes_room.py's plan space and benchmarks/sim_recursion_room.py's accept-or-revise policy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from openconductor.sim.plan_search import CHECK, PLAN, candidate_plans
from openconductor.sim.world_v3 import make_questions

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


shapes, recursion = load("sim_shapes_room"), load("sim_recursion_room")


def test_every_plan_holds_the_five_shapes_and_never_ends_in_a_plan():
    every = shapes.every_plan([0, 1, 2], 3)
    # per step and worker: plan or solve seeing any subset of the earlier steps, check or combine seeing a non-empty one
    # (1, 2, 4 subsets at steps 1-3: 2, 6, 14 choices, of which 1, 4, 10 answer); the last step answers
    assert len(every) == 3 * 1 + (3 * 2) * (3 * 4) + (3 * 2) * (3 * 6) * (3 * 10)
    unchecked = [p for p in every if CHECK not in (s.subtask for s in p.steps)]
    assert len({shapes.form(p) for p in unchecked}) == len(unchecked)
    assert all(plan.steps[-1].subtask != PLAN for plan in every)
    assert all(s.access == "all" or len(s.access) < i for plan in every for i, s in enumerate(plan.steps) if i)  # the full set is written "all"
    # every five-shape plan, as the world reads it (an "implement" step is a solve that sees the plan)
    assert {shapes.form(p) for p in candidate_plans(3)} <= {shapes.form(p) for p in every}


def test_the_recursive_policy_accepts_two_answers_that_agree_and_otherwise_runs_round_two():
    o = recursion.Outcomes(
        solo=[["7", "7"], ["7", "9"], [None, None]],  # agree; disagree; neither answered (a plan or an overflow)
        solo_tokens=[[10, 20]] * 3,
        gold=[[True, True], [True, False], [False, False]],
        plans=[[(False, 100)], [(True, 100)], [(True, 100)]],
        seeing=[{(0, 1, 1, "check"): (False, 50)}, {(0, 1, 1, "check"): (False, 55)}, {(0, 1, 1, "check"): (True, 60)}],
    )
    assert recursion.recursive(o, 0, 1, 0) == ([1, 1, 1], [30, 130, 130], 2, 0)
    # round 2 as one step that sees both answers: its run's tokens include round 1's
    assert recursion.recursive(o, 0, 1, (1, "check")) == ([1, 0, 1], [30, 55, 60], 2, 0)
    wrong = recursion.Outcomes(solo=[["B", "B"]], solo_tokens=[[5, 5]], gold=[[False, False]], plans=[[(True, 9)]], seeing=[{}])
    assert recursion.recursive(wrong, 0, 1, 0) == ([0], [10], 0, 1)  # an agreement on a wrong letter is accepted, and counted


def test_the_recursion_probe_chooses_on_training_side_questions_alone():
    """The held-out questions score the choices and never make them: two held-out sets, the same choices."""
    from openconductor.pool import load_pool

    spec = load_pool(recursion.TRAINING_POOL)
    held_a, held_b = make_questions(48, 1000), make_questions(48, 2000)
    side = make_questions(48 * 6, 7_000, exclude=frozenset(q.text for q in held_a + held_b))
    (static, fresh, either, better), choices = recursion.compare(spec, held_a, side, screen=3, keep=2, finalists=2)
    assert recursion.compare(spec, held_b, side, screen=3, keep=2, finalists=2)[1] == choices
    assert len(choices) == 48 and all(len(s.correct) == len(held_a) for s in (static, fresh, either, better))
    for i, q in enumerate(held_a):  # per bucket, the better policy is one of the two it was chosen between
        assert better.correct[i] == (either if choices[q.bucket][-1] else static).correct[i]
