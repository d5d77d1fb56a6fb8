"""World v3 (SIMULATED): visible subtopic and difficulty, calibration to Table 7, the evidence margin, the fast path."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from openconductor.executor import solve
from openconductor.policies.baselines import GivenWorkflow
from openconductor.pool import Pool, load_pool
from openconductor.sim import questions as Q
from openconductor.sim import world_v3
from openconductor.sim.world_v3 import Profile, bucket_of, make_questions, run_plan
from openconductor.sim import world as v2
from openconductor.evaluation.calibration import table
from openconductor.evaluation.calibration_v3 import (
    GROUPINGS, calibrate_v3, candidate_plans, lookup_tables, plan_scores,
)
from openconductor.workflow import Step, Workflow

POOL = Path(__file__).resolve().parents[1] / "examples" / "pools" / "simulated_paper_v3.toml"
SOLVE, CHECK = "Solve the overall task and give the final answer.", "Check the previous answer carefully, fix any error, and give the final answer."
PLAN, IMPLEMENT = "Outline a plan: the key steps, without solving it.", "Follow the plan from the previous agent and give the final answer."


@pytest.fixture(scope="module")
def spec():
    return load_pool(POOL)


@pytest.fixture(scope="module")
def profiles(spec):
    return [Profile.from_spec(w) for w in spec.workers]


def test_every_phrasing_keeps_its_bucket():
    """Each bucket's questions, drawn in every combination of cue, frame and body, read back as that bucket."""
    g = random.Random(3)
    for bucket in Q.buckets():
        texts = {Q.compose(*bucket, g) for _ in range(150)}
        assert len(texts) > 100  # varied wording, not one fixed tag
        assert {bucket_of(t) for t in texts} == {bucket}, bucket


def test_rephrasing_a_question_keeps_its_bucket_and_its_workers_odds(profiles):
    """The same content under another difficulty cue, and the same cue over another body of the subtopic:
    the world reads the same bucket, and every worker's accuracy alone is that of the bucket."""
    body = "Find the number of lattice points strictly inside the circle x^2 + y^2 = 425."
    forms = [f"{cue} {body}" for cue in Q._CUES["hard"]] + [f"{body}\n({cue.rstrip(':.')}.)" for cue in Q._CUES["hard"]]
    assert {bucket_of(t) for t in forms} == {("math", "geometry", "hard")}
    easy = f"Quick warm-up: {body}"
    assert bucket_of(easy) == ("math", "geometry", "easy")
    claude = next(p for p in profiles if p.name == "claude-sonnet-4")
    odds = [claude.skill("math", "geometry", level) for level in Q.LEVELS]
    assert odds == sorted(odds, reverse=True) and odds[0] > odds[2] + 0.1


def test_the_subtopic_changes_which_worker_is_best(profiles):
    def best(domain: str, subtopic: str) -> str:
        qs = [q for q in make_questions(1200, seed=4, domains=(domain,)) if q.subtopic == subtopic]
        return max(profiles, key=lambda p: sum(world_v3.solo_correct(q.text, p) for q in qs)).name

    assert best("math", "geometry") == "claude-sonnet-4"
    assert best("math", "number_theory") == "r1-distill-qwen-32b"
    assert best("lcb", "graphs") == "gemini-2.5-pro"
    assert best("lcb", "dp") == "gpt-5-minimal"


def _accuracy(steps, questions, profiles) -> float:
    return sum(run_plan(q.text, steps, profiles)[1] for q in questions) / len(questions)


def test_difficulty_changes_what_structure_pays(profiles):
    """Easy: one worker is as good as a plan -> implement -> check (extra steps only cost); hard: the chain pays."""
    gpt = next(i for i, p in enumerate(profiles) if p.name == "gpt-5-minimal")
    gemini = next(i for i, p in enumerate(profiles) if p.name == "gemini-2.5-pro")
    single = [(gpt, SOLVE, ())]
    chain = [(gemini, PLAN, ()), (gpt, IMPLEMENT, "all"), (gemini, CHECK, "all")]
    qs = make_questions(2400, seed=9, domains=("lcb",))
    easy, hard = [q for q in qs if q.level == "easy"], [q for q in qs if q.level == "hard"]
    assert _accuracy(single, easy, profiles) > _accuracy(chain, easy, profiles) + 0.05
    assert _accuracy(chain, hard, profiles) > _accuracy(single, hard, profiles) + 0.08


@pytest.mark.heavy  # n=1000 through the executor: ~50 s on 2 cores, so with world v2's calibration in the heavy run
def test_calibration_reproduces_table_7_within_tolerance(spec):
    rows = calibrate_v3(spec, n=1000, seed=11, select_n=0)
    assert [r for r in rows if r.kind == "single"] and not [r.system for r in rows if r.within() is False], table(rows)
    assert {r.kind for r in rows} == {"single", "MoA", "self-reflection", "oracle"}


@pytest.mark.heavy
def test_the_best_per_bucket_plan_beats_the_best_per_domain_plan_by_4_points(profiles):
    """Lookup tables selected on one question set and scored on another (the world's fast path)."""
    plans = candidate_plans(len(profiles))
    selection = make_questions(1200, seed=101)
    tables = lookup_tables(plans, plan_scores(plans, profiles, selection), selection)
    held = make_questions(1200, seed=5, exclude=frozenset(q.text for q in selection))

    def score(label: str) -> float:
        key = GROUPINGS[label]
        return 100 * sum(run_plan(q.text, [(s.worker, s.subtask, s.access) for s in tables[label][key(q)].steps], profiles)[1]
                         for q in held) / len(held)

    assert score("bucket (subtopic x level)") >= score("domain") + 4.0
    assert score("subtopic") > score("domain")


def test_the_fast_path_decides_as_the_executor_does(spec, profiles):
    """run_plan against a full run through the executor and the simulated provider, for random plans,
    including a worker whose context limit some of them exceed."""
    small = spec.workers[0].model_copy(update={"options": {**spec.workers[0].options, "context": 900}})
    tight = spec.model_copy(update={"workers": [small, *spec.workers[1:]]})
    tight_profiles = [Profile.from_spec(w) for w in tight.workers]
    g = random.Random(2)
    subtasks = [SOLVE, CHECK, PLAN, IMPLEMENT, "Synthesise the previous answers into one final answer."]
    plans = []
    for _ in range(30):
        k = g.randint(1, 4)
        plans.append([(g.randrange(6), g.choice(subtasks), () if i == 0 or g.random() < 0.3 else "all") for i in range(k)])
    questions = make_questions(16, seed=13)

    async def executed():
        out = []
        async with Pool(tight) as pool:
            for steps in plans:
                wf = Workflow(tuple(Step(w, s, a) for w, s, a in steps))
                for q in questions:
                    run = await solve(q.text, GivenWorkflow(wf), pool, seed=0, stream_tokens=False)
                    out.append((*v2.grade_simulated(run.final_answer, q.reference), run.totals.usage.total_tokens))
                    stated.append([v2.extract_final(step.output) for step in run.steps])
        return out

    stated: list[list] = []
    fast = [tuple(run_plan(q.text, steps, tight_profiles)) for steps in plans for q in questions]
    assert asyncio.run(executed()) == fast
    # What each step stated, as a later round that reads them sees it (a conductor that calls itself reads them so)
    assert stated == [world_v3.step_answers(q.text, steps, tight_profiles)[0] for steps in plans for q in questions]
    assert any(not r.well_formed for r in (run_plan(q.text, s, tight_profiles) for s in plans for q in questions))  # a context overflowed


def test_a_worker_with_an_unknown_subtopic_is_refused(spec):
    bad = spec.workers[0].model_copy(update={"options": {**spec.workers[0].options, "subtopics": {"math.topology": 0.5}}})
    with pytest.raises(ValueError, match="unknown subtopic.*math.topology"):
        Profile.from_spec(bad)


def test_stratified_questions_give_single_workers_their_table_accuracy(profiles):
    qs = make_questions(1200, seed=3, stratify=profiles)
    assert len({q.text for q in qs}) == 1200
    assert {q.bucket for q in qs} == set(Q.buckets())
    for p in profiles:
        for d in Q.DOMAINS:
            got = sum(world_v3.solo_correct(q.text, p) for q in qs if q.domain == d) / 300
            assert abs(got - p.skills[d]) <= 0.02, (p.name, d, got)


def test_every_difficulty_cue_reads_as_its_level():
    assert {(level, Q.difficulty_of(cue)) for level, cues in Q._CUES.items() for cue in cues} == {(lvl, lvl) for lvl in Q.LEVELS}
